"""The console's HTTP server on 127.0.0.1; it publishes where it answers in ``STATE/console.json``
(``connection``).

``console.json`` holds ``url`` (the base URL), ``jobUrlTemplate`` (``<url>/jobs/{namespace}/{kind}/{name}``,
the format of ``[t9k] job_url_template``), ``tensorboardUrlTemplate``
(``<url>/tensorboards/{namespace}/{name}``, which redirects to where the TensorBoard serves once it is Ready,
and says why not before) and ``pid``. A restarted console keeps its port when it is free, so links already
handed out keep working.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path

from aiohttp import web
from kubernetes_asyncio.client import CoreV1Api

from t9k_provider.kube.api import ApiError, KubeApi, api_client
from t9k_provider.local.console import gather, pages
from t9k_provider.local.console.connection import publish, read_console

log = logging.getLogger(__name__)
HOST = "127.0.0.1"
JOB_PATH_TEMPLATE = "/jobs/{namespace}/{kind}/{name}"
TENSORBOARD_PATH_TEMPLATE = "/tensorboards/{namespace}/{name}"
KUBE: web.AppKey[KubeApi] = web.AppKey("kube", KubeApi)
CORE: web.AppKey[CoreV1Api] = web.AppKey("core", CoreV1Api)


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


async def _index(request: web.Request) -> web.Response:
    return _html(pages.index_page(await gather.list_jobs(request.app[KUBE])))


async def _job(request: web.Request) -> web.Response:
    namespace, kind, name = (request.match_info[k] for k in ("namespace", "kind", "name"))
    rt = gather.job_type(kind)
    if rt is None:
        return _html(pages.not_found_page(f"{kind} is not a T9k Job kind"), 404)
    try:
        page = await gather.job_page(request.app[KUBE], request.app[CORE], rt, namespace, name)
    except ApiError as exc:
        if exc.status != 404:
            raise
        return _html(pages.not_found_page(f"{rt.kind} {namespace}/{name} does not exist"), 404)
    return _html(pages.job_page(page))


async def _tensorboard(request: web.Request) -> web.Response:
    """The TensorBoard's own address (its ``status.url``) while it is Ready, so a link made before it was
    serving leads there; a page that says why it does not serve otherwise (503), or 404."""
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    tb = await gather.tensorboard(request.app[KUBE], namespace, name)
    if tb is None:
        return _html(pages.not_found_page(f"TensorBoard {namespace}/{name} does not exist"), 404)
    if tb.url:
        raise web.HTTPFound(tb.url)
    return _html(pages.tensorboard_page(namespace, tb), 503)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def make_app(kube: KubeApi, core: CoreV1Api) -> web.Application:
    app = web.Application()
    app[KUBE], app[CORE] = kube, core
    app.router.add_get("/", _index)
    app.router.add_get(JOB_PATH_TEMPLATE, _job)
    app.router.add_get(TENSORBOARD_PATH_TEMPLATE, _tensorboard)
    app.router.add_get("/healthz", _healthz)
    return app


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def pick_port(state_dir: Path) -> int:
    """The previous console's port if it is free, else any (0)."""
    previous = read_console(state_dir).get("url", "").rpartition(":")[2]
    return int(previous) if previous.isdigit() and _free(int(previous)) else 0


async def serve(kubeconfig: Path, state_dir: Path) -> None:
    """Serve until cancelled (``t9k-local console``, which ``run`` starts), as a client of the API server of
    ``kubeconfig``; ``console.json`` goes to the cluster's ``state_dir``."""
    client = await api_client(kubeconfig)
    runner = web.AppRunner(make_app(KubeApi(client), CoreV1Api(client)), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, HOST, pick_port(state_dir))
        await site.start()
        bound = runner.addresses[0][1]
        url = f"http://{HOST}:{bound}"
        info = {
            "url": url,
            "jobUrlTemplate": url + JOB_PATH_TEMPLATE,
            "tensorboardUrlTemplate": url + TENSORBOARD_PATH_TEMPLATE,
            "pid": os.getpid(),
        }
        publish(state_dir, info)
        log.info("t9k-local console on %s (pages: %s)", url, info["jobUrlTemplate"])
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await client.close()
