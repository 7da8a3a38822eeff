"""`pods/exec` and `pods/attach`: a running container's standard streams over a WebSocket.

The API server and the kubelet share the state directory, so, as for `pods/log`, the server reads what the
kubelet's shim wrote about the container (its pid, spec and log, in the pod directory that
`t9k_provider.local.poddir` lays out). Exec starts the kubelet's exec helper
(`t9k_provider.local.kubelet.execute`) itself, with pipes, or a pseudo-terminal when `tty=true`; the
command is SIGKILLed when the client disconnects, whereas upstream it may outlive the connection. Attach
streams what the container writes from then on, until it exits; containers run without standard input
here, so attached input is discarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import signal
import struct
import subprocess
import termios
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from t9k_provider.local import logs
from t9k_provider.local.apiserver import errors, remotecommand
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.remotecommand import Channels, StreamOptions
from t9k_provider.local.apiserver.subresources import pod_container
from t9k_provider.local.apiserver.wire import Route
from t9k_provider.local.kubelet import execute
from t9k_provider.local.poddir import AttemptFiles

READ_SIZE = 64 * 1024
# After the command exits, output still buffered in the pipes is forwarded for at most this long (a
# background process that inherited stdout would otherwise hold the stream open forever).
DRAIN_SECONDS = 2.0


async def pod_exec(
    objects: Objects, state_dir: Path, request: web.Request, route: Route
) -> web.StreamResponse:
    opts = StreamOptions.parse(request, needs_command=True)
    container = _running(objects, state_dir, route, opts)
    return await _serve(request, opts, lambda channels: _Session(channels, opts).run(container))


async def pod_attach(
    objects: Objects, state_dir: Path, request: web.Request, route: Route
) -> web.StreamResponse:
    opts = StreamOptions.parse(request, needs_command=False)
    container = _running(objects, state_dir, route, opts)
    return await _serve(request, opts, lambda channels: _attach(channels, opts, container.files))


async def _serve(
    request: web.Request,
    opts: StreamOptions,
    session: Callable[[Channels], Awaitable[dict[str, Any] | None]],
) -> web.StreamResponse:
    """Accept the WebSocket, run the session, and end with its status (none if the client left)."""
    protocol = remotecommand.negotiate(request)
    offered = "Sec-WebSocket-Protocol" in request.headers
    ws = web.WebSocketResponse(protocols=(protocol.name,) if offered else (), autoping=True)
    await ws.prepare(request)
    channels = Channels(ws, protocol)
    try:
        await channels.announce(opts)
        status = await session(channels)
        if status is not None:
            await channels.send_status(status)
    except ConnectionResetError:
        pass  # the client went away
    finally:
        await ws.close()
    return ws


def _running(
    objects: Objects, state_dir: Path, route: Route, opts: StreamOptions
) -> execute.RunningContainer:
    """The container's live process; the API server's errors, then the kubelet's (`container not found`)."""
    pod = objects.get(route.res, route.namespace or "", route.name)
    container = pod_container(pod, opts.container)
    if not (pod.get("spec") or {}).get("nodeName"):
        raise errors.bad_request(f"pod {route.name} does not have a host assigned")
    status = pod.get("status") or {}
    statuses = [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]
    cstatus = next((s for s in statuses if s.get("name") == container), {})
    running = None
    if "running" in (cstatus.get("state") or {}):
        running = execute.locate(state_dir, pod, container, int(cstatus.get("restartCount") or 0))
    if running is None:
        raise errors.ApiError(500, "InternalError", f'container not found ("{container}")')
    return running


async def _attach(channels: Channels, opts: StreamOptions, files: AttemptFiles) -> dict[str, Any] | None:
    """Forward the container's new output until it exits; None if the client leaves first."""
    streams = {b"stdout": remotecommand.STDOUT if opts.stdout else None}
    streams[b"stderr"] = remotecommand.STDERR if opts.stderr else streams[b"stdout"] if opts.tty else None

    async def finished() -> bool:
        return files.finished

    async def forward() -> None:
        async for record in logs.follow_new_records(files.log, finished):
            channel = streams.get(record.stream)
            if channel is not None:
                await channels.send(channel, record.text if record.partial else record.text + b"\n")

    async def drain_client() -> None:
        while await channels.receive() is not None:
            pass  # input is discarded: containers here have no standard input

    output, client = asyncio.create_task(forward()), asyncio.create_task(drain_client())
    try:
        await asyncio.wait({output, client}, return_when=asyncio.FIRST_COMPLETED)
        if not output.done():
            return None
        output.result()  # re-raise a failed send
        return remotecommand.success_status()
    finally:
        for task in (output, client):
            task.cancel()
        await asyncio.gather(output, client, return_exceptions=True)


class _Stdio:
    """The helper's standard streams: pipes, or one pseudo-terminal, and the ends this process keeps."""

    def __init__(self, opts: StreamOptions) -> None:
        self.child: list[int] = []  # the helper's fds 0, 1, 2 (DEVNULL for a stream not asked for)
        self.stdin: int | None = None
        self.outputs: list[tuple[int, int]] = []  # (channel, fd to read)
        self.master: int | None = None  # the terminal's controlling side (tty=true)
        self.owned: set[int] = set()  # our ends, closed when the session ends
        self._child_ends: list[int] = []
        if opts.tty:
            master, slave = os.openpty()
            self.master = master
            self.stdin = master if opts.stdin else None
            self.outputs = [(remotecommand.STDOUT, master)] if opts.stdout else []
            self.child = [slave, slave, slave]
            self._keep(master, slave)
            return
        for wanted, channel in (
            (opts.stdin, None),
            (opts.stdout, remotecommand.STDOUT),
            (opts.stderr, remotecommand.STDERR),
        ):
            if not wanted:
                self.child.append(subprocess.DEVNULL)
                continue
            r, w = os.pipe()
            if channel is None:
                self.stdin = w
                self.child.append(r)
                self._keep(w, r)
            else:
                self.outputs.append((channel, r))
                self.child.append(w)
                self._keep(r, w)

    def _keep(self, ours: int, theirs: int) -> None:
        os.set_blocking(ours, False)
        self.owned.add(ours)
        self._child_ends.append(theirs)

    def started(self) -> None:
        """The helper has its copies: drop ours of its ends, or EOF would never come."""
        for fd in set(self._child_ends):
            os.close(fd)
        self._child_ends = []

    def close(self, fd: int) -> None:
        if fd in self.owned:
            self.owned.discard(fd)
            os.close(fd)

    def close_all(self) -> None:
        self.started()
        for fd in list(self.owned):
            self.close(fd)


class _Session:
    """One exec: the helper process, its stream pumps, and the client's messages."""

    def __init__(self, channels: Channels, opts: StreamOptions) -> None:
        self.channels = channels
        self.opts = opts
        self.stdin: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)  # backpressure to the client
        self.stdio = _Stdio(opts)

    async def run(self, container: execute.RunningContainer) -> dict[str, Any] | None:
        """Returns the final status, or None when the client left first."""
        error_r, error_w = os.pipe()
        self.stdio.owned.add(error_r)
        tasks: list[asyncio.Task[Any]] = []
        proc: asyncio.subprocess.Process | None = None
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *execute.helper_argv(container, error_w, self.opts.tty, self.opts.command),
                    stdin=self.stdio.child[0],
                    stdout=self.stdio.child[1],
                    stderr=self.stdio.child[2],
                    pass_fds=(error_w,),
                    start_new_session=True,
                )
            finally:
                os.close(error_w)
                self.stdio.started()
            start_error = (await _read_to_end(error_r)).decode(errors="replace")
            if start_error:
                await proc.wait()
                return remotecommand.internal_error_status(
                    f"error executing command in container: {start_error}"
                )
            pumps = [asyncio.create_task(self._pump(ch, fd)) for ch, fd in self.stdio.outputs]
            client = asyncio.create_task(self._serve_client())
            exited = asyncio.create_task(proc.wait())
            tasks = [*pumps, asyncio.create_task(self._feed_stdin()), client, exited]
            await asyncio.wait({exited, client}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                return None  # the client left: the command ends with the connection (below)
            if pumps:
                await asyncio.wait(pumps, timeout=DRAIN_SECONDS)
            code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
            if code == 0:
                return remotecommand.success_status()
            return remotecommand.exit_code_status(self.opts.command, code)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if proc is not None and proc.returncode is None:
                _kill_group(proc.pid)
                await proc.wait()
            self.stdio.close_all()

    async def _pump(self, channel: int, fd: int) -> None:
        while data := await _read(fd):
            await self.channels.send(channel, data)

    async def _feed_stdin(self) -> None:
        fd = self.stdio.stdin
        while (data := await self.stdin.get()) is not None:
            if fd is None:
                continue
            try:
                await _write_all(fd, data)
            except BrokenPipeError:
                fd = None  # the command closed its stdin; later input is dropped
        if fd is not None and self.stdio.master is None:
            self.stdio.close(fd)  # EOF for the command (a terminal's input stays open, as upstream)

    async def _serve_client(self) -> None:
        """Route the client's messages until it disconnects."""
        while (message := await self.channels.receive()) is not None:
            channel, data = message
            if channel == remotecommand.STDIN:
                await self.stdin.put(data)
            elif channel == remotecommand.RESIZE and self.stdio.master is not None:
                size = remotecommand.parse_resize(data)
                if size is not None:
                    winsize = struct.pack("HHHH", size[1], size[0], 0, 0)
                    fcntl.ioctl(self.stdio.master, termios.TIOCSWINSZ, winsize)
            elif (
                channel == remotecommand.CLOSE
                and self.channels.protocol.version >= 5
                and data[:1] == bytes([remotecommand.STDIN])
            ):
                await self.stdin.put(None)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _readable(fd: int, writable: bool = False) -> None:
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add, remove = (loop.add_writer, loop.remove_writer) if writable else (loop.add_reader, loop.remove_reader)
    add(fd, wake)
    try:
        await ready
    finally:
        remove(fd)


async def _read(fd: int) -> bytes:
    """The next chunk from a non-blocking fd; b"" at EOF (EIO: the other side of a pty closed)."""
    while True:
        try:
            return os.read(fd, READ_SIZE)
        except BlockingIOError:
            await _readable(fd)
        except OSError as exc:
            if exc.errno == errno.EIO:
                return b""
            raise


async def _read_to_end(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while chunk := await _read(fd):
        chunks.append(chunk)
    return b"".join(chunks)


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await _readable(fd, writable=True)
