"""The per-container shim, run as the real subprocess the kubelet starts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from t9k_provider.local.kubelet import logs
from t9k_provider.local.kubelet.poddir import AttemptFiles, ContainerDir, PodDir
from t9k_provider.local.kubelet.shim import (
    CLONE_NEWNS,
    ContainerNamespace,
    Mount,
    ShimSpec,
    process_start_time,
)
from t9k_provider.testing import wait_for
from tests.support.gates import sh_gate


def _start(tmp_path: Path, argv: list[str], **kwargs) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "0.log"
    spec = ShimSpec(
        argv=argv, env={"PATH": os.environ["PATH"], "GREETING": "hi"}, log_path=str(log), **kwargs
    )
    spec_file = tmp_path / "0.spec.json"
    spec.dump(spec_file)
    proc = subprocess.Popen(
        [sys.executable, "-m", "t9k_provider.local.kubelet.shim", str(spec_file)], start_new_session=True
    )
    return proc, log


def _text(log: Path) -> list[tuple[str, str]]:
    recs = [logs.LogRecord.parse(line) for line in log.read_bytes().splitlines()]
    return [(r.stream.decode(), r.text.decode()) for r in recs if r]


def test_exit_code_output_and_environment(tmp_path: Path) -> None:
    script = "import os,sys; print(os.environ['GREETING']); print('err', file=sys.stderr); sys.exit(3)"
    proc, log = _start(tmp_path, [sys.executable, "-c", script])
    assert proc.wait(timeout=20) == 3
    assert AttemptFiles.of_log(log).exit_code() == 3
    assert sorted(_text(log)) == [("stderr", "err"), ("stdout", "hi")]
    state = json.loads(AttemptFiles.of_log(log).state.read_text())
    assert state["exitCode"] == 3
    assert state["startedAt"] and state["finishedAt"]


def test_working_dir_is_created_and_used(tmp_path: Path) -> None:
    work = tmp_path / "w" / "d"
    proc, log = _start(tmp_path, ["pwd"], working_dir=str(work))
    assert proc.wait(timeout=20) == 0
    assert _text(log) == [("stdout", str(work))]


def test_missing_executable_is_a_start_error(tmp_path: Path) -> None:
    proc, log = _start(tmp_path, ["/nonexistent/binary"])
    assert proc.wait(timeout=20) == 128
    assert AttemptFiles.of_log(log).exit_code() == 128
    state = json.loads(AttemptFiles.of_log(log).state.read_text())
    assert state["reason"] == "StartError"
    assert "/nonexistent/binary" in state["message"]


def test_sigterm_is_forwarded_to_the_container(tmp_path: Path) -> None:
    script = (
        "import signal,sys,time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got term', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    proc, log = _start(tmp_path, [sys.executable, "-c", script])
    deadline = time.monotonic() + 10
    while ("stdout", "ready") not in (_text(log) if log.exists() else []):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 7
    assert ("stdout", "got term") in _text(log)


def test_sigkill_of_the_process_group_is_reported_as_137(tmp_path: Path) -> None:
    proc, log = _start(tmp_path, ["sh", "-c", "sleep 30 & sleep 30"])
    files = AttemptFiles.of_log(log)
    wait_for(f"{files.pid} to appear", files.pid.exists, 10, 0.05)
    container = json.loads(files.pid.read_text())["container"]
    os.killpg(container, signal.SIGKILL)
    assert proc.wait(timeout=10) == 137
    assert files.exit_code() == 137


def test_shim_survives_its_parent_and_still_records_the_exit(tmp_path: Path) -> None:
    # The shim runs in its own session: killing whoever started it must not matter.
    log = tmp_path / "0.log"
    go = tmp_path / "go"  # the container runs until its launcher is gone
    ShimSpec(
        argv=["sh", "-c", f"{sh_gate(go)}; echo done"],
        env={"PATH": os.environ["PATH"]},
        log_path=str(log),
    ).dump(tmp_path / "s.json")
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,sys,time; "
            "subprocess.Popen([sys.executable,'-m','t9k_provider.local.kubelet.shim',"
            f"{str(tmp_path / 's.json')!r}], start_new_session=True); time.sleep(30)",
        ]
    )
    files = AttemptFiles.of_log(log)
    wait_for(f"{files.pid} to appear", files.pid.exists, 10, 0.05)
    launcher.kill()
    launcher.wait(timeout=10)
    go.touch()
    wait_for(f"{files.exit} to appear", files.exit.exists, 10, 0.05)
    assert files.exit_code() == 0
    assert _text(log) == [("stdout", "done")]


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and bind mounts need root")
def test_namespaces_hostname_and_bind_mounts(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    volume.mkdir()
    (volume / "data.txt").write_text("payload")
    target = tmp_path / "mnt" / "here"
    proc, log = _start(
        tmp_path,
        ["sh", "-c", f"hostname; cat {target}/data.txt; echo"],
        hostname="pod-a",
        mounts=[Mount(source=str(volume), target=str(target), read_only=True)],
    )
    assert proc.wait(timeout=20) == 0
    assert _text(log) == [("stdout", "pod-a"), ("stdout", "payload")]
    assert not (target / "data.txt").exists()  # the bind mount was private to the container


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")
def test_isolated_container_has_its_own_pid_namespace(tmp_path: Path) -> None:
    """Its main process is PID 1 and /proc lists only the container's processes."""
    script = "echo $$; ls /proc | grep -c '^[0-9]'; cat /proc/1/comm"
    proc, log = _start(tmp_path, ["sh", "-c", script], hostname="pod-a")
    assert proc.wait(timeout=20) == 0
    pid, count, comm = (text for _, text in _text(log))
    assert (pid, comm) == ("1", "sh")
    assert int(count) <= 4  # sh, ls, grep (and cat's parent fork): nothing of the host


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")
@pytest.mark.parametrize("handler", [True, False])
def test_sigterm_ends_a_pid_1_with_or_without_a_handler(tmp_path: Path, handler: bool) -> None:
    """The kernel drops default-action signals to a namespace's init; the shim makes SIGTERM mean what it
    means for any process (the handler runs if there is one, else the container ends)."""
    install = "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7)); " if handler else ""
    script = f"import signal, sys, time; {install}print('ready', flush=True); time.sleep(60)"
    proc, log = _start(tmp_path, [sys.executable, "-c", script], hostname="pod-a")
    wait_for(f"{log} to appear", log.exists, 10, 0.05)
    deadline = time.monotonic() + 20
    while _text(log) != [("stdout", "ready")]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == (7 if handler else 137)


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for a reaper that never comes in a container)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")
@pytest.mark.parametrize(
    ("isolation", "output"), [("mounts", "detached"), ("mounts", "inherited"), ("hostname", "detached")]
)
def test_container_end_kills_daemons_that_left_its_process_group(
    tmp_path: Path, isolation: str, output: str
) -> None:
    """A daemon that called setsid (sshd without -D) still belongs to the container and ends with it, whether
    it closed its output (so the container's pipes reach EOF first) or still holds it."""
    stdio = ", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL" if output == "detached" else ""
    token = (
        f"daemon-{os.getpid()}-{isolation}-{output}"  # found by command line: pids differ in a PID namespace
    )
    sleeper = f"[{sys.executable!r}, '-c', 'import time; time.sleep(300)', {token!r}]"
    daemon = (
        f"import subprocess; subprocess.Popen({sleeper}, start_new_session=True{stdio}); print('started')"
    )
    options: dict = {"hostname": "pod-a"}
    if isolation == "mounts":
        volume = tmp_path / "vol"
        volume.mkdir()
        options = {"mounts": [Mount(source=str(volume), target=str(tmp_path / "mnt"))]}
    proc, log = _start(tmp_path, [sys.executable, "-c", daemon], **options)
    assert proc.wait(timeout=20) == 0
    assert _text(log) == [("stdout", "started")]
    try:
        deadline = time.monotonic() + 5
        while [pid for pid in _with_argument(token) if _running(pid)]:
            assert time.monotonic() < deadline, "the daemon outlived its container"
            time.sleep(0.05)
    finally:
        for pid in _with_argument(token):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _with_argument(token: str) -> list[int]:
    """Host pids of the processes with this command-line argument."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if token.encode() in Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry))
    return found


def test_attempt_whose_shim_vanished_is_recorded_as_unknown(tmp_path: Path) -> None:
    from t9k_provider.local.kubelet import runtime

    cdir = tmp_path / "c"
    cdir.mkdir()
    ShimSpec(argv=["true"], env={}, log_path=str(cdir / "0.log")).dump(cdir / "0.spec.json")
    (cdir / "0.state.json").write_text(json.dumps({"startedAt": "2026-01-01T00:00:00Z", "pid": 1}))
    (attempt,) = runtime.attempts(ContainerDir(cdir))
    assert attempt.running and not attempt.finished
    lost = runtime.reap_lost(ContainerDir(cdir).attempt(0), attempt)
    assert (lost.exit_code, lost.reason) == (137, "ContainerStatusUnknown")
    assert ContainerDir(cdir).attempt(0).exit_code() == 137


def test_attempt_whose_shim_never_started_is_forgotten(tmp_path: Path) -> None:
    """Only a spec (the kubelet died before the shim's go): no run to record, the attempt is removed."""
    from t9k_provider.local.kubelet import runtime

    container = ContainerDir(tmp_path / "c")
    files = container.attempt(0)
    files.directory.mkdir()
    ShimSpec(argv=["true"], env={}, log_path=str(files.log)).dump(files.spec)
    (attempt,) = runtime.attempts(container)
    assert runtime.reap_lost(files, attempt) is None
    assert runtime.attempts(container) == [] and list(files.directory.iterdir()) == []


def test_live_shim_is_recognised_by_its_command_line(tmp_path: Path) -> None:
    from t9k_provider.local.kubelet import runtime

    files = ContainerDir(tmp_path / "c").attempt(0)
    os.close(
        runtime.launch(files, ShimSpec(argv=["sleep", "5"], env={"PATH": os.environ["PATH"]}, log_path=""))
    )
    wait_for(f"{files.pid} to appear", files.pid.exists, 10, 0.05)
    assert runtime.shim_alive(files)
    assert runtime.signal_container(files, signal.SIGKILL)
    wait_for(f"{files.exit} to appear", files.exit.exists, 10, 0.05)
    assert runtime.read_attempt(files).exit_code == 137
    deadline = time.monotonic() + 5
    while runtime.shim_alive(files):
        assert time.monotonic() < deadline
        time.sleep(0.05)


async def test_the_end_of_a_launched_container_is_told_when_it_happens(tmp_path: Path) -> None:
    """The pod worker learns of a container's end from its shim's pidfd, not at its next tick: the callback
    comes once the shim has exited, so the exit code it recorded is there to read."""
    import asyncio

    from t9k_provider.local.kubelet import runtime

    files = ContainerDir(tmp_path / "c").attempt(0)
    ended = asyncio.Event()
    seen: list[int | None] = []

    def told() -> None:
        seen.append(runtime.read_attempt(files).exit_code)
        ended.set()

    spec = ShimSpec(argv=["sh", "-c", "exit 3"], env={"PATH": os.environ["PATH"]}, log_path="")
    runtime.on_exit(await asyncio.to_thread(runtime.launch, files, spec), told)
    await asyncio.wait_for(ended.wait(), 30)
    assert seen == [3]


def _in_new_mount_namespace() -> subprocess.Popen:
    """A process in a mount namespace of its own, once it is there."""
    script = f"import ctypes, time; ctypes.CDLL(None).unshare({CLONE_NEWNS}); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", script])
    own = os.stat("/proc/self/ns/mnt").st_ino
    deadline = time.monotonic() + 10
    while os.stat(f"/proc/{proc.pid}/ns/mnt").st_ino == own:
        assert time.monotonic() < deadline, "the process did not enter a new mount namespace"
        time.sleep(0.01)
    return proc


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")
def test_the_end_of_a_container_never_kills_one_that_got_its_namespace_number() -> None:
    """The kernel gives a freed namespace's inode number to the next new namespace at once: a container's
    namespace must stay its own until its shim's leftover kill is over, or that kill hits a container just
    started by another shim (seen as an exit 137 with an empty log)."""
    first = _in_new_mount_namespace()
    namespace = ContainerNamespace.open(first.pid)
    assert namespace is not None
    first.kill()
    first.wait(timeout=10)
    second = _in_new_mount_namespace()
    try:
        namespace.kill_all()
        with pytest.raises(subprocess.TimeoutExpired):
            second.wait(timeout=0.3)
    finally:
        namespace.close()
        second.kill()
        second.wait(timeout=10)


def test_a_stale_pid_file_never_signals_the_process_that_reused_the_pid(tmp_path: Path) -> None:
    """A container gone without a recorded exit leaves a pid file; its pid may since belong to another
    process, here one that leads its own process group (as every container does)."""
    from t9k_provider.local.kubelet import runtime

    gone = subprocess.Popen(["sleep", "30"])
    gone_start = process_start_time(gone.pid)
    gone.kill()
    gone.wait(timeout=10)
    time.sleep(0.05)  # start times count clock ticks: the next process starts in a later one
    unrelated = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        cdir = tmp_path / "pod" / "main"
        cdir.mkdir(parents=True)
        ShimSpec(argv=["sleep", "30"], env={}, log_path=str(cdir / "0.log")).dump(cdir / "0.spec.json")
        files = ContainerDir(cdir).attempt(0)
        files.pid.write_text(
            json.dumps({"shim": gone.pid, "container": unrelated.pid, "containerStart": gone_start})
        )
        assert not runtime.signal_container(files, signal.SIGTERM)
        assert not runtime.signal_container(files, signal.SIGKILL)
        runtime.kill_all(PodDir(tmp_path / "pod"))
        with pytest.raises(subprocess.TimeoutExpired):
            unrelated.wait(timeout=0.3)
    finally:
        unrelated.kill()
        unrelated.wait(timeout=10)
