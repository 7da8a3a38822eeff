"""The process "container runtime": starts shims and reads container state back from the pod directory.

The files the shim writes are the source of truth (a spec file = the attempt was launched, a pid file =
running, an exit file = finished; see `poddir`), so a restarted kubelet re-adopts running
containers, picks up exit codes written while it was down, and never launches an attempt twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.kubelet import poddir, shimfork
from t9k_provider.local.kubelet.poddir import AttemptFiles, ContainerDir, PodDir
from t9k_provider.local.kubelet.shim import ShimSpec, effective_signal, is_recorded_process

# Exit code Kubernetes reports when a container vanished without a recorded exit (ContainerStatusUnknown).
UNKNOWN_EXIT_CODE = 137


@dataclass
class Attempt:
    """One run of a container: restart count `n` and what the files say about it."""

    n: int
    running: bool
    exit_code: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    reason: str | None = None
    message: str | None = None
    pid: int | None = None

    @property
    def finished(self) -> bool:
        return self.exit_code is not None


def container_id(pod_uid: str, container: str, n: int) -> str:
    digest = hashlib.sha256(f"{pod_uid}/{container}/{n}".encode()).hexdigest()
    return f"t9k-local://{digest}"


def shim_alive(files: AttemptFiles) -> bool:
    """Is a shim for this attempt still running? Checked by its command line, so a reused pid never fools
    us."""
    needle = str(files.spec).encode()
    pid = poddir.read_json(files.pid).get("shim")
    candidates = [pid] if pid else [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for cand in candidates:
        try:
            cmdline = Path(f"/proc/{cand}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and b"kubelet.shim" in cmdline:
            return True
    return False


def read_attempt(files: AttemptFiles) -> Attempt:
    state = poddir.read_json(files.state)
    code = files.exit_code()
    return Attempt(
        n=files.n,
        running=code is None,
        exit_code=code,
        started_at=state.get("startedAt"),
        finished_at=state.get("finishedAt"),
        reason=state.get("reason"),
        message=state.get("message"),
        pid=state.get("pid"),
    )


def attempts(container: ContainerDir) -> list[Attempt]:
    return [read_attempt(files) for files in container.attempts()]


def reap_lost(files: AttemptFiles, attempt: Attempt) -> Attempt | None:
    """An attempt without exit file whose shim is gone: recorded as lost where its container started
    (SIGKILLed with the machine...); removed, and None, where it never did (the kubelet died between the
    attempt's spec and the shim's go). Such a container was only created, and the kubelet starts it again
    whatever the restart policy, as upstream's ``ShouldContainerBeRestarted`` does: a Never pod must not
    fail for a run that never was."""
    if attempt.finished or shim_alive(files):
        return attempt
    if not files.started:
        files.remove()
        return None
    # Re-check: the shim may have finished between our two reads.
    if files.exit_code() is None:
        state = poddir.read_json(files.state)
        state.update(
            finishedAt=now_rfc3339(),
            exitCode=UNKNOWN_EXIT_CODE,
            reason="ContainerStatusUnknown",
            message="The container could not be located when the pod was terminated",
        )
        state.setdefault("startedAt", state["finishedAt"])
        poddir.write_json(files.state, state)
        files.write_exit_code(UNKNOWN_EXIT_CODE)
    return read_attempt(files)


# Shims this process started itself (where the fork server could not): polled so that finished ones do not
# linger as zombies.
_children: list[subprocess.Popen[bytes]] = []
_children_lock = threading.Lock()  # launch() runs in worker threads


def reap_children() -> None:
    with _children_lock:
        _children[:] = [p for p in _children if p.poll() is None]


class ForkServer:
    """This kubelet's `shimfork` server: started at the first launch, and again after it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def launch(self, files: AttemptFiles) -> int | None:
        """A pidfd of a shim forked for ``files``; None when the server cannot be reached or started."""
        with self._lock:
            for _ in range(2):  # a server that died is replaced once: no shim starts without our go
                try:
                    sock = self._sock or self._start()
                    sock.send(f"{files.spec}\0{files.shim_log}".encode())
                    _, fds, _, _ = socket.recv_fds(sock, 16, 1)
                except OSError:
                    fds = []
                if fds:
                    with contextlib.suppress(OSError):  # no go: the shim exits, its attempt is lost
                        sock.send(shimfork.GO)
                    return fds[0]
                self._stop()
            return None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._proc = subprocess.Popen(
                shimfork.server_argv(theirs.fileno()),
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
        ours.settimeout(30)
        self._sock = ours
        return ours

    def _stop(self) -> None:
        """Close our end (the server ends on it) and reap the server."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
            self._proc = None


_fork_server = ForkServer()


def launch(files: AttemptFiles, spec: ShimSpec) -> int:
    """Start the attempt through a shim in its own session (it outlives this process); returns a pidfd of
    the shim, readable once it has exited (`on_exit`), which is right after it recorded the exit code. The
    shim is forked by the fork server (`shimfork`), or started fresh where that fails."""
    files.directory.mkdir(parents=True, exist_ok=True)
    spec.log_path = str(files.log)
    spec.dump(files.spec)
    if (pidfd := _fork_server.launch(files)) is not None:
        return pidfd
    reap_children()
    with open(files.shim_log, "ab") as shim_log:
        proc = subprocess.Popen(
            shimfork.shim_argv(str(files.spec)),
            stdin=subprocess.DEVNULL,
            stdout=shim_log,
            stderr=shim_log,
            start_new_session=True,
            close_fds=True,
        )
    exited = os.pidfd_open(proc.pid)  # before it is appended: nothing can have reaped it (its pid is its own)
    with _children_lock:
        _children.append(proc)
    return exited


def on_exit(pidfd: int, callback: Callable[[], None]) -> None:
    """Call ``callback`` on the running event loop once the process of ``pidfd`` has exited (and close the
    pidfd): a container's end is seen when it happens, not at the pod worker's next tick."""
    loop = asyncio.get_running_loop()

    def exited() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        callback()

    loop.add_reader(pidfd, exited)


def signal_container(files: AttemptFiles, sig: int) -> bool:
    """Signal the attempt's main process, only if it is still the process its shim started; returns whether
    it was.

    The pid file may name a process that is gone (its exit not yet recorded, or its shim killed) and a pid
    the kernel has since given to another process, e.g. a container just started. A pidfd pins the process
    whose start time is checked against the one the shim recorded, and is what the signal goes through.
    SIGKILL ends the main process; the shim then SIGKILLs the rest of the container (process group, private
    namespace), as it does whenever the main process ends.
    """
    ids = poddir.read_json(files.pid)
    pid, started = ids.get("container"), ids.get("containerStart")
    if not pid or started is None:
        return False
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        # Read after pinning: a start time that matches was read from the pinned process itself.
        if not is_recorded_process(pid, started):
            return False
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, effective_signal(pid, sig))
            return True
        return False
    finally:
        os.close(pidfd)


def running(pod: PodDir) -> list[AttemptFiles]:
    """The attempts under a pod directory without a recorded exit."""
    return [files for c in pod.containers() for files in c.attempts() if not files.finished]


def kill_all(pod: PodDir) -> None:
    """SIGKILL every container process still running under a pod directory (pod gone or agents stopping)."""
    for files in running(pod):
        signal_container(files, signal.SIGKILL)
