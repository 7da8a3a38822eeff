"""List+watch informers: a local cache per resource type, with indexes and change handlers.

One informer lists once, then follows a watch from the list's resourceVersion, resuming from the last seen
resourceVersion (bookmarks included) when the server ends the stream, and relisting only when the server says
that version is unavailable (410 Gone, or 504 too large after the store was wiped): the fresh list replaces
the cache, and handlers get every change it shows, deletes (cached keys the list lacks) included, as
client-go's DeltaFIFO ``Replace`` does. There is no polling;
errors are retried with bounded, jittered exponential backoff, so an informer never dies.

The cache can also be written through by its owner's own successful writes (``observe``), so a reconcile that
runs before the watch delivers the echo of the previous write never acts on older state than it produced
itself. Events older than what the cache holds are dropped (``versions.compare``: etcd and the local store
use one global counter); tombstones keep a late event from resurrecting a deleted object.

Handlers get ``(old, new)``: ``old`` is None for an object that appeared, ``new`` None for one that went away.
A handler that raises is logged with the object's key and called again after a backoff (0.5 s doubling to
30 s) with what the cache holds for that key by then, until a call for the key succeeds: a handler's bug or
a passing failure never makes its owner forget an object.

Indexes map an index value to the keys of the objects whose index function yields it (client-go's Indexer).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import ResourceType
from t9k_provider.kube.versions import compare, resource_version

log = logging.getLogger(__name__)

Key = tuple[str, str]
Handler = Callable[[dict[str, Any] | None, dict[str, Any] | None], None]
IndexFunc = Callable[[dict[str, Any]], Iterable[str]]

WATCH_TIMEOUT_SECONDS = 300
MAX_BACKOFF = 30.0
MIN_WATCH_SECONDS = 1.0
HANDLER_RETRY_BASE = 0.5

OWNER_INDEX = "owner"  # by the uid of the controlling owner
NODE_INDEX = "node"  # pods by spec.nodeName


def object_key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def by_owner(obj: dict[str, Any]) -> list[str]:
    ref = controller_ref(obj)
    return [ref["uid"]] if ref is not None and ref.get("uid") else []


def by_node(obj: dict[str, Any]) -> list[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


def by_label(label: str) -> IndexFunc:
    """Index by one label's value, qualified by namespace: ``<namespace>/<value>``."""

    def index(obj: dict[str, Any]) -> list[str]:
        meta = obj.get("metadata") or {}
        value = (meta.get("labels") or {}).get(label)
        return [f"{meta.get('namespace') or ''}/{value}"] if value is not None else []

    return index


@dataclass
class _Undelivered:
    """A change one handler failed to take: what it last took for the key, and the retry pending."""

    old: dict[str, Any] | None
    failures: int = 0
    timer: asyncio.TimerHandle | None = None


class Informer:
    """Cache of one resource type in one namespace (or all namespaces when ``namespace`` is None)."""

    def __init__(
        self,
        api: KubeApi,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        keep: Callable[[dict[str, Any]], bool] | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        watch_timeout: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.synced = asyncio.Event()
        self._api = api
        self._keep = keep or (lambda _obj: True)
        self._handlers: list[Handler] = []
        self._indexers = dict(indexers or {})
        self._watch_timeout = watch_timeout
        self._store: dict[Key, dict[str, Any]] = {}
        self._tombstones: dict[Key, int] = {}
        self._indexes: dict[str, dict[str, set[Key]]] = {name: {} for name in self._indexers}
        self._resource_version = ""
        self._listing: set[Key] | None = None  # keys written through while a relist's list is in flight
        self._undelivered: dict[tuple[int, Key], _Undelivered] = {}  # (handler index, key)
        self.last_error: str | None = None

    def add_handler(self, handler: Handler) -> None:
        """Call ``handler(old, new)`` on every change; register before ``run`` to see the initial list."""
        self._handlers.append(handler)

    # -- reads -------------------------------------------------------------------------------------
    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._store.get((namespace, name))

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        """The cached objects whose ``index`` function yields ``value``, in key order."""
        try:
            keys = self._indexes[index].get(value, ())
        except KeyError:
            raise ValueError(f"informer {self.rt.plural}: no index {index!r}") from None
        return [self._store[key] for key in sorted(keys)]

    def items(self) -> list[dict[str, Any]]:
        return list(self._store.values())

    def __len__(self) -> int:
        return len(self._store)

    # -- write-through ------------------------------------------------------------------------
    def observe(self, obj: dict[str, Any]) -> None:
        """Record an object the informer's owner just wrote or read fresh."""
        self._written(object_key(obj))
        self._apply("MODIFIED", obj)

    def observe_deleted(self, namespace: str, name: str, resource_version: int | None = None) -> None:
        self._written((namespace, name))
        current = self._store.get((namespace, name))
        if current is not None:
            tomb = dict(current)
            tomb["metadata"] = dict(current.get("metadata") or {})
            if resource_version is not None:
                tomb["metadata"]["resourceVersion"] = str(resource_version)
            self._apply("DELETED", tomb)

    # -- the loop ----------------------------------------------------------------------------------
    async def run(self) -> None:
        """List, then watch; a broken watch resumes from the last version, only an unavailable one relists."""
        backoff = 0.5
        cause: str | None = "start"  # why the next round must list first; None: resume the watch
        try:
            while True:
                try:
                    if cause is not None:
                        await self._relist(cause)
                        cause = None
                    await self._watch_once()
                    backoff = 0.5
                except asyncio.CancelledError:
                    raise
                except ApiError as exc:
                    if exc.resource_version_unavailable:
                        cause = "expired" if exc.expired else "too_large"
                        continue
                    if exc.not_found and not self._store:
                        # The type is not served (an optional CRD such as FlinkCluster is not installed):
                        # there is nothing to cache, so count as synced and look again later.
                        self.synced.set()
                        cause = cause or "error"
                    backoff = await self._back_off(exc, backoff)
                except Exception as exc:  # network errors, server restarts: retry with backoff, never die
                    backoff = await self._back_off(exc, backoff)
        finally:
            for pending in self._undelivered.values():
                if pending.timer is not None:
                    pending.timer.cancel()
            self._undelivered.clear()

    async def _back_off(self, exc: BaseException, backoff: float) -> float:
        """Sleep about ``backoff`` seconds after an error; returns the next backoff."""
        self.last_error = f"{type(exc).__name__}: {exc}"
        log.warning("informer %s: %s; retrying in %.1fs", self.rt.plural, self.last_error, backoff)
        await asyncio.sleep(backoff * (0.5 + random.random()))
        return min(backoff * 2, MAX_BACKOFF)

    def _written(self, key: Key) -> None:
        if self._listing is not None:
            self._listing.add(key)

    async def _relist(self, cause: str) -> None:
        """Replace the cache with a fresh list, except where the owner wrote through while the list was in
        flight and the cache holds a version newer than the list's (a pod created meanwhile, which a stale
        list lacks: dropping it made the Job controller create its pods again); the watch from the list's
        version brings what follows. Upstream's controllers guard this race with expectations."""
        self._api.metrics.relist(self.rt.plural, cause)
        self._listing = set()
        try:
            items, rv = await self._api.list(self.rt, self.namespace)
        finally:
            written, self._listing = self._listing, None
        kept = {key for key in written if compare(self._store.get(key) or self._tombstones.get(key), rv) == 1}
        fresh = {object_key(obj): obj for obj in items if self._keep(obj) and object_key(obj) not in kept}
        for key in [k for k in self._store if k not in fresh and k not in kept]:
            self._apply("DELETED", self._store[key], force=True)
        for obj in fresh.values():
            self._apply("MODIFIED", obj, force=True)
        self._tombstones = {key: tomb for key, tomb in self._tombstones.items() if key in kept}
        self._resource_version = rv
        self.last_error = None
        self.synced.set()

    async def _watch_once(self) -> None:
        """Follow one watch stream from the last version until the server ends it."""
        loop = asyncio.get_running_loop()
        opened, events = loop.time(), 0
        async for event in self._api.watch(
            self.rt, self.namespace, self._resource_version, self._watch_timeout
        ):
            events += 1
            obj = event["object"]
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if event["type"] != "BOOKMARK":
                self._apply(event["type"], obj)
            if rv:
                self._resource_version = str(rv)
                self._forget_tombstones(resource_version(obj))
        self.last_error = None
        if not events and loop.time() - opened < MIN_WATCH_SECONDS:
            # A server that closes watches at once must not turn this into a request loop.
            await asyncio.sleep(MIN_WATCH_SECONDS * (0.5 + random.random()))

    def _forget_tombstones(self, watched: int | None) -> None:
        """Once the watch is past a tombstone's version, no older event for that key can arrive any more."""
        if watched is None or not self._tombstones:
            return
        for key in [k for k, rv in self._tombstones.items() if rv <= watched]:
            del self._tombstones[key]

    def _apply(self, kind: str, obj: dict[str, Any], *, force: bool = False) -> None:
        key = object_key(obj)
        current = self._store.get(key)
        if not force:
            tombstone = self._tombstones.get(key)
            if compare(obj, current) == -1 or compare(obj, tombstone) == -1:
                return
            if kind != "DELETED" and current is None and compare(obj, tombstone) == 0:
                return
        if kind == "DELETED" or not self._keep(obj):
            if current is None:
                return
            self._index(current, add=False)
            del self._store[key]
            rv = resource_version(obj)
            if rv is not None:
                self._tombstones[key] = rv
            self._notify(current, None)
            return
        self._tombstones.pop(key, None)
        if current is not None:
            if (current.get("metadata") or {}).get("resourceVersion") == (obj.get("metadata") or {}).get(
                "resourceVersion"
            ):
                return
            self._index(current, add=False)
        self._store[key] = obj
        self._index(obj, add=True)
        self._notify(current, obj)

    def _index(self, obj: dict[str, Any], *, add: bool) -> None:
        key = object_key(obj)
        for name, index_func in self._indexers.items():
            index = self._indexes[name]
            for value in index_func(obj):
                if add:
                    index.setdefault(value, set()).add(key)
                else:
                    keys = index.get(value)
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del index[value]

    def _notify(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        key = object_key(new or old or {})
        for index in range(len(self._handlers)):
            self._deliver(index, key, old, new)

    def _deliver(self, index: int, key: Key, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Call one handler; a failure must neither stop the cache nor be forgotten: retry with backoff."""
        pending = self._undelivered.get((index, key))
        try:
            self._handlers[index](old, new)
        except Exception:
            if pending is None:
                pending = self._undelivered[(index, key)] = _Undelivered(old)
            pending.failures += 1
            delay = min(HANDLER_RETRY_BASE * 2 ** (pending.failures - 1), MAX_BACKOFF)
            if pending.timer is not None:
                pending.timer.cancel()
            pending.timer = asyncio.get_running_loop().call_later(delay, self._redeliver, index, key)
            log.exception(
                "informer %s: a change handler failed for %s; retrying in %.1fs",
                self.rt.plural,
                "/".join(filter(None, key)),
                delay,
            )
            return
        if pending is not None:  # the handler is up to date with the key again
            del self._undelivered[(index, key)]
            if pending.timer is not None:
                pending.timer.cancel()

    def _redeliver(self, index: int, key: Key) -> None:
        """Tell the handler what changed since what it last took: its old object, and the cache's now."""
        pending = self._undelivered.get((index, key))
        if pending is None:
            return
        pending.timer = None
        current = self._store.get(key)
        if pending.old is None and current is None:  # it came and went: nothing to tell
            del self._undelivered[(index, key)]
            return
        self._deliver(index, key, pending.old, current)
