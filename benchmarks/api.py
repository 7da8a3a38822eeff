"""Minimal clients of the local cluster for the benchmarks: keep-alive JSON calls and a watch thread.

Every request carries the ``t9k-bench`` User-Agent, so the server's request counters
(``GET /_embedded/requests``) tell the benchmark's own traffic apart from the component measured.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from t9k_provider.local.testing import LocalCluster

USER_AGENT = "t9k-bench"


class ApiError(RuntimeError):
    pass


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
    reconnects from the last version seen until ``stop()``.
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

    def run(self) -> None:
        try:
            client = Client(self.cluster)
            sep = "&" if self.query else ""
            rv = client.json("GET", f"{self.path}?limit=1{sep}{self.query}")["metadata"]["resourceVersion"]
            client.close()
            while not self._halt.is_set():
                self._conn = conn = self.cluster.connection(60)
                conn.request(
                    "GET",
                    f"{self.path}?watch=true&resourceVersion={rv}&timeoutSeconds=30"
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
                        raise ApiError(f"watch {self.path}: {obj.get('message')}")
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event.get("type") != "BOOKMARK":
                        self.on_event(event["type"], obj, received)
                conn.close()
        except BaseException as exc:
            if not self._halt.is_set():
                self.error = exc
        finally:
            self.ready.set()

    def stop(self) -> None:
        self._halt.set()
        if self._conn is not None and self._conn.sock is not None:
            with contextlib.suppress(OSError):
                self._conn.sock.shutdown(2)
        self.join(10)
        if self.error is not None:
            raise self.error


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``check`` until truthy; raise ``TimeoutError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def progress(message: str) -> None:
    """A progress line for whoever watches a long run."""
    print(f"[bench]   {time.strftime('%H:%M:%S')} {message}", flush=True)
