"""HTTP side of the API server: path routing, parameters, content negotiation, list/watch/log streaming."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from t9k_provider.local import logs
from t9k_provider.local.apiserver import discovery, errors, protobuf, tables
from t9k_provider.local.apiserver.objects import DeleteOptions, Objects, deep_copy, store_key
from t9k_provider.local.apiserver.patch import APPLY_PATCH, PatchError, apply_patch
from t9k_provider.local.apiserver.resources import Registry, Resource
from t9k_provider.local.apiserver.watch import Hub, Watcher
from t9k_provider.local.store import Compacted, Key

log = logging.getLogger(__name__)
JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
BODY_TYPES = ["application/json", "application/yaml", PROTOBUF]
_TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false"}
BOOKMARK_SECONDS = 1.0
NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass
class Route:
    res: Resource
    namespace: str | None  # None: all namespaces (collection) or a cluster-scoped resource
    name: str
    subresource: str


def parse_bool(request: web.Request, name: str) -> bool:
    """Go ``strconv.ParseBool``: ``true/True/TRUE/1/t`` and the false equivalents (spec T3)."""
    value = request.query.get(name)
    if value is None or value == "":
        return False
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def parse_int(request: web.Request, name: str) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax') from None


def respond(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body, separators=(",", ":")), status=status, content_type=JSON)


def error_response(exc: errors.ApiError) -> web.Response:
    return respond(exc.status(), exc.code)


def check_accept(request: web.Request) -> bool:
    """Whether JSON is acceptable (spec T5); returns True when a Table was asked for."""
    accept = request.headers.get("Accept", "")
    if not accept.strip():
        return False
    acceptable = False
    for part in accept.split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media in ("application/json", "*/*", "application/*", "application/json-seq", "text/plain"):
            acceptable = True
    if not acceptable:
        raise errors.not_acceptable(accept)
    return tables.wants_table(accept)


async def read_body(request: web.Request) -> Any:
    raw = await request.read()
    ctype = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    if ctype and ctype not in BODY_TYPES:
        raise errors.unsupported_media_type(BODY_TYPES)
    if ctype == PROTOBUF:
        try:
            return protobuf.decode_object(raw)
        except protobuf.UnsupportedKind:
            raise errors.unsupported_media_type(BODY_TYPES[:2]) from None
        except protobuf.ProtobufError as exc:
            raise errors.bad_request(f"unable to decode the protobuf body: {exc}") from None
    if not raw.strip():
        return None
    try:
        if ctype == "application/yaml":
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None


class ItemCache:
    """Serialised list items, reused until the object changes: a LIST of many objects is mostly json.dumps."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self._texts: dict[Key, dict[str, tuple[str, str]]] = {}  # key -> group/version -> (rv, json)
        objects.store.subscribe(lambda event: self._texts.pop(event.key, None))

    def text(self, res: Resource, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        key = store_key(res, meta.get("namespace", ""), meta["name"])
        per_version = self._texts.setdefault(key, {})
        cached = per_version.get(res.group_version)
        if cached is not None and cached[0] == meta["resourceVersion"]:
            return cached[1]
        view = self.objects.view(res, obj)
        if not res.custom:  # built-in list items omit kind and apiVersion, as a real server's do
            view = {k: v for k, v in view.items() if k not in ("kind", "apiVersion")}
        text = json.dumps(view, separators=(",", ":"))
        per_version[res.group_version] = (meta["resourceVersion"], text)
        return text


class Handlers:
    def __init__(self, objects: Objects, hub: Hub, registry: Registry, state_dir: Path) -> None:
        self.objects = objects
        self.items = ItemCache(objects)
        self.hub = hub
        self.registry = registry
        self.state_dir = state_dir
        self.address = "127.0.0.1:0"
        #: Requests served, by (User-Agent, access); read at ``GET /_embedded/requests`` (benchmarks).
        self.request_counts: Counter[tuple[str, str]] = Counter()

    # -- routing -------------------------------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        if not request.path.startswith("/_embedded/"):
            self.request_counts[(request.headers.get("User-Agent", ""), _access(request))] += 1
        try:
            return await self._dispatch(request)
        except errors.ApiError as exc:
            return error_response(exc)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return respond(
                {"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]}
            )
        if parts[0] == "version" and len(parts) == 1:
            return respond(discovery.KUBERNETES_VERSION)
        if parts[:2] == ["openapi", "v3"] and request.method == "GET":
            doc = (
                discovery.openapi_v3_root(self.registry)
                if len(parts) == 2
                else discovery.openapi_v3_document(self.registry, "/".join(parts[2:]))
            )
            if doc is None:
                raise errors.path_not_found()
            return respond(doc)
        if parts[0] == "_embedded":
            return await self._embedded(request, parts[1:])
        if parts[0] == "api":
            if len(parts) == 1:
                return respond(discovery.api_versions(self.address))
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return respond(discovery.api_group_list(self.registry))
            if len(parts) == 2:
                doc = discovery.api_group(self.registry, parts[1])
                if doc is None:
                    raise errors.path_not_found()
                return respond(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.path_not_found()  # /openapi/v2 etc.: 404 whatever the Accept (kubectl falls back)
        want_table = check_accept(request)
        if not rest:
            doc = discovery.api_resource_list(self.registry, group, version)
            if doc is None or request.method != "GET":
                raise errors.path_not_found()
            return respond(doc)
        route = self._route(group, version, rest)
        return await self._serve(request, route, want_table)

    def _route(self, group: str, version: str, rest: list[str]) -> Route:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in NAMESPACE_SUBRESOURCES:
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise errors.path_not_found()
        res = self.registry.lookup(group, version, rest[0])
        if res is None:
            raise errors.path_not_found()
        if namespace is not None and not res.namespaced:
            raise errors.path_not_found()
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in res.subresources:
            raise errors.path_not_found()
        if name and res.namespaced and namespace is None:
            raise errors.path_not_found()
        return Route(res, namespace, name, sub)

    async def _serve(self, request: web.Request, route: Route, want_table: bool) -> web.StreamResponse:
        method = request.method
        res, ns, name, sub = route.res, route.namespace or "", route.name, route.subresource
        if res.review:
            if method != "POST" or name:
                raise errors.method_not_allowed()
            return respond(_allow_review(res, await read_body(request)), 201)
        dry_run = request.query.get("dryRun") == "All"
        strict = request.query.get("fieldValidation") == "Strict"
        if not name:
            if method == "GET":
                if parse_bool(request, "watch"):
                    return await self.watch(request, route, want_table)
                return self.list(request, route, want_table)
            if method == "POST":
                if res.namespaced and route.namespace is None:
                    raise errors.method_not_allowed()
                created = self.objects.create(
                    res, ns, await read_body(request), dry_run=dry_run, strict=strict
                )
                return respond(self.objects.view(res, created), 201)
            if method == "DELETE":
                return await self.delete_collection(request, route)
            raise errors.method_not_allowed()
        if sub == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            return await self.pod_log(request, route)
        if sub == "binding":
            if method != "POST":
                raise errors.method_not_allowed()
            return self.bind(route, await read_body(request))
        if sub == "scale":
            return await self.scale(request, route)
        if method == "GET":
            if parse_bool(request, "watch"):
                return await self.watch(request, route, want_table)
            obj = self.objects.view(res, self.objects.get(res, ns, name))
            if want_table:
                obj = tables.table(
                    res,
                    [obj],
                    obj["metadata"]["resourceVersion"],
                    request.query.get("includeObject", "Metadata"),
                )
            return respond(obj)
        if method == "PUT":
            body = await read_body(request)
            if sub == "finalize":
                return respond(self._finalize(res, name, body))
            existed = self.objects.store.get(store_key(res, ns, name)) is not None
            updated = self.objects.update(
                res, ns, name, body, subresource=sub, dry_run=dry_run, strict=strict
            )
            return respond(self.objects.view(res, updated), 200 if existed else 201)  # Lease PUT creates
        if method == "PATCH":
            ctype = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            if ctype == APPLY_PATCH:
                if not request.query.get("fieldManager"):
                    raise errors.bad_request(
                        "PATCH requests with application/apply-patch+yaml require the fieldManager parameter"
                    )
                applied, created = self.objects.apply(
                    res, ns, name, await request.read(), subresource=sub, dry_run=dry_run, strict=strict
                )
                return respond(self.objects.view(res, applied), 201 if created else 200)
            patched = self.objects.patch(
                res, ns, name, await request.read(), ctype, subresource=sub, dry_run=dry_run, strict=strict
            )
            return respond(self.objects.view(res, patched))
        if method == "DELETE" and not sub:
            opts = await self._delete_options(request)
            result = self.objects.delete(res, ns, name, opts)
            return respond(result.body, result.code)
        raise errors.method_not_allowed()

    # -- list ----------------------------------------------------------------------------------------------

    def list(self, request: web.Request, route: Route, want_table: bool) -> web.Response:
        res = route.res
        revision = self.objects.store.revision
        rv_param = request.query.get("resourceVersion", "")
        if rv_param and rv_param != "0":
            try:
                wanted = int(rv_param)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {rv_param}") from None
            exact = request.query.get("resourceVersionMatch") == "Exact"
            # Only the current snapshot is kept, so an exact list of any other revision cannot be served.
            if exact and wanted < revision:
                raise errors.expired(str(Compacted(wanted, revision)))
            if exact and wanted > revision:
                raise errors.ApiError(504, "Timeout", "Too large resource version", {"retryAfterSeconds": 1})
        items = self.objects.list(
            res,
            route.namespace,
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
        )
        limit = parse_int(request, "limit") or 0
        token = request.query.get("continue", "")
        if token:
            revision, items = self._after_token(token, items)
        next_token = ""
        if limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            items = items[:limit]
            start = f"{last.get('namespace', '')}/{last['name']}"
            next_token = base64.urlsafe_b64encode(
                json.dumps({"rv": revision, "start": start}).encode()
            ).decode()
        if want_table:
            views = [self.objects.view(res, o) for o in items]
            return respond(
                tables.table(
                    res, views, str(revision), request.query.get("includeObject", "Metadata"), next_token
                )
            )
        metadata: dict[str, Any] = {"resourceVersion": str(revision)}
        if next_token:
            metadata["continue"] = next_token
        head = json.dumps(
            {"kind": res.list_kind, "apiVersion": res.group_version, "metadata": metadata},
            separators=(",", ":"),
        )
        body = ",".join(self.items.text(res, o) for o in items)
        return web.Response(text=f'{head[:-1]},"items":[{body}]}}', content_type=JSON)

    def _after_token(self, token: str, items: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            revision, start = int(decoded["rv"]), str(decoded["start"])
        except (ValueError, KeyError, TypeError):
            raise errors.bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
            ) from None
        if revision < self.objects.store.compacted:
            raise errors.expired(
                "The provided continue parameter is too old to display a consistent list result. You can "
                "start "
                "a new list without the continue parameter, or use the continue token in this response to "
                "retrieve the remainder of the results. Continuing with the provided token results in an "
                "inconsistent list - objects that were created, modified, or deleted between the time the "
                "first chunk was returned and now may show up in the list."
            )
        return revision, [
            o for o in items if f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" > start
        ]

    # -- watch ---------------------------------------------------------------------------------------------

    async def watch(self, request: web.Request, route: Route, want_table: bool) -> web.StreamResponse:
        res = route.res
        field_selector = request.query.get("fieldSelector", "")
        if route.name:
            name_sel = f"metadata.name={route.name}"
            field_selector = f"{field_selector},{name_sel}" if field_selector else name_sel
        match = self.objects.matcher(res, request.query.get("labelSelector", ""), field_selector)
        rv_param = request.query.get("resourceVersion", "")
        since: int | None = None
        send_initial = parse_bool(request, "sendInitialEvents")  # watch-list (W9): state, then a marker
        if rv_param and rv_param != "0" and not send_initial:
            try:
                since = int(rv_param)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {rv_param}") from None
        if since is not None and since > self.objects.store.revision:
            await self._wait_for_revision(since)
        timeout = parse_int(request, "timeoutSeconds")
        if timeout is None or timeout <= 0:
            timeout = random.randint(300, 600)
        bookmarks = parse_bool(request, "allowWatchBookmarks")
        include_object = request.query.get("includeObject", "Metadata")
        watcher = Watcher(
            res.storage_group, res.storage_resource, route.namespace if res.namespaced else None, match
        )
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache"})
        response.enable_chunked_encoding()
        try:
            initial = self.hub.open(watcher, since)
            opened_at = self.objects.store.revision
        except Compacted as exc:
            await response.prepare(request)
            expired = errors.expired(str(exc)).status()
            await response.write(json.dumps({"type": "ERROR", "object": expired}).encode() + b"\n")
            await response.write_eof()
            return response

        def encode(kind: str, obj: dict[str, Any]) -> bytes:
            view = self.objects.view(res, obj)
            if want_table:
                view = tables.table(res, [view], view["metadata"]["resourceVersion"], include_object)
            return json.dumps({"type": kind, "object": view}, separators=(",", ":")).encode() + b"\n"

        def bookmark(revision: int | None = None, initial_end: bool = False) -> bytes:
            """Only sent with an empty queue (or at ``revision``), so it never skips undelivered events."""
            meta: dict[str, Any] = {"resourceVersion": str(revision or self.objects.store.revision)}
            if initial_end:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            obj = {"kind": res.kind, "apiVersion": res.group_version, "metadata": meta}
            return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await response.prepare(request)
            if initial:
                await response.write(b"".join(encode(k, o) for k, o in initial))
            if send_initial:
                await response.write(bookmark(opened_at, initial_end=True))
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    if bookmarks:
                        await response.write(bookmark())
                    break
                try:
                    frame = await asyncio.wait_for(watcher.queue.get(), min(remaining, BOOKMARK_SECONDS))
                except asyncio.TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    if bookmarks:
                        await response.write(bookmark())
                    continue
                if frame is None:
                    break
                chunk = [encode(*frame)]
                while not watcher.queue.empty() and len(chunk) < 256:
                    nxt = watcher.queue.get_nowait()
                    if nxt is None:
                        break
                    chunk.append(encode(*nxt))
                await response.write(b"".join(chunk))
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away
        except Exception:
            # headers are sent: the stream can only end; the client sees EOF and re-watches
            log.exception("watch of %s failed", request.path_qs)
        finally:
            self.hub.close(watcher)
        return response

    async def _wait_for_revision(self, wanted: int, patience: float = 3.0) -> None:
        """A watch from a future revision waits briefly, then gets 504 (a client of a wiped store relists)."""
        deadline = asyncio.get_running_loop().time() + patience
        while self.objects.store.revision < wanted:
            if asyncio.get_running_loop().time() >= deadline:
                raise errors.ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {wanted}, current: {self.objects.store.revision}",
                    {
                        "causes": [
                            {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                        ],
                        "retryAfterSeconds": 1,
                    },
                )
            await asyncio.sleep(0.05)

    # -- delete --------------------------------------------------------------------------------------------

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        body = await read_body(request)
        if body is not None and not isinstance(body, dict):
            raise errors.bad_request("the body of a DELETE must be a DeleteOptions object")
        body = body or {}
        pre = body.get("preconditions") or {}
        grace = body.get("gracePeriodSeconds")
        expected = [
            ("preconditions", pre, dict),
            ("gracePeriodSeconds", grace, int),
            ("orphanDependents", body.get("orphanDependents"), bool),
            ("propagationPolicy", body.get("propagationPolicy"), str),
        ]
        for field, value, kind in expected:
            if value is not None and (
                not isinstance(value, kind) or (kind is int and isinstance(value, bool))
            ):
                raise errors.bad_request(
                    f"json: cannot unmarshal {type(value).__name__} into Go struct field "
                    f"DeleteOptions.{field}"
                )
        if grace is None:
            grace = parse_int(request, "gracePeriodSeconds")
        orphan = body.get("orphanDependents")
        if orphan is None and "orphanDependents" in request.query:
            orphan = parse_bool(request, "orphanDependents")
        dry = body.get("dryRun") or request.query.getall("dryRun", [])
        return DeleteOptions(
            grace_period=int(grace) if grace is not None else None,
            propagation=body.get("propagationPolicy") or request.query.get("propagationPolicy") or None,
            orphan_dependents=orphan,
            uid=pre.get("uid"),
            resource_version=pre.get("resourceVersion"),
            dry_run="All" in (dry if isinstance(dry, list) else [dry]),
        )

    async def delete_collection(self, request: web.Request, route: Route) -> web.Response:
        res = route.res
        if res.namespaced and route.namespace is None:
            raise errors.method_not_allowed()
        opts = await self._delete_options(request)
        items = self.objects.list(
            res,
            route.namespace,
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
        )
        results = []
        for obj in items:
            meta = obj["metadata"]
            try:
                result = self.objects.delete(res, meta.get("namespace", ""), meta["name"], opts)
            except errors.ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            if result.body.get("kind") != "Status":
                results.append(result.body)
        items_out = [
            {k: v for k, v in o.items() if k not in ("kind", "apiVersion")} if not res.custom else o
            for o in results
        ]
        return respond(
            {
                "kind": res.list_kind,
                "apiVersion": res.group_version,
                "metadata": {"resourceVersion": str(self.objects.store.revision)},
                "items": items_out,
            }
        )

    # -- subresources --------------------------------------------------------------------------------------

    def bind(self, route: Route, body: Any) -> web.Response:
        res, ns, name = route.res, route.namespace or "", route.name
        pod = self.objects.get(res, ns, name)
        target = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
        if not target:
            raise errors.invalid(
                "Binding",
                "",
                name,
                [{"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}],
                f'Binding "{name}" is invalid: target.name: Required value',
            )
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            raise errors.conflict(
                "pods/binding", "", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.conflict(
                "pods/binding", "", name, f"pod {name} is being deleted, cannot be assigned to a host"
            )
        new = deep_copy(pod)
        new["spec"]["nodeName"] = target
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
        status["conditions"] = conditions
        self.objects.store.update(res.storage_group, res.storage_resource, new)
        return respond(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201
        )

    def _finalize(self, res: Resource, name: str, body: Any) -> dict[str, Any]:
        current = self.objects.get(res, "", name)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of a finalize must be a Namespace")
        new = deep_copy(current)
        new["spec"] = {
            **(current.get("spec") or {}),
            "finalizers": list(((body.get("spec") or {}).get("finalizers")) or []),
        }
        return self.objects.view(res, self.objects.write(res, current, new))

    async def scale(self, request: web.Request, route: Route) -> web.Response:
        res, ns, name = route.res, route.namespace or "", route.name
        spec_path = (res.scale or {}).get("specReplicasPath", ".spec.replicas")
        status_path = (res.scale or {}).get("statusReplicasPath", ".status.replicas")
        current = self.objects.get(res, ns, name)
        scale = _scale_of(current, spec_path, status_path, (res.scale or {}).get("labelSelectorPath"))
        if request.method == "GET":
            return respond(scale)
        if request.method == "PUT":
            body = await read_body(request)
        elif request.method == "PATCH":
            ctype = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            try:
                body = apply_patch(deep_copy(scale), await request.read(), ctype, kind="Scale", custom=True)
            except PatchError as exc:
                raise errors.ApiError(exc.code, exc.reason, exc.message) from exc
        else:
            raise errors.method_not_allowed()
        replicas = ((body or {}).get("spec") or {}).get("replicas") if isinstance(body, dict) else None
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid(
                "Scale",
                "autoscaling",
                name,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {replicas}: must be a non-negative integer",
                        "field": "spec.replicas",
                    }
                ],
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: {replicas}',
            )
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(res.plural, res.group, name)
        new = deep_copy(current)
        _set_path(new, spec_path, replicas)
        updated = self.objects.write(res, current, new)
        return respond(_scale_of(updated, spec_path, status_path, (res.scale or {}).get("labelSelectorPath")))

    # -- pods/log ------------------------------------------------------------------------------------------

    async def pod_log(self, request: web.Request, route: Route) -> web.StreamResponse:
        res, ns, name = route.res, route.namespace or "", route.name
        pod = self.objects.get(res, ns, name)
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        names = [c.get("name") for c in spec.get("containers") or ()]
        init_names = [c.get("name") for c in spec.get("initContainers") or ()]
        container = request.query.get("container", "")
        if not container:
            if len(names) != 1:
                message = (
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
                )
                if init_names:
                    message += f" or one of the init containers: [{' '.join(init_names)}]"
                raise errors.bad_request(message)
            container = names[0]
        if container not in names and container not in init_names:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        statuses = [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]
        cstatus = next((s for s in statuses if s.get("name") == container), None)
        restart, follow = _log_instance(
            cstatus, container, name, parse_bool(request, "previous"), parse_bool(request, "follow")
        )
        since_time = _since(request)
        tail = parse_int(request, "tailLines")
        limit = parse_int(request, "limitBytes")
        if (tail is not None and tail < 0) or (limit is not None and limit <= 0):
            raise errors.bad_request("tailLines and limitBytes must be positive")
        path = logs.container_log_path(self.state_dir, pod, container, restart)
        uid = pod["metadata"]["uid"]
        key = store_key(res, ns, name)

        async def finished() -> bool:
            current = self.objects.store.get(key)
            if current is None or current["metadata"].get("uid") != uid:
                return True
            return logs.container_finished(path)

        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            async for chunk in logs.read_log(
                path,
                follow=follow,
                timestamps=parse_bool(request, "timestamps"),
                tail_lines=tail,
                since_time=since_time,
                limit_bytes=limit,
                finished=finished,
            ):
                await response.write(chunk)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away
        except Exception:
            log.exception("log stream of %s failed", request.path_qs)
        return response

    # -- test hooks ----------------------------------------------------------------------------------------

    async def _embedded(self, request: web.Request, parts: list[str]) -> web.Response:
        if parts == ["compact"] and request.method == "POST":
            body = await read_body(request)
            revision = (body or {}).get("revision") if isinstance(body, dict) else None
            if revision is None:
                revision = parse_int(request, "revision")
            compacted = self.objects.store.compact(int(revision) if revision is not None else None)
            return respond({"compacted": compacted, "revision": self.objects.store.revision})
        if parts == ["requests"] and request.method == "GET":
            counts = sorted(self.request_counts.items())
            rows = [{"userAgent": ua, "access": access, "count": n} for (ua, access), n in counts]
            return respond({"requests": rows})
        raise errors.path_not_found()


def _access(request: web.Request) -> str:
    """``watch`` (one long request), ``read`` (other GETs) or ``write``, as the controller's metrics say."""
    if request.method not in ("GET", "HEAD"):
        return "write"
    return "watch" if request.query.get("watch", "").lower() in _TRUE else "read"


def _log_instance(
    cstatus: dict[str, Any] | None, container: str, pod: str, previous: bool, follow: bool
) -> tuple[int, bool]:
    """The run whose log is served (its restart index) and whether to follow it, as the kubelet decides."""
    status = cstatus or {}
    restarts = int(status.get("restartCount") or 0)
    state, last = status.get("state") or {}, status.get("lastState") or {}
    if previous:
        if not last.get("terminated") or restarts == 0:
            raise errors.bad_request(f'previous terminated container "{container}" in pod "{pod}" not found')
        return restarts - 1, False
    if "running" in state or "terminated" in state:
        return restarts, follow
    if last.get("terminated") and restarts > 0:  # e.g. CrashLoopBackOff: the last run's output
        return restarts - 1, False
    reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
    if reason == "ErrImagePull":
        reason = "image can't be pulled"
    elif reason == "ImagePullBackOff":
        reason = "trying and failing to pull image"
    raise errors.bad_request(f'container "{container}" in pod "{pod}" is waiting to start: {reason}')


def _allow_review(res: Resource, body: Any) -> dict[str, Any]:
    """The single token has full access, so every access review is allowed."""
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise errors.bad_request(f"a {res.kind} needs a spec")
    return {
        "kind": res.kind,
        "apiVersion": res.group_version,
        "metadata": {"creationTimestamp": None},
        "spec": body["spec"],
        "status": {"allowed": True, "reason": "t9k-local: the cluster token has full access"},
    }


def _since(request: web.Request) -> datetime | None:
    seconds = parse_int(request, "sinceSeconds")
    if seconds is not None:
        if seconds <= 0:
            raise errors.bad_request("sinceSeconds must be a positive integer")
        return datetime.now(timezone.utc) - timedelta(seconds=seconds)
    text = request.query.get("sinceTime")
    if not text:
        return None
    try:
        return logs.parse_timestamp(text)
    except ValueError:
        raise errors.bad_request(f'parsing time "{text}" as RFC3339: cannot parse') from None


def _get_path(obj: Any, path: str) -> Any:
    for part in path.strip(".").split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.strip(".").split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    obj[leaf] = value


def _scale_of(
    obj: dict[str, Any], spec_path: str, status_path: str, selector_path: str | None
) -> dict[str, Any]:
    meta = obj["metadata"]
    status: dict[str, Any] = {"replicas": _get_path(obj, status_path) or 0}
    if selector_path and _get_path(obj, selector_path):
        status["selector"] = _get_path(obj, selector_path)
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": _get_path(obj, spec_path) or 0},
        "status": status,
    }
