"""The one async Kubernetes API client (controller, local node agents, Airflow triggers): raw JSON requests.

Objects stay plain dicts (no generated models), so built-in and custom resources are handled the same way and
nothing the server returns is dropped. Every request is reported to an ``ApiMetrics`` by verb and resource;
the controller's Prometheus counters (read by the benchmark of docs/benchmarks.md#1-controller-efficiency)
implement it, the node agents and the triggers pass ``NO_METRICS``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from t9k_provider.kube import kubeconfig
from t9k_provider.kube.resources import PODS, ResourceType

MERGE_PATCH = "application/merge-patch+json"
#: built-in kinds only: lists with a merge key (a pod's or node's ``conditions``, by ``type``) are merged
#: item by item, so a writer sends only its own entries and never drops another writer's
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REQUEST_TIMEOUT = 30.0
#: A response's read buffer: a watch event is one line, and an object may be as large as etcd's 1.5 MiB
#: request limit (aiohttp's default 64 KiB refuses a line over 128 KiB, and pauses a large LIST's transfer
#: at every 64 KiB).
READ_BUFFER_BYTES = 2**21
#: Open connections per session unless asked otherwise (the watches of many triggers ask for no cap).
DEFAULT_CONNECTION_LIMIT = 100
#: Longest log line passed on; the rest of a longer line is dropped (a runaway line cannot exhaust memory).
MAX_LOG_LINE_BYTES = 64 * 1024


class ApiError(Exception):
    """A non-2xx answer; ``reason`` is the Status reason (NotFound, AlreadyExists, Conflict, Invalid, ...).

    ``headers`` are the response's (Retry-After); an ERROR event inside a watch stream has none.
    """

    def __init__(
        self,
        status: int,
        body: dict[str, Any] | None,
        text: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        body = body or {}
        self.status = status
        self.reason: str = body.get("reason") or ""
        self.message: str = body.get("message") or text or f"HTTP {status}"
        self.body = body
        self.headers: Mapping[str, str] = headers or {}
        super().__init__(f"{status} {self.reason}: {self.message}")

    @classmethod
    def from_answer(cls, status: int, text: str, headers: Mapping[str, str] | None = None) -> ApiError:
        """From a response's status and body text (a Status object, or anything a proxy sends)."""
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = None
        return cls(status, body if isinstance(body, dict) else None, text[:500], headers)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def expired(self) -> bool:
        return self.status == 410

    @property
    def resource_version_unavailable(self) -> bool:
        """The watch or list cannot start from the resourceVersion asked for: only a fresh list helps.

        410: compacted away. 504 ``ResourceVersionTooLarge``: newer than the server's store (the store was
        wiped, or this is another server); waiting would never end.
        """
        causes = (self.body.get("details") or {}).get("causes") or []
        too_large = any(c.get("reason") == "ResourceVersionTooLarge" for c in causes)
        return self.expired or (self.status == 504 and too_large)


class ApiMetrics(Protocol):
    """What a KubeApi and its informers report."""

    def api_request(self, verb: str, resource: str, code: int) -> None: ...

    def watch_event(self, resource: str, event_type: str) -> None: ...

    def relist(self, resource: str, cause: str) -> None: ...


class NoMetrics:
    def api_request(self, verb: str, resource: str, code: int) -> None:
        pass

    def watch_event(self, resource: str, event_type: str) -> None:
        pass

    def relist(self, resource: str, cause: str) -> None:
        pass


NO_METRICS = NoMetrics()


#: Sent with every request; the benchmarks' agent (``benchmarks/agent``) replaces it to count a process's
#: requests apart.
USER_AGENT = "t9k-provider"


class Session:
    """One endpoint's connections: an aiohttp session (its pool, capped or not) and the credentials it sends.

    Proxy variables are resolved once (``kubeconfig.environment_proxy``) and ``~/.netrc`` is never read:
    aiohttp's ``trust_env`` would look both up in worker threads on every request.
    """

    def __init__(self, endpoint: kubeconfig.Endpoint, connection_limit: int | None = None) -> None:
        self.endpoint = endpoint
        limit = DEFAULT_CONNECTION_LIMIT if connection_limit is None else connection_limit
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=limit), trust_env=False, read_bufsize=READ_BUFFER_BYTES
        )

    async def headers(self) -> dict[str, str]:
        """The credential's headers, after loading it again in a thread when it is stale (an exec plugin)."""
        if self.endpoint.stale():
            await asyncio.to_thread(self.endpoint.refresh)
        return self.endpoint.authorization()

    async def close(self) -> None:
        await self.http.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def api_client(
    kubeconfig_source: str | Path | Mapping[str, Any] | None,
    *,
    context: str | None = None,
    in_cluster: bool = False,
    verify_ssl: bool = True,
    connection_limit: int | None = None,
) -> Session:
    """A session on the cluster of ``kubeconfig_source``: a file or its parsed contents (``context`` picks
    a context other than its current one); ``in_cluster`` uses the pod's service account. With neither: the
    service account, else the default kubeconfig. ``connection_limit`` caps open connections (0: no cap;
    default: 100). The credential is loaded and the TLS context built here, in a thread: an exec plugin may
    run."""
    endpoint = kubeconfig.load(
        kubeconfig_source, context=context, in_cluster=in_cluster, verify_ssl=verify_ssl
    )
    await asyncio.to_thread(endpoint.ssl_context)
    return Session(endpoint, connection_limit)


class KubeApi:
    def __init__(self, session: Session, metrics: ApiMetrics = NO_METRICS) -> None:
        self._session = session
        self.metrics = metrics

    async def close(self) -> None:
        """Close the session's connections (streams still open on them end)."""
        await self._session.close()

    @property
    def host(self) -> str:
        """The server's base URL."""
        return self._session.endpoint.host

    async def _send(
        self,
        verb: str,
        method: str,
        rt: ResourceType,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | float = REQUEST_TIMEOUT,
    ) -> aiohttp.ClientResponse:
        session, endpoint = self._session, self._session.endpoint
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT, **await session.headers()}
        if body is not None:
            headers["Content-Type"] = content_type
        if not isinstance(timeout, aiohttp.ClientTimeout):
            timeout = aiohttp.ClientTimeout(total=timeout)
        response = await session.http.request(
            method,
            endpoint.host + path,
            params=query or None,
            data=None if body is None else json.dumps(body),
            headers=headers,
            ssl=endpoint.ssl_context() or True,  # True: aiohttp's default, for an http server
            server_hostname=endpoint.server_name,
            proxy=endpoint.proxy,
            timeout=timeout,
        )
        self.metrics.api_request(verb, rt.plural, response.status)
        return response

    async def _call(
        self, verb: str, method: str, rt: ResourceType, path: str, **kwargs: Any
    ) -> dict[str, Any]:
        response = await self._send(verb, method, rt, path, **kwargs)
        async with response:
            text = await response.text()
        if not 200 <= response.status < 300:
            raise ApiError.from_answer(response.status, text, response.headers)
        try:
            return json.loads(text) if text else {}
        except ValueError:
            return {}

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        return _typed(rt, await self._call("get", "GET", rt, rt.path(namespace, name)))

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        resource_version: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """The objects (built-in list items lack apiVersion/kind: they are filled in) and the list's RV.

        With ``limit``, only the first ``limit`` objects; the RV is still the collection's current one, from
        which a watch misses no later change (``limit=1`` is the cheapest way to get it).
        ``resource_version="0"`` lets the server answer from its cache.
        """
        query = [("labelSelector", label_selector)] if label_selector else []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if limit is not None:
            query.append(("limit", str(limit)))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        data = await self._call("list", "GET", rt, rt.path(namespace), query=query)
        items = [_typed(rt, item) for item in data.get("items") or []]
        return items, str((data.get("metadata") or {}).get("resourceVersion") or "")

    async def create(
        self,
        rt: ResourceType,
        namespace: str | None,
        obj: dict[str, Any],
        *,
        name: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """POST a new object, or with ``name`` and ``subresource`` to a subresource such as pods/binding."""
        path = rt.path(namespace, name, subresource)
        return _typed(rt, await self._call("create", "POST", rt, path, body=obj))

    async def replace(self, rt: ResourceType, namespace: str | None, name: str, obj: dict[str, Any]) -> dict:
        return _typed(rt, await self._call("update", "PUT", rt, rt.path(namespace, name), body=obj))

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
        strategic: bool = False,
    ) -> dict[str, Any]:
        """A JSON merge patch; ``strategic``: a strategic merge patch (`STRATEGIC_MERGE_PATCH`)."""
        path = rt.path(namespace, name, subresource)
        kind = STRATEGIC_MERGE_PATCH if strategic else MERGE_PATCH
        return _typed(rt, await self._call("patch", "PATCH", rt, path, body=patch, content_type=kind))

    async def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        propagation: str = "Background",
    ) -> dict[str, Any]:
        """Delete, guarded by ``uid`` and ``resource_version`` when given (409 Conflict if the name now holds
        another object, or the object changed since it was read)."""
        options: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": propagation,
        }
        guards = {"uid": uid, "resourceVersion": resource_version}
        if any(guards.values()):
            options["preconditions"] = {k: v for k, v in guards.items() if v is not None}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return await self._call("delete", "DELETE", rt, rt.path(namespace, name), body=options)

    async def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int,
        *,
        field_selector: str | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events from ``resource_version`` (of the objects ``field_selector`` selects, when given);
        raises ApiError(410) when it is too old.

        The server ends the stream after ``timeout_seconds``; the read timeout leaves it slack so a silent
        connection is noticed instead of hanging forever.
        """
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if field_selector:
            query.append(("fieldSelector", field_selector))
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=REQUEST_TIMEOUT, sock_read=timeout_seconds + 30
        )
        response = await self._send("watch", "GET", rt, rt.path(namespace), query=query, timeout=timeout)
        async with response:
            if response.status != 200:
                raise ApiError.from_answer(response.status, await response.text(), response.headers)
            while True:
                line = await response.content.readline()
                if not line:
                    return
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise ApiError(int(obj.get("code") or 500), obj)
                self.metrics.watch_event(rt.plural, str(event.get("type")))
                event["object"] = _typed(rt, obj)
                yield event

    async def read_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        limit_bytes: int,
        since_time: str | None = None,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        timestamps: bool = True,
    ) -> str:
        """A container's log up to now, each line after its time unless ``timestamps`` is False, at most
        ``limit_bytes``: from ``since_time`` (RFC 3339) or the last ``since_seconds``, only its last
        ``tail_lines`` lines when given."""
        query = [("container", container), ("limitBytes", str(limit_bytes))]
        if timestamps:
            query.append(("timestamps", "true"))
        if since_time is not None:
            query.append(("sinceTime", since_time))
        if since_seconds:
            query.append(("sinceSeconds", str(since_seconds)))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        response = await self._send("log", "GET", PODS, PODS.path(namespace, pod, "log"), query=query)
        async with response:
            text = await response.text(errors="replace")
        if response.status != 200:
            raise ApiError.from_answer(response.status, text, response.headers)
        return text

    async def follow_log(
        self, namespace: str, pod: str, container: str, *, since_time: str | None = None
    ) -> AsyncIterator[str]:
        """A container's log as it is written (``follow=true``, ``timestamps=true``), line by line, until the
        server ends it: the container stopped (after the last line) or the pod is gone.

        ``since_time`` (RFC 3339) starts at that second instead of the beginning. The stream has no read
        timeout: a replica may stay silent for hours; the caller stops the iteration when it stops caring.
        """

        query = [("container", container), ("follow", "true"), ("timestamps", "true")]
        if since_time is not None:
            query.append(("sinceTime", since_time))
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=REQUEST_TIMEOUT, sock_read=None)
        path = PODS.path(namespace, pod, "log")
        response = await self._send("log", "GET", PODS, path, query=query, timeout=timeout)
        async with response:
            if response.status != 200:
                raise ApiError.from_answer(response.status, await response.text(), response.headers)
            rest, cut = b"", False  # cut: the current line was passed on truncated; drop it up to its end
            while chunk := await response.content.readany():
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                if cut and lines:
                    lines.pop(0)
                    cut = False
                for line in lines:
                    yield line[:MAX_LOG_LINE_BYTES].decode(errors="replace")
                if len(rest) > MAX_LOG_LINE_BYTES and not cut:
                    yield rest[:MAX_LOG_LINE_BYTES].decode(errors="replace")
                    cut = True
                if cut:
                    rest = b""
            if rest and not cut:
                yield rest.decode(errors="replace")


def _typed(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("kind") not in (None, "", rt.kind) or "metadata" not in obj:
        return obj
    obj.setdefault("apiVersion", rt.api_version)
    obj["kind"] = rt.kind
    return obj
