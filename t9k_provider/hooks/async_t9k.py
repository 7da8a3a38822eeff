"""The triggers' API client: built from ``T9kHook.credentials`` (never a connection lookup), shared, renewed.

Every trigger of a triggerer waits in one event loop, so they share one ``KubeApi`` (one session: one TLS
context and connection pool) per event loop and set of credentials: ``AsyncT9kClient`` leases it and the
last lease closes it. A client renews an exec plugin's credential before it expires; ``reauthenticate()``
after a 401 retires it, so the next lease loads fresh credentials while streams still open on the old client
end. Requests, watches and their errors are ``t9k_provider.kube``'s; this module only pools and renews.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from t9k_provider.kube.api import KubeApi, api_client


@dataclass(eq=False)
class _Shared:
    """One client and how many leases hold it; ``retired`` ones are closed by their last holder."""

    build: asyncio.Future[KubeApi]
    leases: int = 0
    retired: bool = False


@dataclass
class _Pool:
    """The shared clients of one event loop, by credentials fingerprint."""

    clients: dict[str, _Shared] = field(default_factory=dict)


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = weakref.WeakKeyDictionary()


def fingerprint(credentials: dict[str, Any]) -> str:
    """Identifies a set of credentials without keeping another copy of them."""
    return hashlib.sha256(json.dumps(credentials, sort_keys=True, default=str).encode()).hexdigest()


async def _build(credentials: dict[str, Any]) -> KubeApi:
    in_cluster = bool(credentials.get("in_cluster"))
    client = await api_client(
        None if in_cluster else credentials["kubeconfig"],
        context=credentials.get("context"),
        in_cluster=in_cluster,
        verify_ssl=not credentials.get("disable_verify_ssl"),
        connection_limit=0,  # the triggers' watch streams share this client: it must not queue them
    )
    return KubeApi(client)


def shared_clients() -> int:
    """How many shared clients the running loop holds (for tests and the benchmark)."""
    pool = _POOLS.get(asyncio.get_running_loop())
    return len(pool.clients) if pool else 0


class AsyncT9kClient:
    """A lease on the shared client: ``async with AsyncT9kClient(credentials) as lease: lease.api...``."""

    def __init__(self, credentials: dict[str, Any]) -> None:
        self._credentials = credentials
        self._key = fingerprint(credentials)
        self._shared: _Shared | None = None
        self._api: KubeApi | None = None

    async def __aenter__(self) -> AsyncT9kClient:
        pool = _POOLS.setdefault(asyncio.get_running_loop(), _Pool())
        shared = pool.clients.get(self._key)
        if shared is None:
            shared = _Shared(asyncio.ensure_future(_build(self._credentials)))
            pool.clients[self._key] = shared
        shared.leases += 1
        try:
            self._api = await asyncio.shield(shared.build)
        except BaseException:
            shared.leases -= 1
            build = shared.build
            failed = build.done() and (build.cancelled() or build.exception() is not None)
            if failed or shared.leases == 0:
                if pool.clients.get(self._key) is shared:
                    del pool.clients[self._key]  # a failed build is not cached: the next lease tries again
                if not failed:
                    build.add_done_callback(_close_unleased)  # the last holder was cancelled while waiting
            raise
        self._shared = shared
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        shared, api = self._shared, self._api
        self._shared = self._api = None
        if shared is None or api is None:
            return
        shared.leases -= 1
        if shared.leases > 0:
            return
        pool = _POOLS.get(asyncio.get_running_loop())
        if pool is not None and pool.clients.get(self._key) is shared:
            del pool.clients[self._key]
        await api.close()

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            raise RuntimeError("AsyncT9kClient used outside 'async with'")
        return self._api

    def reauthenticate(self) -> None:
        """After a 401: the next lease builds a new client (reloading exec-plugin credentials).

        Only the client this lease holds is retired, so many triggers hitting the same 401 replace it once.
        """
        shared = self._shared
        if shared is None or shared.retired:
            return
        shared.retired = True
        pool = _POOLS.get(asyncio.get_running_loop())
        if pool is not None and pool.clients.get(self._key) is shared:
            del pool.clients[self._key]


_CLOSING: set[asyncio.Future[None]] = set()


def _close_unleased(build: asyncio.Future[KubeApi]) -> None:
    if not build.cancelled() and build.exception() is None:
        closing = asyncio.ensure_future(build.result().close())
        _CLOSING.add(closing)  # the loop keeps only weak references to tasks
        closing.add_done_callback(_CLOSING.discard)
