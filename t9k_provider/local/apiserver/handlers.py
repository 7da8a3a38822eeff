"""The API server's routing: a request to its verb and subresource (`listing`, `watch` and `deletion` serve
the verbs with behaviour of their own; get, create, update and patch are one call each into `Objects`)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from aiohttp import web

from t9k_provider.local.apiserver import (
    discovery,
    eviction,
    openapi,
    podstreams,
    portforward,
    subresources,
    tables,
)
from t9k_provider.local.apiserver.deletion import delete_collection, delete_options
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.authz import Authorizer, UserInfo
from t9k_provider.local.apiserver.hub import Hub
from t9k_provider.local.apiserver.listing import ItemCache, list_objects
from t9k_provider.local.apiserver.node import NodeStreams
from t9k_provider.local.apiserver.objects import Objects, WriteOptions, store_key
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.apiserver.strategies.accessreviews import ReviewStrategy
from t9k_provider.local.apiserver.tokenrequests import token_request
from t9k_provider.local.apiserver.tokens import TokenSigner
from t9k_provider.local.apiserver.watch import watch
from t9k_provider.local.apiserver.wire import (
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

log = logging.getLogger(__name__)
NAMESPACE_SUBRESOURCES = {"status", "finalize"}
#: Subresources that are no view of the object: streams, and actions with a body of their own.
STREAMED_OR_ACTIONS = {"log", "exec", "attach", "portforward", "binding", "eviction", "token", "scale"}
USER = "t9k-local.user"  # the request key the server's middleware keeps the authenticated user under


class Handlers:
    def __init__(
        self, objects: Objects, hub: Hub, registry: ServedResources, state_dir: Path, node: NodeStreams
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
        res = route.res
        if isinstance(res.strategy, ReviewStrategy):
            if request.method != "POST" or route.name:
                raise errors.method_not_allowed()
            user: UserInfo = request[USER]
            return respond(res.strategy.answer(res, await read_body(request), user, self.authorizer), 201)
        write = WriteOptions(
            route.subresource,
            dry_run=request.query.get("dryRun") == "All",
            strict=request.query.get("fieldValidation") == "Strict",
        )
        if not route.name:
            return await self._serve_collection(request, route, want_table, write)
        if route.subresource in STREAMED_OR_ACTIONS:
            return await self._serve_subresource(request, route)
        return await self._serve_object(request, route, want_table, write)

    async def _serve_collection(
        self, request: web.Request, route: Route, want_table: bool, write: WriteOptions
    ) -> web.StreamResponse:
        """LIST, WATCH, POST (create) and DELETE (deletecollection) of a collection."""
        method, res = request.method, route.res
        if method == "GET":
            if parse_bool(request, "watch"):
                return await watch(self.objects, self.hub, request, route, want_table)
            return list_objects(self.objects, self.items, request, route, want_table)
        if method == "POST":
            if res.namespaced and route.namespace is None:
                raise errors.method_not_allowed()
            created = self.objects.create(res, route.namespace or "", await read_body(request), write)
            return respond_text(self.objects.text(res, created), 201)
        if method == "DELETE":
            return await delete_collection(self.objects, request, route)
        raise errors.method_not_allowed()

    async def _serve_subresource(self, request: web.Request, route: Route) -> web.StreamResponse:
        """The subresources that are no view of the object: logs, exec, attach, port-forward, binding,
        eviction..."""
        method, sub = request.method, route.subresource
        allowed = {
            "log": ("GET",),
            "binding": ("POST",),
            "eviction": ("POST",),
            "token": ("POST",),
            "scale": (method,),
        }
        if method not in allowed.get(sub, ("GET", "POST")):
            raise errors.method_not_allowed()
        if sub == "log":
            return await subresources.pod_log(self.objects, self.node, request, route)
        if sub in ("exec", "attach"):
            serve = podstreams.pod_exec if sub == "exec" else podstreams.pod_attach
            return await serve(self.objects, self.node, request, route)
        if sub == "portforward":
            return await portforward.pod_portforward(self.objects, request, route)
        if sub == "binding":
            return subresources.bind(self.objects, route, await read_body(request))
        if sub == "eviction":
            return await eviction.pod_eviction(self.objects, request, route)
        if sub == "token":
            return respond(token_request(self.objects, self.signer, route, await read_body(request)), 201)
        return await subresources.scale(self.objects, request, route)

    async def _serve_object(
        self, request: web.Request, route: Route, want_table: bool, write: WriteOptions
    ) -> web.StreamResponse:
        """GET, PUT, PATCH and DELETE of one object (or its status, finalize)."""
        method, res, ns, name, sub = (
            request.method,
            route.res,
            route.namespace or "",
            route.name,
            route.subresource,
        )
        if method == "GET":
            if parse_bool(request, "watch"):
                return await watch(self.objects, self.hub, request, route, want_table)
            obj = self.objects.get(res, ns, name)
            if not want_table:
                return respond_text(self.objects.text(res, obj))
            view = self.objects.view(res, obj)
            include = request.query.get("includeObject", "Metadata")
            return respond(tables.table(res, [view], view["metadata"]["resourceVersion"], include))
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
            result = self.objects.delete(res, ns, name, await delete_options(request))
            return respond(result.body, result.code)
        raise errors.method_not_allowed()

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
