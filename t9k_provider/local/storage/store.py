"""Kine-style object storage on SQLite: an objects table plus an event log keyed by one global revision.

Every write is one SQLite transaction that gets the next revision, so the revision order is the commit order.
The store is used from a single thread (the API server's event loop) and each write runs to completion without
yielding, which makes that thread the single writer: no two writes interleave and watchers are notified in
revision order.

Durability: the database runs in WAL mode with ``synchronous=NORMAL``. A commit appends the transaction
to the WAL file with ``write()`` before returning, but does not ``fsync`` it. Data handed to the kernel
survives the death of the process (SIGKILL included), because the page cache belongs to the kernel, not to
the process, and the next open replays the WAL. Only a power loss or kernel crash can drop the last few
commits; ``synchronous=FULL`` would buy that back at one fsync per write, which a local cluster does not need.

Checkpoints (copying the WAL into the database file, with an fsync of each) run in a background thread on
its own connection, not inside the commit that crosses SQLite's auto-checkpoint threshold: there, one write
in a few hundred stalled the event loop for 10-30 ms, about half of all commit time. A checkpoint never
changes what a commit guarantees: it only copies data the WAL already holds.

An in-memory copy of all live objects (plus uid and owner indexes) serves reads; SQLite is read at start-up
and for watches that resume from an older revision. The JSON text each object was committed as is kept too:
responses and watch frames reuse it instead of encoding the same object again for every reader.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
Key = tuple[str, str, str, str]  # (group, resource, namespace, name); namespace "" for cluster-scoped objects

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
CHECKPOINT_WRITES = 200  # commits (a few pages each) between background checkpoints
CHECKPOINT_SECONDS = 1.0  # ... or this long, whichever comes first while writes arrive

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    grp TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    rv INTEGER NOT NULL, uid TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (grp, resource, namespace, name)
);
CREATE TABLE IF NOT EXISTS events (
    rv INTEGER PRIMARY KEY, type TEXT NOT NULL,
    grp TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    data TEXT NOT NULL, prev TEXT
);
CREATE INDEX IF NOT EXISTS events_by_resource ON events (grp, resource, rv);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class Conflict(Exception):
    """A create found the key taken, or an update/delete did not find it."""


class Compacted(Exception):
    """The requested revision is older than the oldest retained event."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"too old resource version: {requested} ({compacted})")
        self.requested = requested
        self.compacted = compacted


@dataclass(frozen=True)
class Event:
    """One committed change. ``obj`` carries the event's revision; ``prev`` is the state before it;
    ``text`` is ``obj`` as committed (compact JSON)."""

    type: str
    key: Key
    obj: dict[str, Any]
    prev: dict[str, Any] | None
    revision: int
    text: str


Listener = Callable[[Event], None]


def _key_of(obj: dict[str, Any], group: str, resource: str) -> Key:
    meta = obj["metadata"]
    return (group, resource, meta.get("namespace") or "", meta["name"])


class Store:
    """Objects are returned as shared dicts: callers must copy them before changing anything."""

    def __init__(self, path: Path, *, history: int = 50_000) -> None:
        self.path = path
        self.history = history
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer thread does it
        self._db.executescript(_SCHEMA)
        self._checkpointer = Checkpointer(path)
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self._texts: dict[Key, str] = {}
        self._by_uid: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}
        self._listeners: list[Listener] = []
        self.revision = self._meta("revision")
        self.compacted = self._meta("compacted")
        self._writes_since_compaction = 0
        for grp, resource, namespace, name, data in self._db.execute(
            "SELECT grp, resource, namespace, name, data FROM objects"
        ):
            self._remember((grp, resource, namespace, name), json.loads(data), data)

    # -- reads ---------------------------------------------------------------------------------------------

    def get(self, key: Key) -> dict[str, Any] | None:
        return self._objects.get(key[:2], {}).get(key[2:])

    def text(self, key: Key, obj: dict[str, Any]) -> str | None:
        """The JSON ``obj`` was committed as, if it is the object stored at ``key`` (else None)."""
        return self._texts.get(key) if self.get(key) is obj else None

    def list(self, group: str, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Live objects of one resource (every namespace when ``namespace`` is None), sorted by key."""
        bucket = self._objects.get((group, resource), {})
        keys = sorted(k for k in bucket if namespace is None or k[0] == namespace)
        return [bucket[k] for k in keys]

    def list_at(
        self, group: str, resource: str, namespace: str | None, revision: int
    ) -> list[dict[str, Any]]:
        """The objects as they were at ``revision``: today's, with later events undone (newest first).

        Raises ``Compacted`` when the history no longer reaches back to ``revision``.
        """
        if revision >= self.revision:
            return self.list(group, resource, namespace)
        bucket = self._objects.get((group, resource), {})
        state = {k: o for k, o in bucket.items() if namespace is None or k[0] == namespace}
        for event in reversed(list(self.events_since(revision, group, resource))):
            ns_name = event.key[2:]
            if namespace is not None and ns_name[0] != namespace:
                continue
            if event.type == ADDED or event.prev is None:
                state.pop(ns_name, None)
            else:
                state[ns_name] = event.prev
        return [state[k] for k in sorted(state)]

    def key_of_uid(self, uid: str) -> Key | None:
        return self._by_uid.get(uid)

    def dependents(self, owner_uid: str) -> list[Key]:
        return sorted(self._dependents.get(owner_uid, ()))

    def owner_uids(self) -> list[str]:
        return list(self._dependents)

    def resources(self) -> list[tuple[str, str]]:
        return [gr for gr, bucket in self._objects.items() if bucket]

    def events_since(self, revision: int, group: str, resource: str) -> Iterator[Event]:
        """Committed events of one resource with a revision greater than ``revision``, oldest first."""
        if revision < self.compacted:
            raise Compacted(revision, self.compacted)
        rows = self._db.execute(
            "SELECT rv, type, namespace, name, data, prev FROM events"
            " WHERE grp = ? AND resource = ? AND rv > ? ORDER BY rv",
            (group, resource, revision),
        ).fetchall()
        for rv, type_, namespace, name, data, prev in rows:
            yield Event(
                type_,
                (group, resource, namespace, name),
                json.loads(data),
                json.loads(prev) if prev else None,
                rv,
                data,
            )

    # -- writes --------------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def create(self, group: str, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        key = _key_of(obj, group, resource)
        if self.get(key) is not None:
            raise Conflict(key)
        return self._commit(ADDED, key, obj, None)

    def update(self, group: str, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        key = _key_of(obj, group, resource)
        prev = self.get(key)
        if prev is None:
            raise Conflict(key)
        return self._commit(MODIFIED, key, obj, prev)

    def delete(self, key: Key) -> dict[str, Any]:
        """Remove the object; the returned copy (and the DELETED event) carries the deletion's revision."""
        prev = self.get(key)
        if prev is None:
            raise Conflict(key)
        return self._commit(DELETED, key, json.loads(self._texts[key]), prev)

    def compact(self, revision: int | None = None) -> int:
        """Drop events up to ``revision`` (default: the current one); watches from older revisions get 410."""
        target = self.revision if revision is None else min(revision, self.revision)
        if target <= self.compacted:
            return self.compacted
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM events WHERE rv <= ?", (target,))
            self._set_meta("compacted", target)
        self.compacted = target
        return target

    def close(self) -> None:
        self._checkpointer.stop()
        self._db.close()

    # -- internals -----------------------------------------------------------------------------------------

    def _commit(
        self, type_: str, key: Key, obj: dict[str, Any], prev: dict[str, Any] | None
    ) -> dict[str, Any]:
        revision = self.revision + 1
        obj["metadata"]["resourceVersion"] = str(revision)
        data = json.dumps(obj, separators=(",", ":"))
        prev_data = self._texts[key] if prev is not None else None  # prev is the stored object
        group, resource, namespace, name = key
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            if type_ == DELETED:
                self._db.execute(
                    "DELETE FROM objects WHERE grp = ? AND resource = ? AND namespace = ? AND name = ?", key
                )
            else:
                self._db.execute(
                    "INSERT OR REPLACE INTO objects (grp, resource, namespace, name, rv, uid, data)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*key, revision, obj["metadata"].get("uid", ""), data),
                )
            self._db.execute(
                "INSERT INTO events (rv, type, grp, resource, namespace, name, data, prev)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (revision, type_, group, resource, namespace, name, data, prev_data),
            )
            self._set_meta("revision", revision)
        self.revision = revision
        if prev is not None:
            self._forget(key, prev)
        if type_ != DELETED:
            self._remember(key, obj, data)
        event = Event(type_, key, obj, prev, revision, data)
        self._checkpointer.wrote()
        for listener in list(self._listeners):
            listener(event)
        self._writes_since_compaction += 1
        if self._writes_since_compaction >= 1000:
            self._writes_since_compaction = 0
            if self.revision - self.compacted > self.history:
                self.compact(self.revision - self.history)
        return obj

    def _remember(self, key: Key, obj: dict[str, Any], text: str) -> None:
        self._objects.setdefault(key[:2], {})[key[2:]] = obj
        self._texts[key] = text
        meta = obj["metadata"]
        if meta.get("uid"):
            self._by_uid[meta["uid"]] = key
        for ref in meta.get("ownerReferences") or ():
            if ref.get("uid"):
                self._dependents.setdefault(ref["uid"], set()).add(key)

    def _forget(self, key: Key, obj: dict[str, Any]) -> None:
        self._objects.get(key[:2], {}).pop(key[2:], None)
        self._texts.pop(key, None)
        meta = obj["metadata"]
        if self._by_uid.get(meta.get("uid", "")) == key:
            del self._by_uid[meta["uid"]]
        for ref in meta.get("ownerReferences") or ():
            deps = self._dependents.get(ref.get("uid", ""))
            if deps is not None:
                deps.discard(key)
                if not deps:
                    del self._dependents[ref["uid"]]

    def _meta(self, key: str) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    def _set_meta(self, key: str, value: int) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


class Checkpointer:
    """Copies the WAL into the database from a thread of its own (sqlite3 releases the GIL meanwhile).

    Checkpoints are PASSIVE: they never wait for, or block, the writer; once a checkpoint has copied the
    whole WAL, the writer's next transaction starts the WAL over, so the file stays bounded.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._writes = 0
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="store-checkpointer", daemon=True)
        self._thread.start()

    def wrote(self) -> None:
        self._writes += 1
        if self._writes >= CHECKPOINT_WRITES:
            self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()

    @staticmethod
    def checkpoint(db: sqlite3.Connection) -> None:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _run(self) -> None:
        db = sqlite3.connect(str(self._path), isolation_level=None, check_same_thread=False)
        try:
            while not self._stopping:
                self._wake.wait(CHECKPOINT_SECONDS)
                self._wake.clear()
                if self._writes:
                    self._writes = 0
                    try:
                        self.checkpoint(db)
                    except Exception:  # whatever it was: a thread that ended would let the WAL grow unbounded
                        log.exception("checkpoint of %s failed (retried after the next writes)", self._path)
        finally:
            db.close()
