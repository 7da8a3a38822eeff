"""Minimal clients of the local cluster for the benchmarks: keep-alive JSON calls and a watch thread.

Every request carries the ``t9k-bench`` User-Agent, so the server's request counters
(``GET /_embedded/requests``) tell the benchmark's own traffic apart from the component measured.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from t9k_provider.testing import LocalCluster

USER_AGENT = "t9k-bench"


MAX_RECONNECTS = 20


class ApiError(RuntimeError):
    pass


class Expired(ApiError):
    """The watch's version is older than the server's history (410)."""


class Client:
    """One keep-alive HTTPS connection with the cluster's token (use one per thread)."""

    def __init__(self, cluster: LocalCluster, timeout: float = 60) -> None:
        self.conn = cluster.connection(timeout)
        self.headers = {
            "Authorization": f"Bearer {cluster.token}",
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
        }

    def call(self, method: str, path: str, body: object = None, content_type: str = "") -> tuple[int, bytes]:
        headers = dict(self.headers, **({"Content-Type": content_type} if content_type else {}))
        self.conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def json(self, method: str, path: str, body: object = None, expect: tuple[int, ...] = (200, 201)) -> Any:
        status, raw = self.call(method, path, body)
        if status not in expect:
            raise ApiError(f"{method} {path}: HTTP {status}: {raw[:300]!r}")
        return json.loads(raw) if raw else None

    def merge_patch(self, path: str, patch: dict[str, Any]) -> Any:
        status, raw = self.call("PATCH", path, patch, content_type="application/merge-patch+json")
        if status != 200:
            raise ApiError(f"PATCH {path}: HTTP {status}: {raw[:300]!r}")
        return json.loads(raw)

    def close(self) -> None:
        self.conn.close()


def ensure_namespace(client: Client, name: str) -> None:
    status, raw = client.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    if status not in (201, 409):
        raise ApiError(f"namespace {name}: HTTP {status}: {raw[:200]!r}")


def request_counts(client: Client) -> dict[tuple[str, str], int]:
    """Requests the server has served so far, by (User-Agent, access: read | write | watch)."""
    rows = client.json("GET", "/_embedded/requests")["requests"]
    return {(r["userAgent"], r["access"]): int(r["count"]) for r in rows}


class Watch(threading.Thread):
    """Streams watch events of one collection path to ``on_event(type, object, received_at)``.

    Starts from the collection's current resourceVersion (``ready`` is set once the stream is open) and
    reconnects from the last version seen until ``stop()``, also after a broken stream, and relists when
    that version has been compacted away.
    """

    def __init__(
        self,
        cluster: LocalCluster,
        path: str,
        on_event: Callable[[str, dict[str, Any], float], None],
        query: str = "",
    ) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.path = path
        self.query = query
        self.on_event = on_event
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._conn: Any = None
        self._rv = ""

    def run(self) -> None:
        try:
            client = Client(self.cluster)
            sep = "&" if self.query else ""
            self._rv = client.json("GET", f"{self.path}?limit=1{sep}{self.query}")["metadata"][
                "resourceVersion"
            ]
            client.close()
            failures = 0
            while not self._halt.is_set():
                try:
                    self._follow(sep)
                    failures = 0
                except (OSError, http.client.HTTPException):
                    # A stream the server (busy for longer than the socket timeout) or the network broke:
                    # resume from the last version seen, a bounded number of times in a row.
                    failures += 1
                    if failures > MAX_RECONNECTS or self._halt.is_set():
                        raise
                    time.sleep(0.5)
                except Expired:
                    self._relist(sep)
        except BaseException as exc:
            if not self._halt.is_set():
                self.error = exc
        finally:
            self.ready.set()

    def _follow(self, sep: str) -> None:
        """One watch stream from the last version seen until the server ends it."""
        self._conn = conn = self.cluster.connection(60)
        conn.request(
            "GET",
            f"{self.path}?watch=true&resourceVersion={self._rv}&timeoutSeconds=30"
            f"&allowWatchBookmarks=true{sep}{self.query}",
            headers={"Authorization": f"Bearer {self.cluster.token}", "User-Agent": USER_AGENT},
        )
        resp = conn.getresponse()
        if resp.status != 200:
            raise ApiError(f"watch {self.path}: HTTP {resp.status}")
        self.ready.set()
        while not self._halt.is_set():
            line = resp.readline()
            if not line:
                break
            event = json.loads(line)
            received = time.perf_counter()
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                if obj.get("code") == 410:
                    raise Expired(obj.get("message"))
                raise ApiError(f"watch {self.path}: {obj.get('message')}")
            self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
            if event.get("type") != "BOOKMARK":
                self.on_event(event["type"], obj, received)
        conn.close()

    def _relist(self, sep: str) -> None:
        """After the server compacted past the last version seen: every current object as ADDED (handlers
        keep first sightings), then the list's version."""
        client = Client(self.cluster)
        try:
            listing = client.json("GET", f"{self.path}?{self.query}")
        finally:
            client.close()
        received = time.perf_counter()
        for obj in listing.get("items") or []:
            self.on_event("ADDED", obj, received)
        self._rv = str(listing["metadata"]["resourceVersion"])

    def stop(self) -> None:
        self._halt.set()
        if self._conn is not None and self._conn.sock is not None:
            with contextlib.suppress(OSError):
                self._conn.sock.shutdown(2)
        self.join(10)
        if self.error is not None:
            raise self.error


def paced(
    cluster: LocalCluster,
    names: list[str],
    workers: int,
    rate: float | None,
    action: Callable[[Client, str], None],
) -> None:
    """``action(client, name)`` for every name from ``workers`` threads with a client each, all at once or,
    with ``rate``, each at its slot (``rate`` names per second from the start)."""
    local = threading.local()
    clients: list[Client] = []
    lock = threading.Lock()
    start = time.perf_counter()

    def one(slot: tuple[int, str]) -> None:
        i, name = slot
        if rate is not None and (delay := start + i / rate - time.perf_counter()) > 0:
            time.sleep(delay)
        if not hasattr(local, "client"):
            local.client = Client(cluster)
            with lock:
                clients.append(local.client)
        action(local.client, name)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, enumerate(names)))
    for client in clients:
        client.close()


def progress(message: str) -> None:
    """A progress line for whoever watches a long run."""
    print(f"[bench]   {time.strftime('%H:%M:%S')} {message}", flush=True)
