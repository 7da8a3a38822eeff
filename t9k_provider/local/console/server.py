"""The console's HTTP server, on the listening socket the cluster's server opened for it
(``address.listen``: 127.0.0.1, published in ``STATE/console.json``)."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

from aiohttp import web

from t9k_provider.kube.api import ApiError, KubeApi, api_client
from t9k_provider.local.console import gather, pages
from t9k_provider.local.console.address import HOST, JOB_PATH_TEMPLATE, TENSORBOARD_PATH_TEMPLATE

log = logging.getLogger(__name__)
KUBE: web.AppKey[KubeApi] = web.AppKey("kube", KubeApi)


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
        page = await gather.job_page(request.app[KUBE], rt, namespace, name)
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


def make_app(kube: KubeApi) -> web.Application:
    app = web.Application()
    app[KUBE] = kube
    app.router.add_get("/", _index)
    app.router.add_get(JOB_PATH_TEMPLATE, _job)
    app.router.add_get(TENSORBOARD_PATH_TEMPLATE, _tensorboard)
    app.router.add_get("/healthz", _healthz)
    return app


async def serve(kubeconfig: Path, listen_fd: int) -> None:
    """Serve until cancelled (``t9k-local console``, which ``run`` starts) on the listening socket
    ``listen_fd`` the server opened, as a client of the API server of ``kubeconfig``."""
    client = await api_client(kubeconfig)
    runner = web.AppRunner(make_app(KubeApi(client)), access_log=None)
    await runner.setup()
    try:
        sock = socket.socket(fileno=listen_fd)
        await web.SockSite(runner, sock).start()
        log.info("t9k-local console on http://%s:%d", HOST, sock.getsockname()[1])
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await client.close()
