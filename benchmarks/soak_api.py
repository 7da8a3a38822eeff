"""The soak's clients of a cluster whose API server goes away and comes back: calls that ride out a restart
or a cut connection (a fresh connection, tried again until ``patience`` runs out), and watches that resume
from the last version seen, or relist after a 410, until stopped.

Every request carries the ``t9k-bench`` User-Agent, as the other benchmarks' (``benchmarks.api``).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks.api import USER_AGENT, ApiError, Expired
from t9k_provider.testing import LocalCluster

#: Answers a restarting or overloaded server gives before it serves again: try again.
RETRYABLE = {429, 500, 502, 503, 504}
#: On event: (type, object, when it arrived as Unix seconds). A relist delivers each object as ``LIST``, then
#: ``SYNCED`` with ``{"uids": [...]}``, the uids it listed (what it did not list was deleted meanwhile).
OnEvent = Callable[[str, dict[str, Any], float], None]


class Api:
    """JSON calls from any thread (a connection per thread) that retry until ``patience`` seconds pass."""

    def __init__(self, cluster: LocalCluster, patience: float) -> None:
        self.cluster = cluster
        self.patience = patience
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[http.client.HTTPSConnection] = []

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self.cluster.connection(30)
            with self._lock:
                self._open.append(conn)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()
            with self._lock, contextlib.suppress(ValueError):
                self._open.remove(conn)

    def request(
        self, method: str, path: str, body: object = None, content_type: str = "application/json"
    ) -> tuple[int, Any, float]:
        """(status, decoded body, when the answered try was sent, as Unix seconds): broken connections and
        answers in ``RETRYABLE`` are tried again."""
        headers = {
            "Authorization": f"Bearer {self.cluster.token}",
            "Content-Type": content_type,
            "User-Agent": USER_AGENT,
        }
        data = None if body is None else json.dumps(body)
        deadline = time.monotonic() + self.patience
        failed = 0
        last = ""
        while True:
            try:
                conn = self._connection()
                sent = time.time()
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                last = repr(exc)
            else:
                if resp.status not in RETRYABLE:
                    try:
                        return resp.status, json.loads(raw) if raw else None, sent
                    except ValueError:
                        return resp.status, raw.decode(errors="replace"), sent
                last = f"HTTP {resp.status}: {raw[:200]!r}"
            failed += 1
            if time.monotonic() > deadline:
                raise ApiError(f"{method} {path}: no answer within {self.patience:g} s; last: {last}")
            time.sleep(min(0.1 * failed, 1.0))

    def json(self, method: str, path: str, body: object = None, expect: tuple[int, ...] = (200,)) -> Any:
        status, obj, _ = self.request(method, path, body)
        if status not in expect:
            raise ApiError(f"{method} {path}: HTTP {status}: {str(obj)[:300]}")
        return obj

    def close(self) -> None:
        with self._lock:
            for conn in self._open:
                conn.close()
            self._open.clear()


class Watcher(threading.Thread):
    """Streams a collection's events to ``on_event`` from the moment ``ready`` is set until ``stop()``.

    A broken stream (the server restarted, the connection was cut) resumes from the last version seen; a 410
    (that version was compacted away) relists, delivering every current object as ``LIST``. Only a server
    that stays unreachable for ``patience`` seconds ends it, with ``error`` set.
    """

    def __init__(self, cluster: LocalCluster, path: str, on_event: OnEvent, patience: float) -> None:
        super().__init__(daemon=True, name=f"watch {path}")
        self.cluster = cluster
        self.path = path
        self.on_event = on_event
        self.patience = patience
        self.api = Api(cluster, patience)
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.resumes = 0  # streams opened again from the last version seen
        self.relists = 0  # lists after a 410
        self._halt = threading.Event()
        self._conn: http.client.HTTPSConnection | None = None
        self._rv = ""

    def run(self) -> None:
        try:
            self._relist()
            self.relists = 0
            down_since: float | None = None
            while not self._halt.is_set():
                try:
                    self._follow()
                    down_since = None
                except (OSError, http.client.HTTPException, ApiError) as exc:
                    if isinstance(exc, Expired):
                        self._relist()
                        continue
                    down_since = down_since or time.monotonic()
                    if time.monotonic() - down_since > self.patience:
                        raise
                    time.sleep(0.2)
        except BaseException as exc:
            if not self._halt.is_set():
                self.error = exc
        finally:
            self.ready.set()

    def _follow(self) -> None:
        self._conn = conn = self.cluster.connection(60)
        try:
            conn.request(
                "GET",
                f"{self.path}?watch=true&resourceVersion={self._rv}&timeoutSeconds=60&allowWatchBookmarks=true",
                headers={"Authorization": f"Bearer {self.cluster.token}", "User-Agent": USER_AGENT},
            )
            resp = conn.getresponse()
            if resp.status == 410:
                raise Expired(f"watch {self.path}: HTTP 410")
            if resp.status != 200:
                raise ApiError(f"watch {self.path}: HTTP {resp.status}")
            self.resumes += self.ready.is_set()
            self.ready.set()
            while not self._halt.is_set():
                line = resp.readline()
                if not line:
                    return
                event = json.loads(line)
                received = time.time()
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        raise Expired(obj.get("message"))
                    raise ApiError(f"watch {self.path}: {obj.get('message')}")
                self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
                if event.get("type") != "BOOKMARK":
                    self.on_event(event["type"], obj, received)
        finally:
            conn.close()

    def _relist(self) -> None:
        listing = self.api.json("GET", self.path)
        received = time.time()
        items = listing.get("items") or []
        for obj in items:
            self.on_event("LIST", obj, received)
        self.on_event("SYNCED", {"uids": [obj["metadata"]["uid"] for obj in items]}, received)
        self._rv = str(listing["metadata"]["resourceVersion"])
        self.relists += 1

    def stop(self) -> None:
        self._halt.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(2)
        self.join(10)
        self.api.close()
