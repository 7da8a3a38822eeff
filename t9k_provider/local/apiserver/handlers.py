"""HTTP side of the API server: path routing, list (with paging), watch streaming, delete options."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from t9k_provider.local.apiserver import (
    discovery,
    openapi,
    podstreams,
    portforward,
    subresources,
    tables,
)
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.authz import Authorizer, UserInfo
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.node import NodeStreams
from t9k_provider.local.apiserver.objects import DeleteOptions, Objects, WriteOptions, store_key
from t9k_provider.local.apiserver.registry import Registry
from t9k_provider.local.apiserver.strategies.accessreviews import ReviewStrategy
from t9k_provider.local.apiserver.tokenrequests import token_request
from t9k_provider.local.apiserver.tokens import TokenSigner
from t9k_provider.local.apiserver.watch import Frame, Hub, Watcher
from t9k_provider.local.apiserver.wire import (
    JSON,
    TRUE,
    Route,
    check_accept,
    error_response,
    parse_bool,
    parse_int,
    read_body,
    respond,
    respond_text,
)
from t9k_provider.local.machinery.patch import APPLY_PATCH
from t9k_provider.local.storage.store import Compacted, Key

log = logging.getLogger(__name__)
BOOKMARK_SECONDS = 1.0
MAX_CHUNK_FRAMES = 256  # frames written to a watch stream at once
NAMESPACE_SUBRESOURCES = {"status", "finalize"}
USER = "t9k-local.user"  # the request key the server's middleware keeps the authenticated user under


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
        if not res.strategy.custom:  # built-in list items omit kind and apiVersion, as a real server's do
            view = {k: v for k, v in view.items() if k not in ("kind", "apiVersion")}
        text = json.dumps(view, separators=(",", ":"))
        per_version[res.group_version] = (meta["resourceVersion"], text)
        return text


class Handlers:
    def __init__(
        self, objects: Objects, hub: Hub, registry: Registry, state_dir: Path, node: NodeStreams
    ) -> None:
        self.objects = objects
        self.items = ItemCache(objects)
        self.hub = hub
        self.registry = registry
        self.state_dir = state_dir
        self.node = node
        self.address = "127.0.0.1:0"
        self.authorizer = Authorizer(objects.store)
        self.signer = TokenSigner(state_dir / "pki" / "sa.key")
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
                openapi.root(self.registry)
                if len(parts) == 2
                else openapi.document(self.registry, "/".join(parts[2:]))
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
        if isinstance(res.strategy, ReviewStrategy):
            if method != "POST" or name:
                raise errors.method_not_allowed()
            user: UserInfo = request[USER]
            return respond(res.strategy.answer(res, await read_body(request), user, self.authorizer), 201)
        write = WriteOptions(
            sub,
            dry_run=request.query.get("dryRun") == "All",
            strict=request.query.get("fieldValidation") == "Strict",
        )
        if not name:
            if method == "GET":
                if parse_bool(request, "watch"):
                    return await self.watch(request, route, want_table)
                return self.list(request, route, want_table)
            if method == "POST":
                if res.namespaced and route.namespace is None:
                    raise errors.method_not_allowed()
                created = self.objects.create(res, ns, await read_body(request), write)
                return respond_text(self.objects.text(res, created), 201)
            if method == "DELETE":
                return await self.delete_collection(request, route)
            raise errors.method_not_allowed()
        if sub == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            return await subresources.pod_log(self.objects, self.node, request, route)
        if sub in ("exec", "attach"):
            if method not in ("GET", "POST"):
                raise errors.method_not_allowed()
            serve = podstreams.pod_exec if sub == "exec" else podstreams.pod_attach
            return await serve(self.objects, self.node, request, route)
        if sub == "portforward":
            if method not in ("GET", "POST"):
                raise errors.method_not_allowed()
            return await portforward.pod_portforward(self.objects, request, route)
        if sub == "binding":
            if method != "POST":
                raise errors.method_not_allowed()
            return subresources.bind(self.objects, route, await read_body(request))
        if sub == "token":
            if method != "POST":
                raise errors.method_not_allowed()
            return respond(token_request(self.objects, self.signer, route, await read_body(request)), 201)
        if sub == "scale":
            return await subresources.scale(self.objects, request, route)
        if method == "GET":
            if parse_bool(request, "watch"):
                return await self.watch(request, route, want_table)
            obj = self.objects.get(res, ns, name)
            if not want_table:
                return respond_text(self.objects.text(res, obj))
            view = self.objects.view(res, obj)
            return respond(
                tables.table(
                    res,
                    [view],
                    view["metadata"]["resourceVersion"],
                    request.query.get("includeObject", "Metadata"),
                )
            )
        if method == "PUT":
            body = await read_body(request)
            if sub == "finalize":
                return respond(subresources.finalize(self.objects, res, name, body))
            existed = self.objects.store.get(store_key(res, ns, name)) is not None
            updated = self.objects.update(res, ns, name, body, write)
            return respond_text(self.objects.text(res, updated), 200 if existed else 201)  # Lease PUT creates
        if method == "PATCH":
            ctype = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            if ctype == APPLY_PATCH:
                if not request.query.get("fieldManager"):
                    raise errors.bad_request(
                        "PATCH requests with application/apply-patch+yaml require the fieldManager parameter"
                    )
                applied, created = self.objects.apply(res, ns, name, await request.read(), write)
                return respond_text(self.objects.text(res, applied), 201 if created else 200)
            patched = self.objects.patch(res, ns, name, await request.read(), ctype, write)
            return respond_text(self.objects.text(res, patched))
        if method == "DELETE" and not sub:
            opts = await self._delete_options(request)
            result = self.objects.delete(res, ns, name, opts)
            return respond(result.body, result.code)
        raise errors.method_not_allowed()

    # -- list ----------------------------------------------------------------------------------------------

    def list(self, request: web.Request, route: Route, want_table: bool) -> web.Response:
        res = route.res
        revision = self.objects.store.revision
        snapshot: int | None = None  # an older revision to list at: Exact, or the first page's of a continue
        rv_param = request.query.get("resourceVersion", "")
        if rv_param and rv_param != "0":
            try:
                wanted = int(rv_param)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {rv_param}") from None
            if request.query.get("resourceVersionMatch") == "Exact":
                if wanted > revision:
                    raise errors.ApiError(
                        504, "Timeout", "Too large resource version", {"retryAfterSeconds": 1}
                    )
                snapshot = revision = wanted
        token = request.query.get("continue", "")
        start = ""
        if token:
            snapshot, start = self._decode_token(token)
            revision = snapshot
        items = self.objects.list(
            res,
            route.namespace,
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
            revision=snapshot,
        )
        if start:
            items = [
                o for o in items if f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" > start
            ]
        limit = parse_int(request, "limit") or 0
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
        return respond_text(f'{head[:-1]},"items":[{body}]}}')

    def _decode_token(self, token: str) -> tuple[int, str]:
        """(revision of the first page, last key served) from a continue token; 410 once compacted."""
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
                "start a new list without the continue parameter, or use the continue token in this response "
                "to retrieve the remainder of the results. Continuing with the provided token results in an "
                "inconsistent list - objects that were created, modified, or deleted between the time the "
                "first chunk was returned and now may show up in the list."
            )
        return revision, start

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
        if not timeout:  # a negative one has expired already: the stream ends at once, as upstream's timer
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

        def encode(frame: Frame) -> bytes:
            view = self.objects.view(res, frame.obj)
            if frame.text is not None and view is frame.obj and not want_table:
                return f'{{"type":"{frame.type}","object":{frame.text}}}\n'.encode()
            if want_table:
                view = tables.table(res, [view], view["metadata"]["resourceVersion"], include_object)
            return json.dumps({"type": frame.type, "object": view}, separators=(",", ":")).encode() + b"\n"

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
                await response.write(b"".join(encode(f) for f in initial))
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
                # One pass of the loop later, the writes already under way have queued their frames too: a
                # burst of writes reaches each watcher in fewer, larger sends (each send wakes the client).
                await asyncio.sleep(0)
                chunk, ended = [encode(frame)], False
                while not watcher.queue.empty() and len(chunk) < MAX_CHUNK_FRAMES:
                    nxt = watcher.queue.get_nowait()
                    if nxt is None:  # closed by the hub (too slow): end after what was queued
                        ended = True
                        break
                    chunk.append(encode(nxt))
                await response.write(b"".join(chunk))
                if ended:
                    break
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
            {k: v for k, v in o.items() if k not in ("kind", "apiVersion")} if not res.strategy.custom else o
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
    return "watch" if request.query.get("watch", "").lower() in TRUE else "read"
