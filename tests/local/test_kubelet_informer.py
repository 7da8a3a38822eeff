"""The agents' list+watch informer and work queue, against a scripted API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from t9k_provider.local.kubelet.kube import ApiError, Informer, WorkQueue


def _obj(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": str(rv)}}


class ScriptedKube:
    """Lists and watch sessions are played back in order; records what the informer asked for."""

    def __init__(self, lists: list[dict[str, Any]], watches: list[list[Any]]) -> None:
        self.lists = lists
        self.watches = watches
        self.watch_rvs: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        return self.lists.pop(0)

    async def watch(self, path: str, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        self.watch_rvs.append(params["resourceVersion"])
        if not self.watches:
            await asyncio.Event().wait()
        for item in self.watches.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item


async def test_resumes_from_last_rv_and_relists_after_410() -> None:
    kube = ScriptedKube(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": [_obj("a", 5), _obj("b", 7)]},
            {"metadata": {"resourceVersion": "30"}, "items": [_obj("a", 21), _obj("c", 25)]},
        ],
        watches=[
            # session 1: an update, a bookmark, then the server closes the stream (timeout)
            [{"type": "MODIFIED", "object": _obj("a", 11)}, {"type": "BOOKMARK", "object": _obj("", 15)}],
            # session 2 resumes from the bookmark, sees a delete, then the history is compacted away
            [{"type": "DELETED", "object": _obj("b", 16)}, ApiError(410, {"message": "too old"})],
        ],
    )
    changed: list[tuple[str, str]] = []
    informer = Informer(kube, "/api/v1/pods", changed.append)  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    for _ in range(100):
        if len(kube.watch_rvs) >= 3:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    assert kube.watch_rvs == ["10", "15", "30"]
    assert sorted(informer.cache) == [("ns", "a"), ("ns", "c")]
    assert informer.cache[("ns", "a")]["metadata"]["resourceVersion"] == "21"
    assert changed[:3] == [("ns", "a"), ("ns", "b"), ("ns", "a")]
    assert ("ns", "b") in changed[3:] and ("ns", "c") in changed[3:]
    assert informer.synced.is_set()


async def test_work_queue_deduplicates_pending_keys() -> None:
    queue = WorkQueue()
    queue.add(("ns", "a"))
    queue.add(("ns", "b"))
    queue.add(("ns", "a"))
    assert await asyncio.wait_for(queue.get_all(), 1) == [("ns", "a"), ("ns", "b")]
    queue.add_after(("ns", "c"), 0.05)
    assert await asyncio.wait_for(queue.get_all(), 1) == [("ns", "c")]
