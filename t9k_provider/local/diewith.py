"""Children that die with the server: the kernel SIGKILLs them when it dies (Linux ``PR_SET_PDEATHSIG``), as
in-process parts would die with it, so a restarted server never finds the last one's children still at work
(two kubelets, or two T9k controllers without leader election, must never run at once).

The internal `t9k-local` commands call `die_with` first thing; a program of its own (the T9k controller) is
started as ``python -m t9k_provider.local.diewith SERVER_PID PROGRAM [ARG...]``, which asks for the signal
and then execs the program (the request survives ``execve``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with(server_pid: int) -> None:
    """Linux: the kernel SIGKILLs this process when the server dies. Elsewhere: nothing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != server_pid:  # it died before prctl took effect
        os._exit(1)


def command(server_pid: int, argv: list[str]) -> list[str]:
    """``argv`` run so that it dies with the server ``server_pid``."""
    return [sys.executable, "-m", "t9k_provider.local.diewith", str(server_pid), *argv]


def main(args: list[str]) -> None:
    die_with(int(args[0]))
    os.execv(args[1], args[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
