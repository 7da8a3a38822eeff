"""Work queue semantics the reconcilers rely on (client-go compatible)."""

from __future__ import annotations

import asyncio

import pytest

from t9k_provider.kube.workqueue import WorkQueue


async def test_adds_coalesce_while_queued() -> None:
    q = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_key_added_while_processing_is_requeued_once_on_done() -> None:
    q = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")
    q.add("a")
    assert len(q) == 0, "a key being processed must not be handed to a second worker"
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_done_without_new_add_does_not_requeue() -> None:
    q = WorkQueue()
    q.add("a")
    q.done(await q.get())
    assert len(q) == 0


async def test_get_blocks_until_add() -> None:
    q = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    q.add("x")
    assert await asyncio.wait_for(getter, 1) == "x"


async def test_shutdown_releases_waiting_workers() -> None:
    q = WorkQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0.01)
    q.shutdown()
    assert await asyncio.wait_for(asyncio.gather(*getters), 1) == [None, None, None]
    q.add("late")
    assert len(q) == 0


async def test_add_after_keeps_the_earliest_deadline() -> None:
    q = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("a", 5.0)
    q.add_after("a", 0.05)
    q.add_after("a", 3.0)
    assert await asyncio.wait_for(q.get(), 1) == "a"
    assert loop.time() - start < 1.0
    q.done("a")
    await asyncio.sleep(0.1)
    assert len(q) == 0, "the cancelled later timers must not fire"


async def test_delayed_add_coalesces_with_immediate_add() -> None:
    q = WorkQueue()
    q.add("a")
    q.add_after("a", 0.02)
    assert await q.get() == "a"
    await asyncio.sleep(0.05)
    assert len(q) == 0, "the timer fired while processing: the key waits for done()"
    q.done("a")
    assert await asyncio.wait_for(q.get(), 1) == "a"


async def test_rate_limit_grows_exponentially_until_forget() -> None:
    q = WorkQueue(base_delay=0.01, max_delay=0.05)
    delays = [q.add_rate_limited("a") for _ in range(5)]
    assert delays == pytest.approx([0.01, 0.02, 0.04, 0.05, 0.05])
    assert q.num_requeues("a") == 5
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert q.add_rate_limited("a") == pytest.approx(0.01)


async def test_depth_callback_tracks_queue_length() -> None:
    depths: list[int] = []
    q = WorkQueue(on_depth=depths.append)
    q.add("a")
    q.add("b")
    await q.get()
    assert depths == [1, 2, 1]


async def test_many_workers_never_share_a_key() -> None:
    q = WorkQueue()
    active: set[str] = set()
    overlaps = 0
    handled = 0

    async def worker() -> None:
        nonlocal overlaps, handled
        while (key := await q.get()) is not None:
            if key in active:
                overlaps += 1
            active.add(key)
            await asyncio.sleep(0.001)
            active.discard(key)
            handled += 1
            q.done(key)

    tasks = [asyncio.create_task(worker()) for _ in range(4)]
    for i in range(200):
        q.add(f"k{i % 7}")
        if i % 10 == 0:
            await asyncio.sleep(0)
    while len(q) or active:
        await asyncio.sleep(0.005)
    q.shutdown()
    await asyncio.wait_for(asyncio.gather(*tasks), 2)
    assert overlaps == 0
    assert 7 <= handled <= 200
