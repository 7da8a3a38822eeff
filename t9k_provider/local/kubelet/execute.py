"""Run a command inside a running container (`pods/exec`): the kubelet side of exec.

A container is a process in the pod's network namespace plus its own UTS, mount and PID namespaces (see
the shim). Exec joins the namespaces of the container's main process, takes the container's environment
from the shim spec, and runs the command there (in a child, which alone enters the PID namespace; this
process waits and ends the same way), so the command sees the container's hostname, `/etc/hosts`, volumes,
pod IP and processes, and only those. The API server starts

    python -m t9k_provider.local.kubelet.execute SPEC.json PID ERROR_FD CWD [--tty] -- COMMAND...

with the streams already connected. If the command cannot be started, the reason is written to ERROR_FD (a
close-on-exec pipe: the API server reads EOF and nothing else when the exec succeeded).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import sys
import termios
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from t9k_provider.local.kubelet import cgroupfs, poddir
from t9k_provider.local.kubelet.identity import Identity, apply_identity
from t9k_provider.local.kubelet.poddir import AttemptFiles, PodDir
from t9k_provider.local.kubelet.shim import is_recorded_process, libc_call, start_error_message

PR_SET_PDEATHSIG = 1
# Exit code when the helper could not start the command (the API server reports the written reason).
START_FAILED = 127
# mnt last: after it, paths resolve in the container's view; pid applies to children only (we fork).
NAMESPACES = ("net", "uts", "pid", "mnt")


@dataclass(frozen=True)
class RunningContainer:
    """What exec needs to know about a running container attempt, read from its files."""

    files: AttemptFiles
    pid: int  # the container's main process
    cwd: str


def locate(
    state_dir: Path, pod: dict[str, Any], container: str, restart_count: int
) -> RunningContainer | None:
    """Attempt `restart_count` of `container` if it runs now (its shim wrote the pid, and no exit code)."""
    files = PodDir.of(state_dir, pod).container(container).attempt(restart_count)
    if files.finished:
        return None
    pids = poddir.read_json(files.pid)
    pid = pids.get("container")
    if not is_recorded_process(pid, pids.get("containerStart")):
        return None
    cwd = poddir.read_json(files.spec).get("working_dir")
    if not cwd:  # the shim never changes directory: its cwd is where the container started
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{pids.get('shim')}/cwd")
    return RunningContainer(files, pid, cwd or "/")


def helper_argv(container: RunningContainer, error_fd: int, tty: bool, command: list[str]) -> list[str]:
    """The command line that runs `command` in `container`, reporting start failures on `error_fd`."""
    return [
        sys.executable,
        "-m",
        "t9k_provider.local.kubelet.execute",
        str(container.files.spec),
        str(container.pid),
        str(error_fd),
        container.cwd,
        *(["--tty"] if tty else []),
        "--",
        *command,
    ]


def _join_namespaces(pid: int) -> set[str]:
    """Enter the container's namespaces; returns the kinds joined."""
    libc = ctypes.CDLL(None, use_errno=True)
    fds = {}
    for kind in NAMESPACES:
        target = f"/proc/{pid}/ns/{kind}"
        if os.readlink(target) != os.readlink(f"/proc/self/ns/{kind}"):
            fds[kind] = os.open(target, os.O_RDONLY)
    for fd in fds.values():
        libc_call(libc, "setns", fd, 0)
        os.close(fd)
    return set(fds)


def run(spec_file: Path, pid: int, cwd: str, tty: bool, command: list[str], error_fd: int) -> str:
    """Enter the container and run `command` there; returns why that failed (else never returns)."""
    try:
        spec = json.loads(spec_file.read_text())
        env = dict(spec["env"])
        cgroupfs.join(spec.get("cgroups") or [])  # exec'd processes count against the container's limits
        joined = _join_namespaces(pid)
        os.chdir(cwd)
        _become(Identity.load(spec.get("identity")))
        if "pid" in joined:  # only a child is inside the container's PID namespace
            if os.fork() != 0:
                os.close(error_fd)  # the child's copy tells the API server whether the exec worked
                _exit_like(os.wait()[1])
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # ends with us
            if tty:
                os.setsid()  # a session and process group the shell can see from inside the namespace
        if tty:
            env.setdefault("TERM", "xterm")  # as container runtimes do for a terminal session
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # we lead a new session: the pty becomes its terminal
    except (OSError, ValueError, KeyError) as exc:
        return f"unable to start container process: {exc}"
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        return start_error_message(command[0], exc)


def _become(identity: Identity | None) -> None:
    """Run as the container's processes do (its mount namespace, joined above, already exposes what they
    need)."""
    if identity is not None:
        identity.exposed = []
        apply_identity(identity)


def _exit_like(wait_status: int) -> NoReturn:
    """End this process the way the command ended (same exit code, or the same signal)."""
    code = os.waitstatus_to_exitcode(wait_status)
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code  # only if that signal did not end us
    os._exit(code)


def main(argv: list[str]) -> int:
    if "--" not in argv or len(argv) < argv.index("--") + 2 or argv.index("--") < 4:
        print("usage: python -m t9k_provider.local.kubelet.execute SPEC PID ERROR_FD CWD [--tty] -- CMD...")
        return 2
    split = argv.index("--")
    spec_file, pid, error_fd, cwd = argv[:4]
    tty = "--tty" in argv[4:split]
    command = argv[split + 1 :]
    fd = int(error_fd)
    os.set_inheritable(fd, False)  # closed by a successful exec: the API server then reads EOF
    os.write(fd, run(Path(spec_file), int(pid), cwd, tty, command, fd).encode())
    return START_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
