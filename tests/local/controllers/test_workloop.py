"""The node agents' shared loops (`machinery.workloop`): a sync that raises, whatever it raises, is logged
with the key and retried with per-key backoff while the other keys go on; a supervised loop that fails or
stops is logged by name and started again.

The failures are injected (a sync or loop that raises): the mechanism is the unit under test here; the
agents themselves run under injected faults in test_node_agent_faults.py.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.machinery import workloop
from t9k_provider.testing import wait_for_async


async def test_a_failing_key_is_retried_with_backoff_and_holds_up_no_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: WorkQueue[workloop.Key] = WorkQueue(base_delay=0.01)
    synced: list[workloop.Key] = []
    failures = {("ns", "bad"): 3}

    async def sync(key: workloop.Key) -> None:
        if failures.get(key):
            failures[key] -= 1
            raise KeyError("a bug")
        synced.append(key)

    loop = asyncio.create_task(workloop.run(queue, sync, "thing"))
    try:
        queue.add(("ns", "bad"))
        queue.add(("ns", "good"))
        await wait_for_async("bad synced after its failures", lambda: ("ns", "bad") in synced, 10, 0.01)
        assert synced == [("ns", "good"), ("ns", "bad")]
        assert queue.num_requeues(("ns", "bad")) == 0, "a success forgets the failures"
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    failed = [
        r for r in caplog.records if r.getMessage().startswith("thing ns/bad: sync failed, retrying in")
    ]
    assert len(failed) == 3 and all(r.exc_info is not None for r in failed)
    delays = [float(r.getMessage().split("retrying in ")[1].rstrip("s")) for r in failed]
    assert delays == [0.01, 0.02, 0.04], "per-key exponential backoff"


async def test_a_supervised_loop_that_fails_or_stops_is_started_again(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workloop, "RESTART_BASE_DELAY", 0.01)
    starts: list[int] = []
    running = asyncio.Event()

    async def agent() -> None:
        starts.append(len(starts))
        if len(starts) == 1:
            raise RuntimeError("the agent's bug")
        if len(starts) == 2:
            return  # a loop that must not end, ending
        running.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(workloop.supervise("the agent", agent))
    try:
        await asyncio.wait_for(running.wait(), 10)
        assert len(starts) == 3
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled(), "cancellation ends it"
    said = [(r.levelno, r.getMessage().split(";")[0], r.exc_info is not None) for r in caplog.records]
    assert (logging.ERROR, "the agent failed", True) in said
    assert (logging.ERROR, "the agent stopped", False) in said


async def test_a_supervised_loop_that_may_end_is_not_started_again() -> None:
    starts: list[int] = []

    async def worker() -> None:
        starts.append(1)
        if len(starts) == 1:
            raise RuntimeError("teardown failed")

    await asyncio.wait_for(workloop.supervise("pod worker ns/p", worker, ends=True), 10)
    assert len(starts) == 2, "started again after its failure, then its own end is final"
