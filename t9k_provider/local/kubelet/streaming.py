"""The node's streaming endpoints (the kubelet server's ``/containerLogs``, ``/exec``, ``/attach``): what the
API server asks of the node a pod runs on (its ``NodeStreams``), served from the pod directories this
kubelet's shims write.

The API server runs in another process than the node agents but on the same machine and state directory, so
the wiring hands it one of these, in its own process: the server reaches the node only through this
interface, and a kubelet server over HTTP would not change the server. Exec starts the kubelet's exec helper
(`execute`) with pipes, or a pseudo-terminal when ``tty`` is set; the command is SIGKILLed when the client
disconnects, whereas upstream it may outlive the connection. Attach streams what the container writes from
then on, until it exits; containers run without standard input here, so attached input is discarded.
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
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from t9k_provider.local.kubelet import execute, logs
from t9k_provider.local.kubelet.poddir import AttemptFiles, PodDir
from t9k_provider.local.machinery.nodes import FIRST_NODE, node_root
from t9k_provider.local.machinery.streams import (
    STDERR,
    STDOUT,
    ExecResult,
    StreamClient,
    StreamOptions,
)

READ_SIZE = 64 * 1024
# After the command exits, output still buffered in the pipes is forwarded for at most this long (a
# background process that inherited stdout would otherwise hold the stream open forever).
DRAIN_SECONDS = 2.0


class ContainerStreams:
    """The streaming endpoints of the cluster's nodes: a pod's are its node's (``spec.nodeName``), whose pods
    live under that node's root in the cluster's ``state_dir`` (`nodes.node_root`)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)

    def _root(self, pod: dict[str, Any]) -> Path:
        return node_root(self.state_dir, (pod.get("spec") or {}).get("nodeName") or FIRST_NODE)

    def is_running(self, pod: dict[str, Any], container: str, restart_count: int) -> bool:
        return execute.locate(self._root(pod), pod, container, restart_count) is not None

    async def exec(
        self,
        pod: dict[str, Any],
        container: str,
        restart_count: int,
        opts: StreamOptions,
        client: StreamClient,
    ) -> ExecResult:
        running = execute.locate(self._root(pod), pod, container, restart_count)
        if running is None:
            return ExecResult(start_error=f'container not found ("{container}")')
        return await _Session(client, opts).run(running)

    async def attach(
        self,
        pod: dict[str, Any],
        container: str,
        restart_count: int,
        opts: StreamOptions,
        client: StreamClient,
    ) -> bool:
        running = execute.locate(self._root(pod), pod, container, restart_count)
        if running is None:
            await client.ready()
            return True  # it ended before the stream began: nothing more to forward
        return await _attach(client, opts, running.files)

    def container_log(
        self,
        pod: dict[str, Any],
        container: str,
        restart_count: int,
        *,
        follow: bool,
        timestamps: bool,
        tail_lines: int | None,
        since_time: datetime | None,
        limit_bytes: int | None,
        pod_gone: Callable[[], Awaitable[bool]],
    ) -> AsyncIterator[bytes]:
        files = PodDir.of(self._root(pod), pod).container(container).attempt(restart_count)

        async def finished() -> bool:
            return await pod_gone() or files.finished

        return logs.read_log(
            files.log,
            follow=follow,
            timestamps=timestamps,
            tail_lines=tail_lines,
            since_time=since_time,
            limit_bytes=limit_bytes,
            finished=finished,
        )


async def _attach(client: StreamClient, opts: StreamOptions, files: AttemptFiles) -> bool:
    """Forward the container's new output until it exits (True), or until the client leaves (False)."""
    streams = {b"stdout": STDOUT if opts.stdout else None}
    streams[b"stderr"] = STDERR if opts.stderr else streams[b"stdout"] if opts.tty else None

    async def finished() -> bool:
        return files.finished

    async def forward() -> None:
        async for record in logs.follow_new_records(files.log, finished, started=client.ready):
            stream = streams.get(record.stream)
            if stream is not None:
                await client.send(stream, record.text if record.partial else record.text + b"\n")

    async def drain_client() -> None:
        while await client.receive() is not None:
            pass  # input is discarded: containers here have no standard input

    output, draining = asyncio.create_task(forward()), asyncio.create_task(drain_client())
    try:
        await asyncio.wait({output, draining}, return_when=asyncio.FIRST_COMPLETED)
        if not output.done():
            return False
        output.result()  # re-raise a failed send
        return True
    finally:
        for task in (output, draining):
            task.cancel()
        await asyncio.gather(output, draining, return_exceptions=True)


class _Stdio:
    """The helper's standard streams: pipes, or one pseudo-terminal, and the ends this process keeps."""

    def __init__(self, opts: StreamOptions) -> None:
        self.child: list[int] = []  # the helper's fds 0, 1, 2 (DEVNULL for a stream not asked for)
        self.stdin: int | None = None
        self.outputs: list[tuple[str, int]] = []  # (stream, fd to read)
        self.master: int | None = None  # the terminal's controlling side (tty=true)
        self.owned: set[int] = set()  # our ends, closed when the session ends
        self._child_ends: list[int] = []
        if opts.tty:
            master, slave = os.openpty()
            self.master = master
            self.stdin = master if opts.stdin else None
            self.outputs = [(STDOUT, master)] if opts.stdout else []
            self.child = [slave, slave, slave]
            self._keep(master, slave)
            return
        for wanted, channel in ((opts.stdin, None), (opts.stdout, STDOUT), (opts.stderr, STDERR)):
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

    def __init__(self, client: StreamClient, opts: StreamOptions) -> None:
        self.client = client
        self.opts = opts
        self.stdin: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)  # backpressure to the client
        self.stdio = _Stdio(opts)

    async def run(self, container: execute.RunningContainer) -> ExecResult:
        """How the command ended, or that the client left first."""
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
                return ExecResult(start_error=start_error)
            pumps = [asyncio.create_task(self._pump(ch, fd)) for ch, fd in self.stdio.outputs]
            client = asyncio.create_task(self._serve_client())
            exited = asyncio.create_task(proc.wait())
            tasks = [*pumps, asyncio.create_task(self._feed_stdin()), client, exited]
            await asyncio.wait({exited, client}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                return ExecResult()  # the client left: the command ends with the connection (below)
            if pumps:
                await asyncio.wait(pumps, timeout=DRAIN_SECONDS)
            return ExecResult(exit_code=proc.returncode if proc.returncode >= 0 else 128 - proc.returncode)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if proc is not None and proc.returncode is None:
                _kill_group(proc.pid)
                await proc.wait()
            self.stdio.close_all()

    async def _pump(self, stream: str, fd: int) -> None:
        while data := await _read(fd):
            await self.client.send(stream, data)

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
        while (message := await self.client.receive()) is not None:
            if message.stdin is not None:
                await self.stdin.put(message.stdin)
            elif message.resize is not None and self.stdio.master is not None:
                columns, rows = message.resize
                fcntl.ioctl(self.stdio.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
            elif message.stdin_closed:
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
