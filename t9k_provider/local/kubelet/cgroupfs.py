"""What a container's shim does to the cgroup the kubelet made for it (`cgroups`): join it, read whether the
OOM killer struck there, remove it. Apart from `cgroups` so that the shim, which starts for every container,
imports only this (docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path

REMOVE_TRIES = 20  # rmdir waits this many times 50 ms for the last processes of a cgroup to be reaped


def join(dirs: list[str]) -> None:
    """Move the calling process into the container's cgroup ("0" is the writer itself, whatever PID
    namespace it is in)."""
    for path in dirs:
        Path(path, "cgroup.procs").write_text("0")


def oom_kills(dirs: list[str]) -> int:
    """How many processes of the cgroup the OOM killer killed (v2 memory.events, v1 memory.oom_control)."""
    for path in dirs:
        for name in ("memory.events", "memory.oom_control"):
            try:
                text = Path(path, name).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
    return 0


def remove_tree(path: Path) -> None:
    """rmdir a cgroup and its children, SIGKILLing processes still in them; best effort (a cgroup that
    cannot go now is removed by the next cleanup)."""
    if not path.is_dir():
        return
    for child in path.iterdir():
        if child.is_dir():
            remove_tree(child)
    for _ in range(REMOVE_TRIES):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
        for pid in _procs(path):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _procs(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []
