"""Shims forked by the kubelet's fork server are the shims a fresh interpreter would have been."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from t9k_provider.local.kubelet import poddir, runtime, shimfork
from t9k_provider.local.kubelet.poddir import AttemptFiles
from t9k_provider.local.kubelet.shim import ShimSpec
from t9k_provider.testing import wait_for

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def server() -> Iterator[runtime.ForkServer]:
    forks = runtime.ForkServer()
    try:
        yield forks
    finally:
        forks._stop()


def _files(tmp_path: Path, argv: list[str]) -> AttemptFiles:
    files = AttemptFiles(tmp_path / "pod" / "c", 0)
    files.directory.mkdir(parents=True)
    ShimSpec(argv=argv, env={"PATH": os.environ["PATH"]}, log_path=str(files.log)).dump(files.spec)
    return files


def _exited(pidfd: int, timeout: float) -> bool:
    return bool(select.select([pidfd], [], [], timeout)[0])


def _running(files: AttemptFiles) -> int:
    """Wait until the attempt's container runs; returns its shim's pid."""
    wait_for("the container's pid", lambda: poddir.read_json(files.pid).get("container"), 20)
    return poddir.read_json(files.pid)["shim"]


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")


def test_a_forked_shim_runs_its_container_under_the_shims_command_line(tmp_path: Path, server) -> None:
    files = _files(tmp_path, SLEEP)
    pidfd = server.launch(files)
    assert pidfd is not None
    try:
        shim_pid = _running(files)
        assert _cmdline(shim_pid) == shimfork.shim_argv(str(files.spec))
        assert runtime.shim_alive(files)  # what a restarted kubelet checks
        assert os.getsid(shim_pid) == shim_pid  # its own session: a signal to the kubelet's group misses it
        assert not _exited(pidfd, 0)
        assert runtime.signal_container(files, signal.SIGTERM)
        assert _exited(pidfd, 20)
    finally:
        os.close(pidfd)
    assert files.exit_code() == 128 + signal.SIGTERM
    assert not runtime.shim_alive(files)


def test_each_launch_gets_its_own_shim(tmp_path: Path, server) -> None:
    done = []
    for i in range(3):
        files = _files(tmp_path / str(i), [sys.executable, "-c", f"raise SystemExit({i + 3})"])
        pidfd = server.launch(files)
        assert pidfd is not None
        done.append((files, pidfd, i + 3))
    for files, pidfd, code in done:
        assert _exited(pidfd, 20)
        os.close(pidfd)
        assert files.exit_code() == code


def test_the_server_ends_with_its_kubelet_and_its_shims_go_on(tmp_path: Path, server) -> None:
    files = _files(tmp_path, SLEEP)
    pidfd = server.launch(files)
    assert pidfd is not None
    try:
        _running(files)
        proc = server._proc
        assert proc is not None
        server._sock.close()  # as the kubelet's end closes when it dies
        assert proc.wait(10) == 0
        assert runtime.shim_alive(files) and not _exited(pidfd, 0.2)
        assert runtime.signal_container(files, signal.SIGKILL)
        assert _exited(pidfd, 20)
    finally:
        os.close(pidfd)
    assert files.exit_code() == 128 + signal.SIGKILL


def test_a_dead_server_is_replaced_at_the_next_launch(tmp_path: Path, server) -> None:
    first = _files(tmp_path / "a", [sys.executable, "-c", "pass"])
    pidfd = server.launch(first)
    assert pidfd is not None and _exited(pidfd, 20)
    os.close(pidfd)
    old = server._proc
    assert old is not None
    old.kill()
    old.wait(10)
    second = _files(tmp_path / "b", [sys.executable, "-c", "pass"])
    pidfd = server.launch(second)
    assert pidfd is not None and _exited(pidfd, 20)
    os.close(pidfd)
    assert server._proc is not old
    assert second.exit_code() == 0


def test_a_shim_whose_command_line_does_not_fit_is_started_fresh(tmp_path: Path) -> None:
    """A server without room (its blanks left out) execs the fresh shim: same command line, same run."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    argv = shimfork.server_argv(theirs.fileno())[:-1]
    proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),))
    theirs.close()
    try:
        files = _files(tmp_path, SLEEP)
        ours.send(f"{files.spec}\0{files.shim_log}".encode())
        _, fds, _, _ = socket.recv_fds(ours, 16, 1)
        pidfd = fds[0]
        ours.send(shimfork.GO)
        try:
            shim_pid = _running(files)
            raw = Path(f"/proc/{shim_pid}/cmdline").read_bytes()
            assert raw == b"\0".join(a.encode() for a in shimfork.shim_argv(str(files.spec))) + b"\0"
            assert runtime.shim_alive(files)
            assert runtime.signal_container(files, signal.SIGTERM)
            assert _exited(pidfd, 20)
        finally:
            os.close(pidfd)
        assert files.exit_code() == 128 + signal.SIGTERM
    finally:
        ours.close()
        assert proc.wait(10) == 0


def test_a_shim_the_kubelet_never_acknowledged_starts_nothing(tmp_path: Path) -> None:
    """The kubelet died (or the request failed) between the fork and its go: the child exits having written
    nothing, and the pidfd the kubelet may hold reads as an attempt lost, never as a container run twice."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen(shimfork.server_argv(theirs.fileno()), pass_fds=(theirs.fileno(),))
    theirs.close()
    files = _files(tmp_path, [sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'w')"])
    ours.send(f"{files.spec}\0{files.shim_log}".encode())
    _, fds, _, _ = socket.recv_fds(ours, 16, 1)
    ours.close()  # as a kubelet that dies before its go
    try:
        assert _exited(fds[0], 20)
    finally:
        os.close(fds[0])
    assert proc.wait(10) == 0
    assert not files.pid.exists() and files.exit_code() is None and not (tmp_path / "ran").exists()
