"""One long watch per event loop, credentials, namespace and kind, shared by every wait there.

A triggerer runs all its triggers in one event loop. Each ``JobWatch`` (one per wait) subscribes to the
``_Hub`` of its job's namespace and kind, which holds a single watch on that collection, renews it from the
last version seen (bookmarks keep that version fresh) and hands each event to the subscribers of the job it
names. N waiting tasks in a namespace thus cost one watch and one connection, not N. A wait in the worker is
``alone`` on its event loop: its hub watches its one job (a field selector), not every job of the namespace.
A hub that fails hands the failure to all its subscribers and goes away; each of them reads its job and
subscribes again. The watch itself is ``KubeApi.watch`` on a lease of the shared client (``AsyncT9kClient``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from t9k_provider.kube.versions import compare, resource_version

if TYPE_CHECKING:  # the API client: not at DAG parse
    from t9k_provider.hooks.async_t9k import AsyncT9kClient
    from t9k_provider.kube.api import KubeApi
    from t9k_provider.kube.resources import ResourceType

#: How long the server keeps one watch open; the jitter spreads the renewals of many hubs apart.
WATCH_SECONDS = 290.0
WATCH_JITTER_SECONDS = 30.0

#: credentials' fingerprint, namespace, plural, and the one job's name of a hub that watches only that job
_HubKey = tuple[str, str, str, str]
_HUBS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_HubKey, _Hub]] = weakref.WeakKeyDictionary()


class _Hub:
    """The watch on one namespace's jobs of one kind and the ``JobWatch``-es that wait on it."""

    def __init__(
        self, key: _HubKey, client: Callable[[], AsyncT9kClient], rt: ResourceType, namespace: str
    ) -> None:
        self._key = key
        self._client = client
        self._where = (rt, namespace)
        #: the one job's field selector, for a hub of one job
        self._only: dict[str, str] = {"field_selector": f"metadata.name={key[3]}"} if key[3] else {}
        self.subscribers: dict[str, set[JobWatch]] = {}
        #: resolved once the watch's starting version is known: a read after it misses no later change
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.ensure_future(self._run())

    def add(self, watch: JobWatch) -> None:
        self.subscribers.setdefault(watch.name, set()).add(watch)

    async def remove(self, watch: JobWatch) -> None:
        """The last subscriber to leave ends the watch and releases its client."""
        waiting = self.subscribers.get(watch.name)
        if waiting is not None:
            waiting.discard(watch)
            if not waiting:
                del self.subscribers[watch.name]
        if not self.subscribers:
            self._forget()
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _forget(self) -> None:
        hubs = _HUBS.get(asyncio.get_running_loop())
        if hubs is not None and hubs.get(self._key) is self:
            del hubs[self._key]

    async def _run(self) -> None:
        try:
            async with self._client() as lease:
                _, version = await lease.api.list(*self._where, limit=1, **self._only)  # the current RV
                self.ready.set_result(None)
                while True:
                    version = await self._watch_once(lease.api, version)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._forget()
            if not self.ready.done():
                self.ready.set_exception(exc)
                self.ready.exception()  # retrieved: subscribers may all have gone
            for waiting in list(self.subscribers.values()):
                for watch in list(waiting):
                    watch.fail(exc)

    async def _watch_once(self, api: KubeApi, version: str) -> str:
        """One watch until the server ends it; returns the version to renew from."""
        seconds = max(1, round(WATCH_SECONDS + random.uniform(0, WATCH_JITTER_SECONDS)))
        opened = time.monotonic()
        async for event in api.watch(*self._where, version, seconds, **self._only):
            obj = event["object"]
            meta = obj.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            if event["type"] == "BOOKMARK":
                continue
            for watch in list(self.subscribers.get(meta.get("name"), ())):
                watch.deliver(event["type"], obj)
        lasted = time.monotonic() - opened
        if lasted < seconds / 2:  # a proxy or server that cuts streams short: not worth renewing
            raise ConnectionError(f"watch ended after {lasted:.1f}s of {seconds}s")
        return version


class JobWatch:
    """What one wait knows from the shared watch about its job.

    ``changed`` is set when an event brought a newer state (``latest``) or the shared watch failed
    (``failure``); the wait then looks at the new state, or reads the job and subscribes again.
    """

    def __init__(self, client: Callable[[], AsyncT9kClient], credentials: dict[str, Any], rt: ResourceType,
                 namespace: str, name: str, *, alone: bool = False) -> None:  # fmt: skip
        from t9k_provider.hooks.async_t9k import fingerprint  # the API client: not at DAG parse

        self._client = client
        self._rt = rt
        self._key: _HubKey = (fingerprint(credentials), namespace, rt.plural, name if alone else "")
        self.name = name
        self.changed = asyncio.Event()
        self.latest: dict[str, Any] | None = None
        self.deleted = False
        self.failure: BaseException | None = None
        #: failed subscriptions in a row, counted by the wait (none lived long or brought an event)
        self.failures = 0
        self._disabled_until = float("-inf")
        self._version: int | None = None
        self._hub: _Hub | None = None
        self._since = 0.0
        #: monotonic time the wait last took a new state (a read or an event), for its spacing rule
        self.looked_at = float("-inf")

    @property
    def running(self) -> bool:
        return self._hub is not None

    @property
    def disabled(self) -> bool:
        """While true the wait polls; the watch is tried again after one watch period."""
        return time.monotonic() < self._disabled_until

    def disable(self) -> None:
        self._disabled_until = time.monotonic() + WATCH_SECONDS

    async def subscribe(self) -> None:
        """Join (or start) the namespace's watch and wait until it has its starting version; read the job
        only after this. A hub that cannot start shows as a failure."""
        self.failure = None
        self.changed.clear()
        hubs = _HUBS.setdefault(asyncio.get_running_loop(), {})
        hub = hubs.get(self._key)
        if hub is None:
            hub = hubs[self._key] = _Hub(self._key, self._client, self._rt, self._key[1])
        hub.add(self)
        self._hub = hub
        self._since = time.monotonic()
        with contextlib.suppress(Exception):  # fail() has recorded it
            await asyncio.shield(hub.ready)

    def seen(self, job: dict[str, Any]) -> None:
        """The wait read ``job``: events up to its version are not news, even one already delivered."""
        self._version = resource_version(job)
        if self.latest is not None and compare(self.latest, self._version) in (-1, 0):
            self.latest = None
            self.deleted = False
            if self.failure is None:
                self.changed.clear()

    def deliver(self, kind: str, obj: dict[str, Any]) -> None:
        if compare(obj, self._version) in (-1, 0):
            return  # not newer than what the wait already holds
        self._version = resource_version(obj)
        self.latest = obj
        self.deleted = kind == "DELETED"
        self.failures = 0
        self.changed.set()

    def fail(self, exc: BaseException) -> None:
        self.failure = exc
        self._hub = None
        self.changed.set()

    def count_failure(self) -> int:
        """Counts the failure the wait is handling (it had reads working meanwhile); returns the count."""
        if time.monotonic() - self._since >= WATCH_SECONDS / 2:
            self.failures = 0  # the subscription served for long: this failure starts a new count
        self.failures += 1
        return self.failures

    async def stop(self) -> None:
        hub, self._hub = self._hub, None
        if hub is not None:
            await hub.remove(self)
