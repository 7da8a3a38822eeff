"""Watch fan-out: store events become per-watcher queues of ``{"type", "object"}`` frames.

A watcher is registered in the same event-loop step that reads its starting point (the snapshot or the
history since ``resourceVersion``), so no commit can fall between the two: events arrive exactly once and in
revision order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from t9k_provider.local.storage.store import ADDED, DELETED, MODIFIED, Event, Store

MAX_PENDING = 10_000  # undelivered frames a watcher may accumulate before it is closed


class Frame(NamedTuple):
    """One watch event for one watcher. ``text`` is ``obj`` as committed, when ``obj`` is the stored object:
    every watcher of a write then sends the same text rather than encoding the object again."""

    type: str
    obj: dict[str, Any]
    text: str | None


@dataclass(eq=False)
class Watcher:
    """One open watch on one stored resource, filtered by namespace and selectors."""

    group: str
    resource: str
    namespace: str | None
    match: Callable[[dict[str, Any] | None], bool]
    queue: asyncio.Queue[Frame | None] = field(default_factory=asyncio.Queue)

    def translate(self, event: Event) -> Frame | None:
        """Map a store event to what this watcher sees; selector transitions become ADDED/DELETED (W7)."""
        group, resource, namespace, _ = event.key
        if (group, resource) != (self.group, self.resource):
            return None
        if self.namespace is not None and namespace != self.namespace:
            return None
        now = self.match(event.obj) if event.type != DELETED else False
        before = self.match(event.prev) if event.prev is not None else False
        if event.type == DELETED:
            return Frame(DELETED, event.obj, event.text) if before else None
        if now and before:
            return Frame(MODIFIED, event.obj, event.text)
        if now:
            return Frame(ADDED, event.obj, event.text)
        if before:
            gone = dict(event.prev or {})
            gone["metadata"] = {**gone.get("metadata", {}), "resourceVersion": str(event.revision)}
            return Frame(DELETED, gone, None)
        return None


class Hub:
    """Delivers every committed store event to the watchers it concerns."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._watchers: set[Watcher] = set()
        store.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        for watcher in list(self._watchers):
            frame = watcher.translate(event)
            if frame is None:
                continue
            if watcher.queue.qsize() >= MAX_PENDING:
                # Too slow: end its stream after what is queued; the client re-watches from its last RV.
                self._watchers.discard(watcher)
                watcher.queue.put_nowait(None)
                continue
            watcher.queue.put_nowait(frame)

    def open(self, watcher: Watcher, since: int | None) -> list[Frame]:
        """Register ``watcher`` and return its initial frames: synthetic ADDEDs (``since`` None) or history.

        Raises ``store.Compacted`` when ``since`` is older than the retained history.
        """
        if since is None:
            items = self.store.list(watcher.group, watcher.resource, watcher.namespace)
            initial = [Frame(ADDED, o, self._text(watcher, o)) for o in items if watcher.match(o)]
        else:
            initial = []
            for event in self.store.events_since(since, watcher.group, watcher.resource):
                frame = watcher.translate(event)
                if frame is not None:
                    initial.append(frame)
        self._watchers.add(watcher)
        return initial

    def _text(self, watcher: Watcher, obj: dict[str, Any]) -> str | None:
        meta = obj["metadata"]
        key = (watcher.group, watcher.resource, meta.get("namespace", ""), meta["name"])
        return self.store.text(key, obj)

    def close(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def close_all(self) -> None:
        for watcher in self._watchers:
            watcher.queue.put_nowait(None)
        self._watchers.clear()
