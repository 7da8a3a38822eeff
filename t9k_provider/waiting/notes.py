"""Why a pending job waits, said in the task log: the scheduler's message on a pod it could not place.

Part of the wait ``step``. Pods are read for a note at most every ``READ_INTERVAL`` while the job is pending,
the first time that long after the wait began (a job scheduled at once costs no pod list); a note is logged
when it changes or, unchanged, every ``REPEAT_INTERVAL``, so a job that waits for hours leaves a few lines,
not thousands. Kept only for one wait (no state across deferral), as values: each answer returns the notes
as they are after it, and the wait's memory keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

READ_INTERVAL = 30.0
REPEAT_INTERVAL = 300.0


def unschedulable_note(pods: list[dict[str, Any]]) -> str | None:
    """``pod <name> is not scheduled: <message>`` for the first pod with ``PodScheduled=False``."""
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        for cond in (pod.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                why = cond.get("message") or cond.get("reason") or "no reason given"
                return f"pod {pod['metadata']['name']} is not scheduled: {why}"
    return None


@dataclass(frozen=True)
class WaitingNotes:
    #: When the pods were last read for a note (the wait's start, before any read).
    read_at: float
    said: str | None = None
    said_at: float = float("-inf")

    def due(self, now: float) -> bool:
        """Whether to read the pods now (then ``read``, and ``say`` with them)."""
        return now - self.read_at >= READ_INTERVAL

    def read(self, now: float) -> WaitingNotes:
        """The notes once the pods were read at ``now``."""
        return replace(self, read_at=now)

    def say(self, pods: list[dict[str, Any]], now: float) -> tuple[str | None, WaitingNotes]:
        """The line to log about these pods now (``job waits: ...``; None: nothing new to say), and the notes
        after saying it."""
        note = unschedulable_note(pods)
        said = note is not None and (note != self.said or now - self.said_at >= REPEAT_INTERVAL)
        after = replace(self, said=note, said_at=now if said else self.said_at)
        return (f"job waits: {note}" if said else None), after
