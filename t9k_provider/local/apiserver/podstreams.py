"""`pods/exec` and `pods/attach`: a running container's standard streams over a WebSocket.

The server answers the request's errors itself (no such pod or container, not scheduled, not running) and
speaks the remote-command protocol to the client (`remotecommand`); the container's side is the node's
(`NodeStreams`), as upstream the kubelet's streaming server runs the command.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from t9k_provider.local.apiserver import remotecommand
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.node import NodeStreams
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.remotecommand import Channels
from t9k_provider.local.apiserver.subresources import pod_container
from t9k_provider.local.apiserver.wire import Route
from t9k_provider.local.machinery.streams import StreamOptions


async def pod_exec(
    objects: Objects, node: NodeStreams, request: web.Request, route: Route
) -> web.StreamResponse:
    opts = remotecommand.parse_options(request, needs_command=True)
    pod, container, restart = _running(objects, node, route, opts)

    async def session(channels: Channels) -> dict[str, Any] | None:
        await channels.ready()  # the command's output comes through its pipes: none is written before
        result = await node.exec(pod, container, restart, opts, channels)
        if result.start_error:
            return remotecommand.internal_error_status(
                f"error executing command in container: {result.start_error}"
            )
        if result.exit_code is None:
            return None  # the client left
        if result.exit_code == 0:
            return remotecommand.success_status()
        return remotecommand.exit_code_status(opts.command, result.exit_code)

    return await _serve(request, opts, session)


async def pod_attach(
    objects: Objects, node: NodeStreams, request: web.Request, route: Route
) -> web.StreamResponse:
    opts = remotecommand.parse_options(request, needs_command=False)
    pod, container, restart = _running(objects, node, route, opts)

    async def session(channels: Channels) -> dict[str, Any] | None:
        ended = await node.attach(pod, container, restart, opts, channels)
        return remotecommand.success_status() if ended else None

    return await _serve(request, opts, session)


async def _serve(
    request: web.Request,
    opts: StreamOptions,
    session: Callable[[Channels], Awaitable[dict[str, Any] | None]],
) -> web.StreamResponse:
    """Accept the WebSocket, run the session (which tells the client when its streams are set up:
    ``Channels.ready``), and end with its status (none if the client left)."""
    protocol = remotecommand.negotiate(request)
    offered = "Sec-WebSocket-Protocol" in request.headers
    ws = web.WebSocketResponse(protocols=(protocol.name,) if offered else (), autoping=True)
    await ws.prepare(request)
    channels = Channels(ws, protocol, opts)
    try:
        status = await session(channels)
        if status is not None:
            await channels.send_status(status)
    except ConnectionResetError:
        pass  # the client went away
    finally:
        await ws.close()
    return ws


def _running(
    objects: Objects, node: NodeStreams, route: Route, opts: StreamOptions
) -> tuple[dict[str, Any], str, int]:
    """The pod, its container and the run of it that is live; the API server's errors first, then the
    node's (`container not found`)."""
    pod = objects.get(route.res, route.namespace or "", route.name)
    container = pod_container(pod, opts.container)
    if not (pod.get("spec") or {}).get("nodeName"):
        raise errors.bad_request(f"pod {route.name} does not have a host assigned")
    status = pod.get("status") or {}
    statuses = [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]
    cstatus = next((s for s in statuses if s.get("name") == container), {})
    restart = int(cstatus.get("restartCount") or 0)
    if "running" not in (cstatus.get("state") or {}) or not node.is_running(pod, container, restart):
        raise errors.ApiError(500, "InternalError", f'container not found ("{container}")')
    return pod, container, restart
