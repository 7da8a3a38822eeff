"""A de-duplicating work queue with delayed and per-item rate-limited requeue.

Semantics follow client-go's workqueue so reconcilers (the controller's, the local node agents') can rely on
them:

- a key is queued at most once, however often it is added (events coalesce);
- a key is never handed to two workers at once: adding a key that is being processed marks it dirty, and it is
  queued again only when the worker calls ``done``;
- ``add_after`` keeps the earliest pending deadline per key;
- ``add_rate_limited`` delays by ``base * 2**failures`` (capped), until ``forget`` resets the failure count.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        base_delay: float = 0.05,
        max_delay: float = 300.0,
        on_depth: Callable[[int], None] | None = None,
    ) -> None:
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[K, int] = {}
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._on_depth = on_depth
        self._ready = asyncio.Event()
        self._shutdown = False

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._changed()

    def add_after(self, key: K, delay: float) -> None:
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= deadline:
                return
            pending[1].cancel()
        self._timers[key] = (deadline, loop.call_at(deadline, self._fire, key))

    def add_rate_limited(self, key: K) -> float:
        """Requeue after an exponential per-key delay; returns the delay chosen."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self._base_delay * (2**failures), self._max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K | None:
        """The next key, or None once the queue is shut down."""
        while not self._queue and not self._shutdown:
            self._ready.clear()
            await self._ready.wait()
        if self._shutdown:
            return None
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        self._changed()
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._shutdown:
            self._queue.append(key)
            self._changed()

    def shutdown(self) -> None:
        self._shutdown = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._ready.set()

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def _changed(self) -> None:
        if self._on_depth is not None:
            self._on_depth(len(self._queue))
        if self._queue:
            self._ready.set()
