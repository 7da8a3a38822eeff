"""``python group_guard.py OWNER_PID PGID``: ends the process group PGID (an Airflow component and all it
spawned) once OWNER_PID, the harness that started it, has ended without stopping it, as a SIGKILLed test run
or benchmark would; it exits by itself once the group's leader has ended. The local clusters stop the same
way (``t9k-local run --owner-pid``); without it a killed run left a whole Airflow deployment at work.

Run as a script by the interpreter that started the component (the standard library only, nothing of the
project imported), in a session of its own, so that killing the harness's group does not end it first.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

#: Seconds the group gets to shut down after SIGTERM before it is SIGKILLed.
GRACE = 10.0


def _end_group(pgid: int) -> None:
    """SIGTERM the group, give its leader ``GRACE`` seconds to end, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pgid}"):
            time.sleep(0.2)
        os.killpg(pgid, signal.SIGKILL)


def main(owner: int, pgid: int) -> None:
    try:
        fds = {os.pidfd_open(owner): "owner", os.pidfd_open(pgid): "leader"}
    except ProcessLookupError:  # either has already ended: the group too, if the owner has
        if not os.path.exists(f"/proc/{owner}"):
            _end_group(pgid)
        return
    except OSError:  # no pidfds on this kernel: looked at every second, as ``t9k-local run --owner-pid`` does
        while os.path.exists(f"/proc/{owner}") and os.path.exists(f"/proc/{pgid}"):
            time.sleep(1.0)
        if not os.path.exists(f"/proc/{owner}"):
            _end_group(pgid)
        return
    ready, _, _ = select.select(list(fds), [], [])
    if any(fds[fd] == "owner" for fd in ready):
        _end_group(pgid)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
