"""Informer cache logic: indexes, handlers, stale-event suppression, write-through, resume and relist.

The API here is a scripted stand-in for the network so each path is driven deterministically; the same
paths run against the real local API server in tests/controller/test_runtime_cluster.py (controller) and
tests/local/test_kubelet_*.py (node agents).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.kube import informer as informer_module
from t9k_provider.kube.api import ApiError
from t9k_provider.kube.informer import (
    NODE_INDEX,
    OWNER_INDEX,
    Informer,
    by_label,
    by_node,
    by_owner,
)
from t9k_provider.kube.resources import PODS, ResourceType


def pod(name: str, rv: int, owner: str | None = "job-uid", phase: str = "Pending") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": str(rv), "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"kind": "GenericJob", "name": "j", "uid": owner, "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": phase}}


class ScriptedApi:
    """Answers list() from ``lists`` and watch() from ``watches`` in order; records the RVs watched from."""

    def __init__(
        self, lists: list[tuple[list[dict], str] | ApiError], watches: list[list[dict] | ApiError]
    ) -> None:
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str] = []
        self.list_calls = 0
        self.exhausted = asyncio.Event()
        self.metrics = Metrics()

    async def list(self, rt: ResourceType, namespace: str | None) -> tuple[list[dict], str]:
        self.list_calls += 1
        answer = self.lists.pop(0)
        if isinstance(answer, ApiError):
            raise answer
        return answer

    async def watch(
        self, rt: ResourceType, namespace: str | None, rv: str, timeout: int
    ) -> AsyncIterator[dict]:
        self.watched_from.append(rv)
        if not self.watches:
            self.exhausted.set()
            await asyncio.Event().wait()
        script = self.watches.pop(0)
        if isinstance(script, ApiError):
            raise script
        for event in script:
            yield event


def make(api: ScriptedApi, changes: list | None = None, **options: Any) -> Informer:
    def on_change(old: dict | None, new: dict | None) -> None:
        if changes is not None:
            changes.append((old and old["metadata"]["name"], new and new["metadata"]["resourceVersion"]))

    informer = Informer(api, PODS, **options)  # type: ignore[arg-type]
    informer.add_handler(on_change)
    return informer


async def run_until_exhausted(informer: Informer, api: ScriptedApi) -> None:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(api.exhausted.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_resumes_from_last_version_and_relists_only_on_410() -> None:
    api = ScriptedApi(
        lists=[([pod("a", 5), pod("b", 6)], "10"), ([pod("a", 30), pod("c", 31)], "40")],
        watches=[
            [{"type": "MODIFIED", "object": pod("a", 11)}, {"type": "BOOKMARK", "object": pod("", 15, None)}],
            [{"type": "ADDED", "object": pod("d", 20)}],
            ApiError(410, {"reason": "Expired", "code": 410}),
        ],
    )
    changes: list = []
    informer = make(api, changes)
    await run_until_exhausted(informer, api)
    # resume from the bookmark / the last event; relist after 410
    assert api.watched_from == ["10", "15", "20", "40"]
    assert api.list_calls == 2
    names = sorted(o["metadata"]["name"] for o in informer.items())
    assert names == ["a", "c"], "the relist drops b and d, which disappeared while the watch was expired"
    assert ("b", None) in changes and ("d", None) in changes
    assert informer.get("ns", "a")["metadata"]["resourceVersion"] == "30"


async def test_writes_made_while_a_relist_is_in_flight_survive_its_older_list() -> None:
    """The Job controller creates a pod while its informer relists after a 410, and the list was taken before
    the create: the cache keeps the pod, and the newer update and delete it wrote through too (dropping the
    pod made the controller create the Job's pods again: 3 pods ran for 2 completions in a soak)."""
    informer: Informer

    class RacingApi(ScriptedApi):
        async def list(self, rt: ResourceType, namespace: str | None) -> tuple[list[dict], str]:
            answer = await super().list(rt, namespace)
            if self.list_calls == 2:  # the relist: the owner's writes land while its answer is on the way
                informer.observe(pod("new", 41))
                informer.observe(pod("a", 42, phase="Running"))
                informer.observe_deleted("ns", "b", 43)
                informer.observe(pod("c", 20))  # older than the list: the list wins
            return answer

    api = RacingApi(
        lists=[([pod("a", 5), pod("b", 6)], "10"), ([pod("a", 30), pod("b", 31), pod("c", 32)], "40")],
        watches=[ApiError(410, {"reason": "Expired", "code": 410})],
    )
    informer = make(api)
    await run_until_exhausted(informer, api)
    versions = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.items()}
    assert versions == {"a": "42", "c": "32", "new": "41"}
    informer._apply("ADDED", pod("b", 31))  # a late event of the deleted pod does not bring it back
    assert informer.get("ns", "b") is None


async def test_owner_index_follows_changes() -> None:
    api = ScriptedApi(
        lists=[([pod("a", 1), pod("b", 2, owner="other"), pod("c", 3, owner=None)], "3")],
        watches=[[{"type": "MODIFIED", "object": pod("b", 4)}, {"type": "DELETED", "object": pod("a", 5)}]],
    )
    informer = make(api, indexers={OWNER_INDEX: by_owner})
    await run_until_exhausted(informer, api)
    assert [o["metadata"]["name"] for o in informer.by_index(OWNER_INDEX, "job-uid")] == ["b"]
    assert informer.by_index(OWNER_INDEX, "other") == []


async def test_stale_events_do_not_overwrite_newer_writes() -> None:
    api = ScriptedApi(lists=[([pod("a", 5)], "5")], watches=[])
    changes: list = []
    informer = make(api, changes)
    await run_until_exhausted(informer, api)
    informer.observe(pod("a", 9, phase="Running"))  # our own write came back with RV 9
    assert changes[-1] == ("a", "9")
    n = len(changes)
    informer._apply("MODIFIED", pod("a", 7))  # the watch is behind
    assert informer.get("ns", "a")["metadata"]["resourceVersion"] == "9"
    informer._apply("MODIFIED", pod("a", 9))  # the echo of our own write
    assert len(changes) == n, "neither the stale event nor the echo is a change"


async def test_tombstone_blocks_late_events_until_the_watch_passes_it() -> None:
    api = ScriptedApi(lists=[([pod("a", 5)], "5")], watches=[])
    informer = make(api)
    await run_until_exhausted(informer, api)
    informer.observe_deleted("ns", "a", 12)
    informer._apply("MODIFIED", pod("a", 8))
    assert informer.get("ns", "a") is None, "a late update must not resurrect a deleted object"
    informer._apply("ADDED", pod("a", 20))
    assert informer.get("ns", "a") is not None, "a newer object with the same name is a new object"


async def test_keep_filter_drops_foreign_objects() -> None:
    api = ScriptedApi(lists=[([pod("a", 1), pod("z", 2, owner=None)], "2")], watches=[])
    informer = make(api, keep=lambda o: bool(o["metadata"].get("ownerReferences")))
    await run_until_exhausted(informer, api)
    assert [o["metadata"]["name"] for o in informer.items()] == ["a"]
    orphan = pod("a", 3)
    orphan["metadata"]["ownerReferences"] = []
    informer._apply("MODIFIED", orphan)
    assert informer.get("ns", "a") is None, "an object that loses its owner leaves the cache"


async def test_a_broken_watch_resumes_without_relisting() -> None:
    api = ScriptedApi(
        lists=[([pod("a", 1)], "1")],
        watches=[ApiError(500, {"reason": "InternalError"}), [{"type": "MODIFIED", "object": pod("a", 3)}]],
    )
    informer = make(api)
    await run_until_exhausted(informer, api)
    assert api.list_calls == 1
    assert api.watched_from == ["1", "1", "3"]
    assert informer.get("ns", "a")["metadata"]["resourceVersion"] == "3"


async def test_a_failed_list_is_retried_before_syncing() -> None:
    api = ScriptedApi(
        lists=[ApiError(503, {"reason": "ServiceUnavailable"}), ([pod("a", 2)], "2")], watches=[]
    )
    informer = make(api)
    await run_until_exhausted(informer, api)
    assert informer.synced.is_set()
    assert api.list_calls == 2 and api.watched_from == ["2"]


async def test_an_unserved_type_counts_as_synced_and_is_listed_again_later() -> None:
    api = ScriptedApi(lists=[ApiError(404, {"reason": "NotFound"}), ([pod("a", 4)], "4")], watches=[])
    informer = make(api)
    await run_until_exhausted(informer, api)
    assert api.list_calls == 2 and informer.get("ns", "a") is not None


async def test_a_wiped_store_is_relisted_not_waited_for() -> None:
    """504 ResourceVersionTooLarge (the server's store is older than our version): relist, never loop."""
    too_large = ApiError(
        504,
        {"reason": "Timeout", "details": {"causes": [{"reason": "ResourceVersionTooLarge"}]}},
    )
    api = ScriptedApi(lists=[([pod("a", 90)], "90"), ([pod("b", 3)], "3")], watches=[too_large])
    informer = make(api)
    await run_until_exhausted(informer, api)
    assert api.list_calls == 2 and api.watched_from == ["90", "3"]
    assert [o["metadata"]["name"] for o in informer.items()] == ["b"]
    relists = api.metrics.relists.labels(resource="pods", cause="too_large")._value.get()
    assert relists == 1


async def test_a_plain_gateway_timeout_resumes_the_watch() -> None:
    api = ScriptedApi(lists=[([pod("a", 1)], "1")], watches=[ApiError(504, {"reason": "Timeout"}), []])
    informer = make(api)
    await run_until_exhausted(informer, api)
    assert api.list_calls == 1 and api.watched_from == ["1", "1", "1"]


def node_pod(name: str, rv: int, node: str | None, group: str | None = None) -> dict[str, Any]:
    obj = pod(name, rv, owner=None)
    if node:
        obj["spec"] = {"nodeName": node}
    if group:
        obj["metadata"]["labels"] = {"group": group}
    return obj


async def test_node_and_label_indexes_follow_moves_and_deletes() -> None:
    other_ns = node_pod("x", 4, None, group="g")
    other_ns["metadata"]["namespace"] = "other"
    api = ScriptedApi(
        lists=[([node_pod("a", 1, None, "g"), node_pod("b", 2, "n1", "g"), other_ns], "4")],
        watches=[
            [
                {"type": "MODIFIED", "object": node_pod("a", 5, "n1", "g")},  # bound to n1
                {"type": "MODIFIED", "object": node_pod("b", 6, "n2")},  # moved, label dropped
                {"type": "DELETED", "object": node_pod("a", 7, "n1", "g")},
            ]
        ],
    )
    seen: list[list[str]] = []
    indexers = {NODE_INDEX: by_node, "group": by_label("group")}
    informer = make(api, indexers=indexers)

    def snapshot(_old: dict | None, _new: dict | None) -> None:
        seen.append([o["metadata"]["name"] for o in informer.by_index(NODE_INDEX, "n1")])

    informer.add_handler(snapshot)
    await run_until_exhausted(informer, api)
    assert seen[-3:] == [["a", "b"], ["a"], []], "the index is current when handlers run"
    assert [o["metadata"]["name"] for o in informer.by_index(NODE_INDEX, "n2")] == ["b"]
    assert informer.by_index("group", "ns/g") == []
    assert [o["metadata"]["name"] for o in informer.by_index("group", "other/g")] == ["x"]
    with pytest.raises(ValueError, match="no index 'owner'"):
        informer.by_index(OWNER_INDEX, "uid")


async def test_every_handler_sees_every_change_even_after_one_fails() -> None:
    api = ScriptedApi(
        lists=[([pod("a", 1)], "1")],
        watches=[[{"type": "MODIFIED", "object": pod("a", 2)}, {"type": "DELETED", "object": pod("a", 3)}]],
    )
    first: list = []
    informer = make(api, first)

    def broken(_old: dict | None, _new: dict | None) -> None:
        raise RuntimeError("handler bug")

    last: list = []
    informer.add_handler(broken)
    informer.add_handler(lambda old, new: last.append((old and old["metadata"]["name"], new and "new")))
    await run_until_exhausted(informer, api)
    assert first == [(None, "1"), ("a", "2"), ("a", None)]
    assert last == [(None, "new"), ("a", "new"), ("a", None)]
    assert api.list_calls == 1 and api.watched_from == ["1", "3"], "a handler's failure is not a watch error"


async def test_error_backoff_doubles_to_its_bound_and_resets_after_a_good_watch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_sleep = asyncio.sleep
    delays: list[float] = []

    async def record_sleep(delay: float) -> None:
        delays.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(informer_module.random, "random", lambda: 0.5)  # no jitter: factor 1.0
    monkeypatch.setattr(informer_module.asyncio, "sleep", record_sleep)
    failure = ApiError(500, {"reason": "InternalError"})
    event = {"type": "MODIFIED", "object": pod("a", 2)}
    api = ScriptedApi(lists=[([pod("a", 1)], "1")], watches=[*[failure] * 8, [event], failure])
    informer = make(api)
    await run_until_exhausted(informer, api)
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 0.5]
    assert api.list_calls == 1
