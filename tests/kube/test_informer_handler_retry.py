"""A change handler that raises is not the end of that change: the informer logs the object's key and calls
the handler again, with backoff, with what the cache holds for the key by then, until a call succeeds.

The failures are injected (a handler that raises a set number of times for one key): a handler's bug or a
passing failure of what it calls cannot be produced otherwise. The watch is the scripted stand-in of
tests/kube/test_informer.py.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from t9k_provider.kube.informer import Informer
from t9k_provider.testing import wait_for_async
from tests.kube.test_informer import ScriptedApi, make, pod

Change = tuple[str | None, str | None]  # (old's resourceVersion, new's), None for absent


def rv(obj: dict[str, Any] | None) -> str | None:
    return obj["metadata"]["resourceVersion"] if obj is not None else None


class FlakyHandler:
    """Raises the first ``failures`` times it is called for ``name``; records every call it took."""

    def __init__(self, name: str, failures: int) -> None:
        self.name = name
        self.failures = failures
        self.taken: dict[str, list[Change]] = {}

    def __call__(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        name = (new or old or {})["metadata"]["name"]
        if name == self.name and self.failures:
            self.failures -= 1
            raise RuntimeError(f"handler bug for {name}")
        self.taken.setdefault(name, []).append((rv(old), rv(new)))


async def run_informer(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 5)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_failed_add_is_delivered_again_with_the_current_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = ScriptedApi(
        lists=[([pod("a", 1), pod("b", 2)], "2")],
        watches=[[{"type": "MODIFIED", "object": pod("a", 3)}, {"type": "MODIFIED", "object": pod("b", 4)}]],
    )
    handler = FlakyHandler("a", failures=2)  # the add and the update of "a" fail
    informer = make(api)
    informer.add_handler(handler)
    task = await run_informer(informer)
    try:
        await wait_for_async("a delivered again", lambda: handler.taken.get("a"), 10, 0.05)
        assert handler.taken["a"] == [(None, "3")], "one add, of what the cache holds now"
        assert handler.taken["b"] == [(None, "2"), ("2", "4")], "other keys are not held up"
    finally:
        await stop(task)
    failed = [r for r in caplog.records if "change handler failed for ns/a" in r.getMessage()]
    assert len(failed) == 2 and "retrying in" in failed[0].getMessage()
    assert failed[0].levelno == logging.ERROR and failed[0].exc_info is not None


async def test_a_failed_delete_is_delivered_again() -> None:
    api = ScriptedApi(lists=[([pod("a", 1)], "1")], watches=[])
    handler = FlakyHandler("a", failures=0)
    informer = make(api)
    informer.add_handler(handler)
    task = await run_informer(informer)
    try:
        assert handler.taken["a"] == [(None, "1")]
        handler.failures = 1  # the delete fails once
        informer.observe_deleted("ns", "a", 5)
        assert handler.failures == 0 and handler.taken["a"] == [(None, "1")]
        await wait_for_async("a deleted", lambda: len(handler.taken["a"]) == 2, 10, 0.05)
        assert handler.taken["a"] == [(None, "1"), ("1", None)]
    finally:
        await stop(task)


async def test_a_later_successful_call_for_the_key_ends_the_retry() -> None:
    api = ScriptedApi(lists=[([pod("a", 1)], "1")], watches=[])
    handler = FlakyHandler("a", failures=1)
    informer = make(api)
    informer.add_handler(handler)
    task = await run_informer(informer)
    try:
        assert "a" not in handler.taken, "the add failed"
        assert informer._undelivered, "and waits to be delivered again"
        informer.observe(pod("a", 7))  # the next change for "a" gets through first
        assert handler.taken["a"] == [("1", "7")]
        assert not informer._undelivered, "nothing is left to deliver again"
    finally:
        await stop(task)
