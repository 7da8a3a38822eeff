"""A pod waits at a gate until the test opens it (creates a file), so the test sees a state before the pod
moves on, however late the pod started or however loaded the machine. Pods are host processes: they see the
test's files. A gate never opened lets the pod go after ``seconds``, so a failed test leaves nothing running.
"""

from __future__ import annotations

from pathlib import Path


def py_gate(path: Path, seconds: int = 60) -> str:
    """Python lines that wait for ``path`` (they import what they use)."""
    return (
        f"import os as _os, time as _time\n_until = _time.time() + {seconds}\n"
        f"while not _os.path.exists({str(path)!r}) and _time.time() < _until:\n    _time.sleep(0.1)\n"
    )


def sh_gate(path: Path, seconds: int = 60) -> str:
    """A shell command that waits for ``path``."""
    return f"timeout {seconds} sh -c 'until test -e {path}; do sleep 0.1; done'"
