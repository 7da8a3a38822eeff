"""The hook's blocking calls, made with the async client on one event loop in a daemon thread per process.

The sync hook (operators, sensors, ``on_kill``) and the waits use the same client, ``t9k_provider.kube``'s
``KubeApi`` over aiohttp, instead of a second, generated one whose import cost a task process 0.3 s
(docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators). The portal holds one lease of
the shared client per set of credentials for the process's life, so calls reuse connections; a call runs in
the portal's thread, so a signal handler that calls while another call waits (``on_kill``) never finds the
pool held by the call it interrupted.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from t9k_provider.hooks.async_t9k import AsyncT9kClient, fingerprint
from t9k_provider.kube.api import KubeApi

T = TypeVar("T")


class Portal:
    """Runs coroutines on its own event loop, started on the first call, and keeps their client leases."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._leases: dict[str, asyncio.Future[AsyncT9kClient]] = {}

    def call(self, credentials: dict[str, Any], request: Callable[[KubeApi], Awaitable[T]]) -> T:
        """``request`` with the shared client of ``credentials``; blocks until it returns or raises."""
        return asyncio.run_coroutine_threadsafe(self._call(credentials, request), self._started()).result()

    def retire(self, credentials: dict[str, Any]) -> None:
        """After a 401: the next call builds a new client, loading the credentials again."""
        asyncio.run_coroutine_threadsafe(self._retire(fingerprint(credentials)), self._started()).result()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="t9k-hook-portal", daemon=True).start()
                self._loop = loop
            return self._loop

    async def _call(self, credentials: dict[str, Any], request: Callable[[KubeApi], Awaitable[T]]) -> T:
        key = fingerprint(credentials)
        lease = self._leases.get(key)
        if lease is None:
            lease = self._leases[key] = asyncio.ensure_future(AsyncT9kClient(credentials).__aenter__())
        try:
            client = await asyncio.shield(lease)
        except BaseException:
            if lease.done() and self._leases.get(key) is lease:
                del self._leases[key]  # a failed build is not kept: the next call tries again
            raise
        return await request(client.api)

    async def _retire(self, key: str) -> None:
        lease = self._leases.pop(key, None)
        if lease is not None and lease.done() and not lease.cancelled() and lease.exception() is None:
            client = lease.result()
            client.reauthenticate()
            await client.__aexit__(None, None, None)


PORTAL = Portal()


def _forget_in_child() -> None:
    """A forked child has no portal thread: it starts its own."""
    global PORTAL
    PORTAL = Portal()


os.register_at_fork(after_in_child=_forget_in_child)
