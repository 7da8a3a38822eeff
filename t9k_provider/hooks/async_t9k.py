"""Async access to T9k Jobs for triggers, built from ``T9kHook.credentials`` (never from a connection lookup).

Every trigger of a triggerer waits in one event loop, so they share one ``ApiClient`` (one TLS context and
connection pool) per event loop and set of credentials: ``AsyncT9kClient`` leases it and the last lease
closes it. Exec-plugin credentials are loaded when a shared client is built; ``reauthenticate()`` after a
401 retires it, so the next lease loads fresh credentials while streams still open on the old client end.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from t9k_provider.jobs.constants import GROUP, VERSION

#: Seconds to open a connection; a watch's read is bounded by its own timeout plus this.
CONNECT_TIMEOUT_SECONDS = 30.0


@dataclass(eq=False)
class _Shared:
    """One ApiClient and how many leases hold it; ``retired`` ones are closed by their last holder."""

    build: asyncio.Future[client.ApiClient]
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


async def _build(credentials: dict[str, Any]) -> client.ApiClient:
    configuration = client.Configuration()
    if credentials.get("in_cluster"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        await config.load_kube_config_from_dict(
            credentials["kubeconfig"], context=credentials.get("context"), client_configuration=configuration
        )
    if credentials.get("disable_verify_ssl"):
        configuration.verify_ssl = False
    # each waiting trigger holds one watch stream open: the pool must not cap them (aiohttp: 0 = no limit)
    configuration.connection_pool_maxsize = 0
    return client.ApiClient(configuration=configuration)


def shared_clients() -> int:
    """How many shared clients the running loop holds (for tests and the benchmark)."""
    pool = _POOLS.get(asyncio.get_running_loop())
    return len(pool.clients) if pool else 0


class AsyncT9kClient:
    """``async with AsyncT9kClient(credentials) as api: await api.get_job(...)``."""

    def __init__(self, credentials: dict[str, Any]) -> None:
        self._credentials = credentials
        self._key = fingerprint(credentials)
        self._shared: _Shared | None = None
        self._api_client: client.ApiClient | None = None

    async def __aenter__(self) -> AsyncT9kClient:
        pool = _POOLS.setdefault(asyncio.get_running_loop(), _Pool())
        shared = pool.clients.get(self._key)
        if shared is None:
            shared = _Shared(asyncio.ensure_future(_build(self._credentials)))
            pool.clients[self._key] = shared
        shared.leases += 1
        try:
            self._api_client = await asyncio.shield(shared.build)
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
        shared, api_client = self._shared, self._api_client
        self._shared = self._api_client = None
        if shared is None or api_client is None:
            return
        shared.leases -= 1
        if shared.leases > 0:
            return
        pool = _POOLS.get(asyncio.get_running_loop())
        if pool is not None and pool.clients.get(self._key) is shared:
            del pool.clients[self._key]
        await api_client.close()

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

    @property
    def _client(self) -> client.ApiClient:
        if self._api_client is None:
            raise RuntimeError("AsyncT9kClient used outside 'async with'")
        return self._api_client

    @property
    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(api_client=self._client)

    async def get_job(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        return await self._custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)

    async def jobs_version(self, plural: str, namespace: str) -> str:
        """The namespace's current resourceVersion for jobs of ``plural`` (a one-item LIST): a watch from it
        misses no change made after this call."""
        page = await self._custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural, limit=1)
        return str(page["metadata"]["resourceVersion"])

    async def watch_jobs(
        self, plural: str, namespace: str, resource_version: str, timeout: float
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """``(type, object)`` events of the namespace's jobs after ``resource_version`` (bookmarks included),
        until the server ends the watch after ``timeout`` seconds. An ERROR event (410 Expired) raises
        ApiException.
        """
        response = await self._custom.list_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            plural,
            resource_version=resource_version,
            timeout_seconds=max(1, round(timeout)),
            allow_watch_bookmarks=True,
            watch=True,
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(
                total=timeout + CONNECT_TIMEOUT_SECONDS, sock_connect=CONNECT_TIMEOUT_SECONDS
            ),
        )
        try:
            if response.status != 200:
                raise _api_exception(response.status, await response.text())
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise _api_exception(int(obj.get("code") or 500), json.dumps(obj))
                yield str(event.get("type")), obj
        finally:
            response.release()

    async def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        core = client.CoreV1Api(api_client=self._client)
        result = await core.list_namespaced_pod(namespace, label_selector=label_selector)
        return [self._client.sanitize_for_serialization(pod) for pod in result.items]

    async def delete_job(self, plural: str, namespace: str, name: str, uid: str | None = None) -> bool:
        """Foreground delete guarded by ``uid``; False when the job (or that incarnation) is already gone."""
        options = client.V1DeleteOptions(
            propagation_policy="Foreground", preconditions=client.V1Preconditions(uid=uid) if uid else None
        )
        try:
            await self._custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, body=options
            )
        except client.ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True


_CLOSING: set[asyncio.Future[None]] = set()


def _close_unleased(build: asyncio.Future[client.ApiClient]) -> None:
    if not build.cancelled() and build.exception() is None:
        closing = asyncio.ensure_future(build.result().close())
        _CLOSING.add(closing)  # the loop keeps only weak references to tasks
        closing.add_done_callback(_CLOSING.discard)


def _api_exception(status: int, body: str) -> client.ApiException:
    """The ApiException a watch failure would have raised as a plain request (``describe`` reads the body)."""
    exc = client.ApiException(status=status, reason=_reason(body))
    exc.body = body
    return exc


def _reason(body: str) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        return body[:200]
    return str(parsed.get("reason") or parsed.get("message") or "") if isinstance(parsed, dict) else ""
