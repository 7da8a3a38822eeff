"""Shims forked from a process that has already imported the shim, instead of a fresh interpreter each.

A fresh ``python -m t9k_provider.local.kubelet.shim SPEC`` took 80 ms from its launch to the container's
process running, most of it the interpreter's start and the shim's imports; forked, 21 ms (medians over a
dozen pods on one machine; docs/benchmarks.md, section 7, has the pod's whole start).
The kubelet starts this fork server once and asks it over a socket pair for each shim; the server forks,
and the child becomes what the fresh shim would be: its own session, stdin ``/dev/null``, stdout and stderr
the attempt's shim log, and the shim's command line, written over the server's (which keeps room for it),
so ``/proc/PID/cmdline`` names the spec as a restarted kubelet expects of a shim still at work
(`runtime.shim_alive`). Where it does not fit, the child execs the fresh shim instead. The server answers
with a pidfd of the child and ends when the kubelet's end of the socket closes (the kubelet stopped or
died); running shims go on, as they do when the kubelet itself dies.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import traceback
from pathlib import Path

from t9k_provider.local.kubelet import shim

SHIM_MODULE = "t9k_provider.local.kubelet.shim"
#: Room the server's own command line keeps for a shim's (a spec path is at most PATH_MAX).
ROOM = 4096
GO = b"g"


def shim_argv(spec: str) -> list[str]:
    """The command line of a shim for the spec file ``spec``, forked or fresh."""
    return [sys.executable, "-m", SHIM_MODULE, spec]


def server_argv(fd: int) -> list[str]:
    """The server's command line: its socket's fd, then ``ROOM`` blanks its children overwrite."""
    return [sys.executable, "-m", __name__, str(fd), " " * ROOM]


def set_cmdline(argv: list[str]) -> bool:
    """Write ``argv`` over this process's original command line, which ``/proc/PID/cmdline`` reads (the
    rest of it NULs, as setproctitle(3) does); False where it does not fit."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (proc(5): fields 48 and 49)
    raw = b"\0".join(a.encode() for a in argv) + b"\0"
    if not start or len(raw) > end - start:
        return False
    ctypes.memmove(start, raw.ljust(end - start, b"\0"), end - start)
    return True


def _become_shim(spec: str, shim_log: str) -> None:
    """In the forked child: the session, files and command line of a fresh shim; then run it and exit."""
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(shim_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        argv = shim_argv(spec)
        if not set_cmdline(argv):
            os.execv(argv[0], argv)
        code = shim.main([spec])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # as a fresh shim would: the traceback to its log, exit 1
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(sock: socket.socket) -> None:
    """Answer each request (``SPEC\\0SHIM_LOG``) with a pidfd of a forked shim, until the socket closes.

    The shim starts only once the kubelet has acknowledged its pidfd (``go``): a request the kubelet saw
    fail (the server died in between) started nothing, so it can ask again without two shims for one
    attempt. A shim left without its ``go`` exits having written nothing, which the kubelet, holding its
    pidfd, reads as an attempt lost."""
    signal.signal(signal.SIGCHLD, _reap)
    while request := sock.recv(8192):
        spec, shim_log = request.decode().split("\0")
        sys.stdout.flush()
        sys.stderr.flush()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            sock.close()
            os.close(go_w)
            if os.read(go_r, 1) != GO:
                os._exit(0)
            os.close(go_r)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the shim waits for its own child
            _become_shim(spec, shim_log)
        os.close(go_r)
        with open(go_w, "wb", buffering=0) as go:
            pidfd = os.pidfd_open(pid)  # before any go: the child cannot have ended and been reaped
            try:
                socket.send_fds(sock, [b"ok"], [pidfd])
            finally:
                os.close(pidfd)
            if sock.recv(16) == GO:
                go.write(GO)


def _reap(_signum: int = 0, _frame: object = None) -> None:
    """Reap the shims that have exited (their pidfds, held by the kubelet, stay readable)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(args: list[str]) -> int:
    """``python -m t9k_provider.local.kubelet.shimfork FD``: serve on the inherited socket ``FD``."""
    serve(socket.socket(fileno=int(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
