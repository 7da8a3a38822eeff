"""One look at a waited-for job, decided the same way in the worker and in the triggerer.

The operator's follow loop and the trigger call ``step`` on every state of the job they see, so what ends a
wait (the job's outcome, a limit, a replica that cannot start, a hand-back) cannot differ between a deferrable
and a non-deferrable task. It reads nothing: when the answer depends on the job's pods it asks for them
(``read_pods``) and is called again, at the same instant, with them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.notes import WaitingNotes
from t9k_provider.waiting.reported import ReportedProgress

#: Shortest pause between two looks, so a deadline that is due this instant cannot make a wait spin.
MIN_LOOK_SECONDS = 0.05


class Step(NamedTuple):
    """What to do after one look. ``conclude`` carries ``status`` (succeeded, failed, timeout or error),
    ``message`` and, for an error, whether a new try could help; ``note`` is a line to log either way.
    ``read_pods``: look again with the job's pods. ``read_progress``: the job looks stalled; read the leader's
    reports to the present (from ``WaitLimits.reports_since``), set ``progress_read_at`` to when that read
    started, and look again."""

    action: Literal["conclude", "read_pods", "read_progress", "hand_back", "wait"]
    status: str = ""
    message: str = ""
    retryable: bool | None = None
    note: str | None = None


@dataclass
class WaitMemory:
    """What one wait remembers between looks; nothing survives a deferral (the limits' anchors are the
    job's own timestamps or absolute deadlines), so a new wait starts a new memory."""

    started: float
    #: When to hand the wait back (to the worker, to print logs or to defer); None: never.
    hand_back_at: float | None = None
    #: When each stage without a timestamp of its own (unknown phase, a pod error) was first seen.
    first_seen: dict[str, float] = field(default_factory=dict)
    #: When the job counts as stalled without a new progress report, as of the last look (None: never).
    stalled_at: float | None = None
    #: When the leader's log was last read to the present (``read_progress``): a stall is called only on the
    #: reports of a read that started after its deadline, never on what a stream may not have delivered yet.
    progress_read_at: float | None = None
    notes: WaitingNotes = field(init=False)

    def __post_init__(self) -> None:
        self.notes = WaitingNotes(self.started)


def step(
    job: dict[str, Any],
    limits: WaitLimits,
    now: float,
    memory: WaitMemory,
    *,
    uid: str | None = None,
    pods: list[dict[str, Any]] | None = None,
    largest: dict[str, int] | None = None,
    progress: ReportedProgress | None = None,
) -> Step:
    """The decision for ``job`` as seen at ``now``; ``uid`` is the job the task waits for, ``pods`` the
    job's pods when the previous answer for this look was ``read_pods`` (a caller without them gives []),
    ``largest`` the most of each extended resource a node has (``placement``; None when unknown),
    ``progress`` what the leader reported so far (None: its log is not read)."""
    seen = (job.get("metadata") or {}).get("uid")
    if uid and seen != uid:
        name = (job.get("metadata") or {}).get("name")
        return Step("conclude", "error", f"job {name} was replaced by another object (uid {seen})", False)
    state = job_status.outcome(job)
    if state in ("succeeded", "failed"):
        return Step("conclude", state, job_status.failure_reason(job) if state == "failed" else "")
    verdict = limits.check(job, now, memory.first_seen)
    if verdict is None:
        verdict = limits.check_progress(job, progress, now, memory.first_seen)
        deadline = limits.progress_deadline(job, progress, memory.first_seen, now)
        if verdict is not None and (memory.progress_read_at or 0.0) < (deadline or 0.0):
            memory.stalled_at = None  # a failed read is tried again after a poll interval, not at once
            return Step("read_progress")
    if verdict is not None:
        return Step("conclude", verdict.status, verdict.message)
    memory.stalled_at = limits.progress_deadline(job, progress, memory.first_seen, now)
    for_limits = limits.pods_needed(job, memory.first_seen)
    note = None
    if pods is None:
        if for_limits or (state == "pending" and memory.notes.due(now)):
            return Step("read_pods")
    else:
        verdict = limits.check_pods(pods, now, memory.first_seen, largest) if for_limits else None
        if verdict is not None:
            return Step("conclude", verdict.status, verdict.message)
        note = memory.notes.say(pods, now) if state == "pending" else None
    if memory.hand_back_at is not None and now >= memory.hand_back_at:
        return Step("hand_back", note=note)
    return Step("wait", note=note)


def next_look(now: float, poll_interval: float, limits: WaitLimits, memory: WaitMemory) -> float:
    """Seconds until the next look when nothing changes: the poll interval jittered by +-20% (so tasks started
    together spread out), shortened so the execution deadline, a stall and the hand-back are met on time."""
    delay = poll_interval * random.uniform(0.8, 1.2)
    for bound in (limits.execution_deadline, memory.stalled_at, memory.hand_back_at):
        if bound is not None:
            delay = min(delay, bound - now)
    return max(MIN_LOOK_SECONDS, delay)
