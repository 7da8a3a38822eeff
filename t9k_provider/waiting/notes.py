"""Why a pending job waits, said in the task log: the scheduler's message on a pod it could not place.

Part of the wait ``step`` that the sync wait loop and the trigger share. Pods are read for a note at most
every ``READ_INTERVAL`` while the job is pending, the first time that long after the wait began (a job
scheduled at once costs no pod list); a note is logged when it changes or, unchanged, every
``REPEAT_INTERVAL``, so a job that waits for hours leaves a few lines, not thousands. Kept only for one
wait (no state across deferral).
"""

from __future__ import annotations

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


class WaitingNotes:
    def __init__(self, started: float) -> None:
        self._read_at = started
        self._said: str | None = None
        self._said_at = float("-inf")

    def due(self, now: float) -> bool:
        """Whether to read the pods now (and then call ``say``)."""
        if now - self._read_at < READ_INTERVAL:
            return False
        self._read_at = now
        return True

    def say(self, pods: list[dict[str, Any]], now: float) -> str | None:
        """The line to log about these pods now (``job waits: ...``), or None: nothing new to say."""
        note = unschedulable_note(pods)
        said = note is not None and (note != self._said or now - self._said_at >= REPEAT_INTERVAL)
        if said:
            self._said_at = now
        self._said = note
        return f"job waits: {note}" if said else None
