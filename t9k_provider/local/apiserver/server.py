"""The API server process object: store, registry, handlers, controllers, auth, boot objects."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import ssl
from pathlib import Path
from typing import Any

from aiohttp import web

from t9k_provider.local.apiserver import errors
from t9k_provider.local.apiserver.controllers import Controllers
from t9k_provider.local.apiserver.handlers import Handlers
from t9k_provider.local.apiserver.jsonvalues import json_copy
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.registry import Registry
from t9k_provider.local.apiserver.strategies.crds import CRD_GROUP, CRD_PLURAL
from t9k_provider.local.apiserver.strategies.endpoints import kubernetes_endpoints
from t9k_provider.local.apiserver.strategies.namespaces import BOOT_NAMESPACES, boot_namespace
from t9k_provider.local.apiserver.strategies.nodes import NODE_NAME, local_node
from t9k_provider.local.apiserver.strategies.services import kubernetes_service
from t9k_provider.local.apiserver.watch import Hub
from t9k_provider.local.apiserver.wire import error_response, respond
from t9k_provider.local.store import Store

log = logging.getLogger(__name__)
HEALTH_PATHS = {"/healthz", "/livez", "/readyz"}
HOST = "127.0.0.1"


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class ApiServer:
    """Serves the Kubernetes API on 127.0.0.1 only; every request but health checks needs the bearer token."""

    def __init__(self, state_dir: Path, token: str, ssl_context: ssl.SSLContext, port: int = 0) -> None:
        self.state_dir = state_dir
        self.token = token
        self.port = port
        self.ssl_context = ssl_context
        self.store = Store(state_dir / "store.db")
        self.registry = Registry()
        self.objects = Objects(self.store, self.registry)
        self.hub = Hub(self.store)
        self.handlers = Handlers(self.objects, self.hub, self.registry, state_dir)
        self.controllers = Controllers(self.objects, self.registry)
        self.ready = False  # /readyz answers 503 until the owner says the boot work is done
        self._runner: web.AppRunner | None = None
        self._controller_task: asyncio.Task[None] | None = None

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in HEALTH_PATHS:
            if request.path == "/readyz" and not self.ready:
                return web.Response(text="not ready: registering CRDs", status=503, content_type="text/plain")
            return web.Response(text="ok", content_type="text/plain")
        header = request.headers.get("Authorization", "")
        supplied = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not hmac.compare_digest(supplied.encode(), self.token.encode()):
            return error_response(errors.unauthorized())
        try:
            return await handler(request)
        except errors.ApiError as exc:
            return error_response(exc)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path_qs)
            return respond(errors.internal(f"Internal error occurred: {exc}").status(), 500)

    async def start(self) -> int:
        """Boot objects, establish stored CRDs, then listen; returns the bound port."""
        self.boot()
        self.controllers.reconcile()
        app = web.Application(middlewares=[self._middleware], client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self.handlers.dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, self.port, shutdown_timeout=1.0, ssl_context=self.ssl_context)
        await site.start()
        server = site._server  # aiohttp exposes the bound sockets only there
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]
        self.handlers.address = f"{HOST}:{self.port}"
        self.publish_address()
        self._controller_task = asyncio.create_task(self.controllers.run(), name="t9k-local-controllers")
        return self.port

    async def stop(self) -> None:
        self.hub.close_all()
        if self._controller_task is not None:
            self._controller_task.cancel()
            await asyncio.gather(self._controller_task, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
        self.store.close()

    def boot(self) -> None:
        """Create the namespaces and the Node every fresh cluster has (idempotent across restarts)."""
        ns_res = self.registry.lookup("", "v1", "namespaces")
        node_res = self.registry.lookup("", "v1", "nodes")
        assert ns_res is not None and node_res is not None
        for name in BOOT_NAMESPACES:
            if self.store.get(("", "namespaces", "", name)) is None:
                self.objects.create(ns_res, "", boot_namespace(name))
        if self.store.get(("", "nodes", "", NODE_NAME)) is None:
            self.objects.create(node_res, "", local_node(os.cpu_count() or 1, _memory_bytes()))

    def publish_address(self) -> None:
        """Point ``default/kubernetes`` (Service and Endpoints) at the port this run listens on."""
        for res, obj in (
            (self.registry.lookup("", "v1", "services"), kubernetes_service(self.port)),
            (self.registry.lookup("", "v1", "endpoints"), kubernetes_endpoints(HOST, self.port)),
        ):
            assert res is not None
            current = self.store.get((res.group, res.plural, "default", "kubernetes"))
            if current is None:
                self.objects.create(res, "default", obj)
                continue
            new = json_copy(current)
            for key in ("spec", "subsets"):
                if key in obj:
                    new[key] = {**new[key], **obj[key]} if key == "spec" else obj[key]
            self.objects.write(res, current, new)

    def register_crds(self, documents: list[dict[str, Any]]) -> list[str]:
        """Create or update these CRDs (a bad one is logged and skipped); returns the registered names."""
        res = self.registry.lookup(CRD_GROUP, "v1", CRD_PLURAL)
        assert res is not None
        names = []
        for doc in documents:
            name = doc["metadata"]["name"]
            try:
                current = self.store.get((CRD_GROUP, CRD_PLURAL, "", name))
                if current is None:
                    self.objects.create(res, "", json_copy(doc))
                else:
                    new = json_copy(current)
                    new["spec"] = doc["spec"]
                    self.objects.write(res, current, new)
                names.append(name)
            except errors.ApiError as exc:
                log.error("CRD %s was rejected: %s", name, exc.message)
        self.controllers.reconcile()
        return names
