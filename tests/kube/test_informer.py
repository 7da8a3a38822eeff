"""Informer cache logic: owner index, stale-event suppression, write-through, resume and relist on 410.

The API here is a scripted stand-in for the network so each path is driven deterministically; the same
paths run against the real local API server in test_runtime_cluster.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from t9k_provider.controller.runtime.api import ApiError, ResourceType
from t9k_provider.controller.runtime.informer import Informer
from t9k_provider.controller.runtime.metrics import Metrics

PODS = ResourceType("v1", "Pod", "pods")


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


def make(api: ScriptedApi, changes: list | None = None) -> Informer:
    def on_change(old: dict | None, new: dict | None) -> None:
        if changes is not None:
            changes.append((old and old["metadata"]["name"], new and new["metadata"]["resourceVersion"]))

    return Informer(api, PODS, None, Metrics(), on_change=on_change)  # type: ignore[arg-type]


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


async def test_owner_index_follows_changes() -> None:
    api = ScriptedApi(
        lists=[([pod("a", 1), pod("b", 2, owner="other"), pod("c", 3, owner=None)], "3")],
        watches=[[{"type": "MODIFIED", "object": pod("b", 4)}, {"type": "DELETED", "object": pod("a", 5)}]],
    )
    informer = make(api)
    await run_until_exhausted(informer, api)
    assert [o["metadata"]["name"] for o in informer.owned_by("job-uid")] == ["b"]
    assert informer.owned_by("other") == []


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
    informer = Informer(
        api,
        PODS,
        None,
        Metrics(),
        keep=lambda o: bool(o["metadata"].get("ownerReferences")),  # type: ignore[arg-type]
    )
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
