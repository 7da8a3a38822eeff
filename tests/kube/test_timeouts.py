"""``within``, the package's timed wait: a result, a timeout that cancels what it waited for, and, unlike
``asyncio.wait_for`` before Python 3.12, a cancellation that always reaches the caller, even one arriving as
the awaited event is set (what left a kubelet's pod worker running after its kubelet cancelled it)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from t9k_provider.kube.timeouts import within

pytestmark = pytest.mark.airflow_independent

TRIALS = 50


async def cancellations_lost(wait: Callable[[Awaitable[Any], float], Awaitable[Any]]) -> int:
    """How often a loop that waits for an event with ``wait`` runs on after being cancelled in the loop
    iteration in which its event was set."""

    async def loop(event: asyncio.Event) -> None:
        while True:
            event.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await wait(event.wait(), 10)

    lost = 0
    for _ in range(TRIALS):
        event = asyncio.Event()
        task = asyncio.create_task(loop(event))
        for _ in range(3):
            await asyncio.sleep(0)
        event.set()
        task.cancel()
        for _ in range(10):
            await asyncio.sleep(0)
        lost += not task.done()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return lost


async def test_a_cancellation_as_the_event_is_set_is_never_lost() -> None:
    assert await cancellations_lost(within) == 0


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps cancellations from 3.12")
async def test_the_flaw_it_avoids_is_real_here() -> None:
    assert await cancellations_lost(asyncio.wait_for) == TRIALS


async def test_a_result_comes_back_and_a_timeout_cancels_what_it_waited_for() -> None:
    assert await within(asyncio.sleep(0, "done"), 1) == "done"
    queue: asyncio.Queue[int] = asyncio.Queue()
    getter = asyncio.ensure_future(queue.get())
    with pytest.raises(asyncio.TimeoutError):
        await within(getter, 0.05)
    assert getter.cancelled()
    queue.put_nowait(1)
    assert await within(queue.get(), 1) == 1  # the timed-out get took nothing


async def test_a_cancelled_caller_cancels_what_it_waited_for() -> None:
    inner = asyncio.ensure_future(asyncio.sleep(10))
    outer = asyncio.create_task(within(inner, 10))
    await asyncio.sleep(0)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    await asyncio.sleep(0)
    assert inner.cancelled()
