"""The process "container runtime": starts shims and reads container state back from the state dir.

The files the shim writes are the source of truth (`<n>.spec.json` = attempt n was launched, `<n>.pid`
= running, `<n>.exit` = finished), so a restarted kubelet re-adopts running containers, picks up exit
codes written while it was down, and never launches attempt n twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from t9k_provider.local import logs
from t9k_provider.local.kubelet.shim import (
    ShimSpec,
    effective_signal,
    is_recorded_process,
    now_rfc3339,
    pid_path,
    spec_path,
    state_path,
)

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


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _attempt_numbers(container_dir: Path) -> list[int]:
    if not container_dir.is_dir():
        return []
    numbers = set()
    for entry in container_dir.iterdir():
        head, _, rest = entry.name.partition(".")
        if rest == "spec.json" and head.isdigit():
            numbers.add(int(head))
    return sorted(numbers)


def shim_alive(log_path: Path) -> bool:
    """Is a shim for this attempt still running? Checked by its command line, so a reused pid never fools
    us."""
    needle = str(spec_path(log_path)).encode()
    pid = _read_json(pid_path(log_path)).get("shim")
    candidates = [pid] if pid else [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for cand in candidates:
        try:
            cmdline = Path(f"/proc/{cand}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and b"kubelet.shim" in cmdline:
            return True
    return False


def read_attempt(container_dir: Path, n: int) -> Attempt:
    log_path = container_dir / f"{n}.log"
    state = _read_json(state_path(log_path))
    code = logs.read_exit_code(log_path)
    attempt = Attempt(
        n=n,
        running=code is None,
        exit_code=code,
        started_at=state.get("startedAt"),
        finished_at=state.get("finishedAt"),
        reason=state.get("reason"),
        message=state.get("message"),
        pid=state.get("pid"),
    )
    return attempt


def attempts(container_dir: Path) -> list[Attempt]:
    return [read_attempt(container_dir, n) for n in _attempt_numbers(container_dir)]


def reap_lost(container_dir: Path, attempt: Attempt) -> Attempt:
    """An attempt without exit file whose shim is gone (SIGKILLed with the machine...): record it as lost."""
    log_path = container_dir / f"{attempt.n}.log"
    if attempt.finished or shim_alive(log_path):
        return attempt
    # Re-check: the shim may have finished between our two reads.
    if logs.read_exit_code(log_path) is None:
        state = _read_json(state_path(log_path))
        state.update(
            finishedAt=now_rfc3339(),
            exitCode=UNKNOWN_EXIT_CODE,
            reason="ContainerStatusUnknown",
            message="The container could not be located when the pod was terminated",
        )
        state.setdefault("startedAt", state["finishedAt"])
        state_path(log_path).write_text(json.dumps(state))
        logs.write_exit_code(log_path, UNKNOWN_EXIT_CODE)
    return read_attempt(container_dir, attempt.n)


# Shims this process started: polled so that finished ones do not linger as zombies.
_children: list[subprocess.Popen[bytes]] = []
_children_lock = threading.Lock()  # launch() runs in worker threads


def reap_children() -> None:
    with _children_lock:
        _children[:] = [p for p in _children if p.poll() is None]


def launch(container_dir: Path, n: int, spec: ShimSpec) -> None:
    """Start attempt `n` through a shim in its own session (it outlives this process)."""
    container_dir.mkdir(parents=True, exist_ok=True)
    log_path = container_dir / f"{n}.log"
    spec.log_path = str(log_path)
    target = spec_path(log_path)
    tmp = target.with_name(target.name + ".tmp")
    spec.dump(tmp)
    os.replace(tmp, target)
    reap_children()
    with open(container_dir / "shim.log", "ab") as shim_log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "t9k_provider.local.kubelet.shim", str(target)],
            stdin=subprocess.DEVNULL,
            stdout=shim_log,
            stderr=shim_log,
            start_new_session=True,
            close_fds=True,
        )
    with _children_lock:
        _children.append(proc)


def signal_container(container_dir: Path, n: int, sig: int) -> bool:
    """Signal the main process of attempt `n`, only if it is still the process its shim started; returns
    whether it was.

    The pid file may name a process that is gone (its exit not yet recorded, or its shim killed) and a pid
    the kernel has since given to another process, e.g. a container just started. A pidfd pins the process
    whose start time is checked against the one the shim recorded, and is what the signal goes through.
    SIGKILL ends the main process; the shim then SIGKILLs the rest of the container (process group, private
    namespace), as it does whenever the main process ends.
    """
    ids = _read_json(pid_path(container_dir / f"{n}.log"))
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


def kill_all(pod_dir: Path) -> None:
    """SIGKILL every container process still running under a pod directory (pod gone or agents stopping)."""
    if not pod_dir.is_dir():
        return
    for container_dir in pod_dir.iterdir():
        if container_dir.name == "volumes" or not container_dir.is_dir():
            continue
        for attempt in attempts(container_dir):
            if not attempt.finished:
                signal_container(container_dir, attempt.n, signal.SIGKILL)
