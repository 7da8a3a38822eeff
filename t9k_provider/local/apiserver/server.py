"""The API server process object: store, registry, handlers, controllers, auth, boot objects."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from t9k_provider.local.apiserver.authn import Authenticator, impersonate
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.authz import forbidden, request_attributes
from t9k_provider.local.apiserver.handlers import USER, Handlers
from t9k_provider.local.apiserver.hub import Hub
from t9k_provider.local.apiserver.node import NodeStreams
from t9k_provider.local.apiserver.objects import DeleteOptions, Objects
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.apiserver.strategies import priorityclasses, rbac
from t9k_provider.local.apiserver.strategies.crds import CRD_GROUP, CRD_PLURAL
from t9k_provider.local.apiserver.strategies.endpoints import kubernetes_endpoints
from t9k_provider.local.apiserver.strategies.namespaces import BOOT_NAMESPACES, boot_namespace
from t9k_provider.local.apiserver.strategies.nodes import local_node, node_capacity
from t9k_provider.local.apiserver.strategies.services import kubernetes_service
from t9k_provider.local.apiserver.wire import error_response, respond
from t9k_provider.local.machinery.jsonvalues import json_copy
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.local.storage.store import Store

log = logging.getLogger(__name__)


class ControlLoop(Protocol):
    """The controllers that run beside the server, on its store (the wiring's `ServerControllers`)."""

    def reconcile(self) -> None:
        """One pass of every controller, now (boot: stored CRDs are established before serving)."""
        ...

    async def run(self) -> None:
        """Pass after pass, woken by the store's events, until cancelled."""
        ...


#: Builds the server's controllers from its objects, registry and the CA bundle it publishes.
ControllersFactory = Callable[[Objects, ServedResources, str], ControlLoop]
HEALTH_PATHS = {"/healthz", "/livez", "/readyz"}
HOST = "127.0.0.1"
IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)  # Linux; Python exposes the constant only from 3.12


class ApiServer:
    """Serves the Kubernetes API on 127.0.0.1 only; every request but health checks needs a bearer token (the
    admin's or a ServiceAccount's) and is authorized (``authn.py``, ``authz.py``)."""

    def __init__(
        self,
        state_dir: Path,
        token: str,
        ssl_context: ssl.SSLContext,
        node: NodeStreams,
        controllers: ControllersFactory,
        port: int = 0,
        nodes: Mapping[str, Mapping[str, str]] | None = None,
        pod_network_host: str | None = None,
        toleration_seconds: tuple[int, int] = (300, 300),
    ) -> None:
        """``node``: where logs, exec and attach reach the node's containers (the kubelet's streams);
        ``controllers``: builds the controllers that run beside the server on its store."""
        self.state_dir = state_dir
        #: the Nodes (name -> capacity), advertised afresh by every run
        self.nodes = {k: dict(v) for k, v in (nodes or {FIRST_NODE: node_capacity()}).items()}
        #: the host's address on the pods' bridge (netns pod network), served too: pods cannot reach 127.0.0.1
        self.pod_network_host = pod_network_host
        self.token = token
        self.port = port
        self.ssl_context = ssl_context
        self.store = Store(state_dir / "store.db")
        self.registry = ServedResources()
        pods = self.registry.lookup("", "v1", "pods")
        assert pods is not None
        pods.strategy.toleration_seconds = toleration_seconds  # type: ignore[attr-defined]
        self.objects = Objects(self.store, self.registry)
        self.hub = Hub(self.store)
        self.handlers = Handlers(self.objects, self.hub, self.registry, state_dir, node)
        self.controllers = controllers(self.objects, self.registry, self._root_ca())
        self.authenticator = Authenticator(self.store, token, self.handlers.signer)
        self.ready = False  # /readyz answers 503 until the owner says the boot work is done
        self._runner: web.AppRunner | None = None
        self._controller_task: asyncio.Task[None] | None = None

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in HEALTH_PATHS:
            if request.path == "/readyz" and not self.ready:
                return web.Response(text="not ready: registering CRDs", status=503, content_type="text/plain")
            return web.Response(text="ok", content_type="text/plain")
        user = self.authenticator.authenticate(request.headers.get("Authorization", ""))
        if user is None:
            return error_response(errors.unauthorized())
        try:
            user = impersonate(user, request, self.handlers.authorizer)
            attrs = request_attributes(request.method, request.path, request.query)
            if not self.handlers.authorizer.authorize(user, attrs)[0]:
                raise forbidden(user, attrs)
            request[USER] = user
            return await handler(request)
        except errors.ApiError as exc:
            return error_response(exc)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path_qs)
            return respond(errors.internal(f"Internal error occurred: {exc}").status(), 500)

    def _root_ca(self) -> str:
        """The CA bundle pods trust the server with (``kube-root-ca.crt``), as ``t9k-local`` keeps it."""
        ca = self.state_dir / "pki" / "ca.crt"
        return ca.read_text() if ca.exists() else ""

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
        if self.pod_network_host is not None:
            await self._listen_on_pod_network(self.pod_network_host)
        self.handlers.address = f"{HOST}:{self.port}"
        self.publish_address()
        self._controller_task = asyncio.create_task(self.controllers.run(), name="t9k-local-controllers")
        return self.port

    async def _listen_on_pod_network(self, host: str) -> None:
        """Listen on ``host`` at the same port; IP_FREEBIND binds before the kubelet's bridge has the
        address (the node agents start after the server)."""
        assert self._runner is not None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_IP, IP_FREEBIND, 1)
        try:
            sock.bind((host, self.port))
        except OSError as exc:  # the host's clients are served all the same; pods cannot reach the server
            sock.close()
            log.error("cannot listen on the pod network at %s:%d: %s", host, self.port, exc)
            self.pod_network_host = None
            return
        site = web.SockSite(self._runner, sock, shutdown_timeout=1.0, ssl_context=self.ssl_context)
        await site.start()

    @property
    def service_host(self) -> str:
        """Where pods reach the server: ``default/kubernetes``'s endpoint and KUBERNETES_SERVICE_HOST."""
        return self.pod_network_host or HOST

    async def stop(self) -> None:
        self.hub.close_all()
        if self._controller_task is not None:
            self._controller_task.cancel()
            await asyncio.gather(self._controller_task, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
        self.store.close()

    def boot(self) -> None:
        """Create the namespaces, the Nodes and the bootstrap RBAC policy every fresh cluster has (idempotent
        across restarts); the Nodes advertise this run's capacity, and a Node of an earlier run with more
        nodes (``t9k-local-node-<i>``) that this one does not have is deleted."""
        ns_res = self.registry.lookup("", "v1", "namespaces")
        node_res = self.registry.lookup("", "v1", "nodes")
        assert ns_res is not None and node_res is not None
        for name in BOOT_NAMESPACES:
            if self.store.get(("", "namespaces", "", name)) is None:
                self.objects.create(ns_res, "", boot_namespace(name))
        for name, capacity in self.nodes.items():
            current = self.store.get(("", "nodes", "", name))
            if current is None:
                self.objects.create(node_res, "", local_node(capacity, name))
            elif (current.get("status") or {}).get("capacity") != capacity:
                status = {**current.get("status", {}), "capacity": capacity, "allocatable": capacity}
                self.objects.write_status(node_res, current, json_copy(status))
        for stale in self.store.list("", "nodes"):
            name = stale["metadata"]["name"]
            if name.startswith(f"{FIRST_NODE}-") and name not in self.nodes:
                self.objects.delete(node_res, "", name, DeleteOptions())
        for res, docs in (
            (rbac.CLUSTER_ROLES, rbac.BOOTSTRAP_CLUSTER_ROLES),
            (rbac.CLUSTER_ROLE_BINDINGS, rbac.BOOTSTRAP_CLUSTER_ROLE_BINDINGS),
            (priorityclasses.RESOURCE, priorityclasses.system_classes()),
        ):
            for doc in docs:
                if self.store.get((res.group, res.plural, "", doc["metadata"]["name"])) is None:
                    self.objects.create(res, "", json_copy(doc))

    def publish_address(self) -> None:
        """Point ``default/kubernetes`` (Service and Endpoints) at the port this run listens on."""
        for res, obj in (
            (self.registry.lookup("", "v1", "services"), kubernetes_service(self.port)),
            (self.registry.lookup("", "v1", "endpoints"), kubernetes_endpoints(self.service_host, self.port)),
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

    def ensure(self, group: str, version: str, plural: str, doc: dict[str, Any]) -> None:
        """Create a cluster-scoped object once (a custom resource the cluster boots with: its CRD must be
        registered); one that exists, or was deleted by a user and so recreated only at the next start, is
        left as it is."""
        res = self.registry.lookup(group, version, plural)
        if res is not None and self.store.get((group, plural, "", doc["metadata"]["name"])) is None:
            self.objects.create(res, "", json_copy(doc))
