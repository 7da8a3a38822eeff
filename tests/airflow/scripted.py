"""A trigger over a scripted client (``FakeAsyncClient``: a lease and ``KubeApi`` replaying jobs and
errors): what the trigger's tests and the feed's (through the trigger's wait) drive."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from t9k_provider.jobs import API_VERSION
from t9k_provider.kube.resources import ResourceType
from t9k_provider.triggers.job import T9kJobTrigger
from tests.airflow.fakes import api_error
from tests.support.builders import generic_manifest, with_status

JOBS = ResourceType(API_VERSION, "GenericJob", "genericjobs")


class FakeAsyncClient:
    """Stands in for an ``AsyncT9kClient`` lease and the ``KubeApi`` it holds (``api`` is itself): replays a
    script of jobs or exceptions, one per GET."""

    pods: list[dict[str, Any]] = []
    #: Leases held now; ``unbuildable`` makes a new lease fail as building a client can (an exec plugin).
    leases = 0
    unbuildable = False

    def __init__(self, script: list[Any], deletes: list[tuple[str, str | None]]) -> None:
        self.script = script
        self.deletes = deletes
        self.api = self

    async def __aenter__(self) -> FakeAsyncClient:
        await asyncio.sleep(0)
        if FakeAsyncClient.unbuildable:
            raise ConnectionError("exec plugin: cannot reach the identity provider")
        FakeAsyncClient.leases += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        FakeAsyncClient.leases -= 1

    async def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        assert rt == JOBS and namespace == "ns" and name == "j"
        FakeAsyncClient.gets += 1
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, BaseException):
            raise item
        return item

    pod_lists = 0

    async def list(
        self, rt: ResourceType, namespace: str, *, label_selector: str | None = None, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        if rt == JOBS:
            assert limit == 1  # only the watch's starting version is wanted
            return [], "1"
        assert rt.plural == "pods" and label_selector
        FakeAsyncClient.pod_lists += 1
        return self.pods, "1"

    watch_calls: list[str] = []
    gets = 0
    #: The namespace watch. "unsupported" answers 405 (a proxy without watch: the trigger falls back to
    #: polling, so the script plays out one GET per poll), "expired" answers 410 at once, "short" ends
    #: cleanly at once (a proxy cutting streams), "changes" streams the rest of the script as MODIFIED
    #: events (an exception in it breaks the stream)
    watch_mode = "unsupported"

    async def watch(
        self, rt: ResourceType, namespace: str, version: str, timeout: int
    ) -> AsyncIterator[dict[str, Any]]:
        assert rt == JOBS and namespace == "ns"
        FakeAsyncClient.watch_calls.append(version)
        if self.watch_mode == "unsupported":
            raise api_error(405, "watch is not supported")
        if self.watch_mode == "expired":
            raise api_error(410, "too old resource version")
        if self.watch_mode == "short":
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}
            return  # ends cleanly, long before its timeout
        while True:
            await asyncio.sleep(0.05)  # the trigger has read the job meanwhile
            item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
            if isinstance(item, BaseException):
                raise item
            yield {"type": "MODIFIED", "object": item}
            if len(self.script) == 1 and item is self.script[0]:
                break
        await asyncio.sleep(timeout)

    reauthentications = 0

    def reauthenticate(self) -> None:
        FakeAsyncClient.reauthentications += 1

    delete_error: BaseException | None = None

    async def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str,
    ) -> dict[str, Any]:
        assert rt == JOBS and propagation == "Foreground"
        assert uid is not None  # the stop policy deletes only with the uid it read as a precondition
        if self.delete_error is not None:
            error, self.delete_error = self.delete_error, None  # one refusal; the policy reads again
            raise error
        self.deletes.append((name, uid))
        return {}


def trigger(**kwargs: Any) -> T9kJobTrigger:
    defaults: dict[str, Any] = {
        "credentials": {"in_cluster": False, "kubeconfig": {"k": "v"}, "context": "ctx"},
        "kind": "GenericJob",
        "plural": "genericjobs",
        "name": "j",
        "namespace": "ns",
        "uid": "uid-1",
        "poll_interval": 0.01,
    }
    return T9kJobTrigger(**{**defaults, **kwargs})


def job(
    phase: str, *conditions: tuple[str, str, str], uid: str = "uid-1", created: str | None = None
) -> dict:
    out = with_status(generic_manifest("j", namespace="ns", uid=uid), phase, *conditions)
    if created:
        out["metadata"]["creationTimestamp"] = created
    return out


def use_script(monkeypatch: pytest.MonkeyPatch, script: list[Any]) -> list[tuple[str, str | None]]:
    deletes: list[tuple[str, str | None]] = []
    monkeypatch.setattr(FakeAsyncClient, "leases", 0)
    monkeypatch.setattr(FakeAsyncClient, "unbuildable", False)
    monkeypatch.setattr(T9kJobTrigger, "_client", lambda self: FakeAsyncClient(script, deletes))
    monkeypatch.setattr("t9k_provider.hooks.errors.BACKOFF_BASE_SECONDS", 0.001)
    return deletes


async def first_event(t: T9kJobTrigger) -> dict[str, Any]:
    events = [event.payload async for event in t.run()]
    assert len(events) == 1
    return events[0]


async def cancelled(t: T9kJobTrigger, after: float = 0.1) -> None:
    """What the triggerer does before ``on_kill``/``cleanup``: run the trigger, then cancel it."""
    task = asyncio.ensure_future(first_event(t))
    await asyncio.sleep(after)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def versioned(phase: str, version: str) -> dict:
    out = job(phase)
    out["metadata"]["resourceVersion"] = version
    return out
