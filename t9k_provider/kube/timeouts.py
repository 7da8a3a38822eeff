"""``within``: ``asyncio.wait_for`` without the flaw it has before Python 3.12.

There, a cancellation that arrives in the loop iteration in which the awaited thing completes is lost:
``wait_for`` returns the result and the cancelled task runs on. A loop that waits for an event with a timeout
(a kubelet's pod worker, a trigger waiting for its job's next change) then never stops when it is cancelled
just as the event is set, and whoever awaits its end hangs. Every timed wait of the package goes through
``within``; ``tests/test_architecture.py`` keeps ``asyncio.wait_for`` out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], timeout: float | None) -> T:
    """The result of ``awaitable``, or ``asyncio.TimeoutError`` once ``timeout`` seconds passed (it is then
    cancelled); a cancellation of the caller always propagates (``awaitable`` is cancelled too)."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        return task.result()
    task.cancel()
    await asyncio.wait({task})  # its end; a cancellation of the caller meanwhile still propagates
    raise asyncio.TimeoutError(f"not done within {timeout:g}s")
