"""The one async Kubernetes API client (controller, local node agents, Airflow triggers): raw JSON requests.

Objects stay plain dicts (no generated models), so built-in and custom resources are handled the same way and
nothing the server returns is dropped. Every request is reported to an ``ApiMetrics`` by verb and resource;
the controller's Prometheus counters (read by the benchmark of docs/benchmarks.md#1-controller-efficiency)
implement it, the node agents and the triggers pass ``NO_METRICS``.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration

from t9k_provider.kube.resources import PODS, ResourceType

MERGE_PATCH = "application/merge-patch+json"
#: built-in kinds only: lists with a merge key (a pod's or node's ``conditions``, by ``type``) are merged
#: item by item, so a writer sends only its own entries and never drops another writer's
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REQUEST_TIMEOUT = 30.0
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


async def api_client(
    kubeconfig: str | Path | Mapping[str, Any] | None,
    *,
    context: str | None = None,
    in_cluster: bool = False,
    verify_ssl: bool = True,
    connection_limit: int | None = None,
) -> ApiClient:
    """A client bound to its own configuration, never the global one.

    ``kubeconfig`` is a file or its parsed contents (``context`` picks a context other than its current one);
    ``in_cluster`` uses the pod's service account. With neither: the service account, else the default
    kubeconfig. ``connection_limit`` caps open connections (0: no cap; default: the client's 100).
    """
    configuration = Configuration()
    if in_cluster:
        kube_config.load_incluster_config(client_configuration=configuration)
    elif isinstance(kubeconfig, Mapping):
        await kube_config.load_kube_config_from_dict(
            dict(kubeconfig), context=context, client_configuration=configuration
        )
    elif kubeconfig:
        await kube_config.load_kube_config(
            config_file=str(kubeconfig),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    else:
        try:
            kube_config.load_incluster_config(client_configuration=configuration)
        except kube_config.ConfigException:
            await kube_config.load_kube_config(
                context=context, client_configuration=configuration, persist_config=False
            )
    if not verify_ssl:
        configuration.verify_ssl = False
    if connection_limit is not None:
        configuration.connection_pool_maxsize = connection_limit
    if not configuration.proxy:
        configuration.proxy = environment_proxy(configuration.host)
    client = ApiClient(configuration)
    # kubernetes_asyncio's session trusts the environment, so aiohttp would look up proxy variables and
    # ~/.netrc in worker threads on every request (about 40% of a request's client CPU); the proxy is
    # resolved once above instead, and a bearer token or client certificate never comes from .netrc.
    client.rest_client.pool_manager._trust_env = False
    return client


def environment_proxy(host: str) -> str | None:
    """The proxy that HTTPS_PROXY/HTTP_PROXY name for ``host`` unless NO_PROXY exempts it (as client-go)."""
    url = urllib.parse.urlsplit(host)
    if urllib.request.proxy_bypass(url.hostname or ""):
        return None
    return urllib.request.getproxies().get(url.scheme)


class KubeApi:
    def __init__(self, client: ApiClient, metrics: ApiMetrics = NO_METRICS) -> None:
        self._client = client
        self.metrics = metrics

    async def close(self) -> None:
        """Close the client's connections (streams still open on them end)."""
        await self._client.close()

    @property
    def host(self) -> str:
        """The server's base URL."""
        return str(self._client.configuration.host)

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
        response: aiohttp.ClientResponse = await self._client.call_api(
            path,
            method,
            query_params=query or [],
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
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
    ) -> tuple[list[dict[str, Any]], str]:
        """The objects (built-in list items lack apiVersion/kind: they are filled in) and the list's RV.

        With ``limit``, only the first ``limit`` objects; the RV is still the collection's current one, from
        which a watch misses no later change (``limit=1`` is the cheapest way to get it).
        """
        query = [("labelSelector", label_selector)] if label_selector else []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if limit is not None:
            query.append(("limit", str(limit)))
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
        self, namespace: str, pod: str, container: str, *, since_time: str | None, limit_bytes: int
    ) -> str:
        """A container's log up to now (``timestamps=true``), from ``since_time`` (RFC 3339), at most
        ``limit_bytes``."""
        query = [("container", container), ("timestamps", "true"), ("limitBytes", str(limit_bytes))]
        if since_time is not None:
            query.append(("sinceTime", since_time))
        response = await self._send("log", "GET", PODS, PODS.path(namespace, pod, "log"), query=query)
        async with response:
            text = await response.text()
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
