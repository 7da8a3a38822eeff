"""One look at a waited-for job: the decision the wait's loop (``loop``) takes on every state of the job it
sees, in the worker and in the triggerer alike.

It reads nothing: when the answer depends on the job's pods it asks for them (``read_pods``), when the job
looks stalled for a read of the leader's reports (``read_progress``), when its job waits in a T9k Queue (or
a limit's verdict depends on whether it does) for a read of where it stands there (``read_queue``), and is
called again, at the same instant, with what was read. It changes nothing either: every answer carries the
wait's memory as it is after that look, and the loop keeps it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

from t9k_provider.jobs.contract import job_queue
from t9k_provider.waiting import queueing
from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.notes import WaitingNotes
from t9k_provider.waiting.queueing import QueueRecord, QueueState
from t9k_provider.waiting.reported import ReportedProgress
from t9k_provider.waiting.result import WaitResult, replaced

#: Shortest pause between two looks, so a deadline that is due this instant cannot make a wait spin.
MIN_LOOK_SECONDS = 0.05
#: How long a wait goes without a look while time alone cannot change its verdict (``quiet``): the job's
#: changes come through the watch, and the deadlines that remain still bound the look (``next_look``), so a
#: look every poll interval would only cost 1,000 waiting triggers a few % of a core
#: (docs/benchmarks.md#12-triggerer-capacity).
QUIET_LOOK_SECONDS = 300.0


@dataclass(frozen=True)
class WaitMemory:
    """What one wait remembers between looks; nothing survives a deferral (the limits' anchors are the
    job's own timestamps or absolute deadlines), so a new wait starts a new memory."""

    started: float
    #: When to hand the wait back (to the worker, to print logs or to defer); None: never.
    hand_back_at: float | None = None
    #: When each stage without a timestamp of its own (unknown phase, a pod error) was first seen.
    first_seen: Mapping[str, float] = field(default_factory=dict)
    #: When the job counts as stalled without a new progress report, as of the last look (None: never).
    stalled_at: float | None = None
    #: When the leader's log was last read to the present (``read_progress``): a stall is called only on the
    #: reports of a read that started after its deadline, never on what a stream may not have delivered yet.
    progress_read_at: float | None = None
    #: The last of the job's recorded disruptions the wait said (``disruptions.cursor``; None: say them all).
    disruptions_seen: str | None = None
    #: Why a pending job waits, as last said (a new wait: none yet, its pods first read ``READ_INTERVAL`` in).
    notes: WaitingNotes = None  # type: ignore[assignment]  # set from ``started``
    #: What the task's waits saw of the job's T9k Queue (carried across deferrals: ``queueing``).
    queue: QueueRecord | None = None
    #: When this wait last read the Queue (None: not yet), and how often it does while the job waits there.
    queue_read_at: float | None = None
    queue_every: float = queueing.READ_EVERY_POLLS * 10.0

    def __post_init__(self) -> None:
        if self.notes is None:
            object.__setattr__(self, "notes", WaitingNotes(self.started))

    @classmethod
    def resuming(
        cls, started: float, hand_back_at: float | None, earlier: WaitResult | None = None
    ) -> WaitMemory:
        """A new wait's memory, going on from what an ``earlier`` wait of the task carried in its result (the
        disruptions it said, what it saw of the job's Queue)."""
        if earlier is None:
            return cls(started, hand_back_at)
        queue = QueueRecord.from_json(earlier.queue) if earlier.queue else None
        return cls(started, hand_back_at, disruptions_seen=earlier.disruptions_seen, queue=queue)


class Step(NamedTuple):
    """What to do after one look, and the wait's ``memory`` after it. ``end`` carries ``status``
    (succeeded, failed, timeout or error), ``message`` and, for an error, whether a new try could help;
    ``note`` is a line to log either way. ``read_pods``: look again with the job's pods. ``read_progress``:
    read the leader's reports to the present from ``since``, and look again with when that read started,
    if it reached the present. ``read_queue``: look again with where the job stands in its Queue."""

    action: Literal["end", "read_pods", "read_progress", "read_queue", "hand_back", "wait"]
    memory: WaitMemory
    status: str = ""
    message: str = ""
    retryable: bool | None = None
    note: str | None = None
    since: float | None = None
    #: For ``end`` by a limit: which one (``limits.Verdict.limit``).
    limit: str = ""


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
    read_at: float | None = None,
    queue: QueueState | None = None,
    queue_read: bool = False,
) -> Step:
    """The decision for ``job`` as seen at ``now``; ``uid`` is the job the task waits for, ``pods`` the
    job's pods when the previous answer for this look was ``read_pods`` (a caller without them gives []),
    ``largest`` the most of each extended resource a node has (``placement``; None when unknown),
    ``progress`` what the leader reported so far (None: its log is not read), ``read_at`` when the read a
    ``read_progress`` asked for started, if it reached the present; ``queue_read``: this look read the
    Queue (``read_queue``), and found ``queue`` (None: the read failed, or was taken in already)."""
    meta = job.get("metadata") or {}
    if uid and meta.get("uid") != uid:
        gone = replaced(str(meta.get("namespace")), str(meta.get("name")), meta.get("uid"))
        return Step("end", memory, gone.status, gone.message, gone.retryable)
    state = job_status.outcome(job)
    if state in ("succeeded", "failed"):
        return Step("end", memory, state, job_status.failure_reason(job) if state == "failed" else "")
    first_seen = limits.stages_seen(job, now, memory.first_seen)
    if read_at is not None:
        memory = replace(memory, progress_read_at=read_at)
    memory = replace(memory, first_seen=first_seen)
    named = job_queue(job)
    if queue_read:
        memory, said = _take_queue(job, state, named, now, memory, queue)
    elif named is not None and (
        _queue_due(state, memory, now)
        or (state == "pending" and limits.needs_queue(job, now, first_seen, memory.queue))
    ):
        return Step("read_queue", memory)
    else:
        said = None
    in_line = state == "pending" and memory.queue is not None and memory.queue.in_line
    verdict = limits.check(job, now, first_seen, memory.queue if named is not None else None)
    if verdict is None:
        verdict = limits.check_progress(job, progress, now, first_seen)
        deadline = limits.progress_deadline(job, progress, first_seen, now)
        if verdict is not None and (memory.progress_read_at or 0.0) < (deadline or 0.0):
            since = limits.reports_since(job, progress, first_seen, now)
            # stalled_at None: a read that fails is tried again after a poll interval, not at once
            return Step("read_progress", replace(memory, stalled_at=None), note=said, since=since)
    if verdict is not None:
        return Step("end", memory, verdict.status, verdict.message, note=said, limit=verdict.limit)
    memory = replace(memory, stalled_at=limits.progress_deadline(job, progress, first_seen, now))
    for_limits = limits.pods_needed(job) and not in_line  # no pod of a job in line is placed or started
    note = said
    if pods is None:
        if for_limits:
            return Step("read_pods", memory, note=said)
        if state == "pending" and not in_line and memory.notes.due(now):
            return Step("read_pods", replace(memory, notes=memory.notes.read(now)), note=said)
    else:
        if for_limits:
            memory = replace(memory, first_seen=limits.pods_seen(pods, now, memory.first_seen, largest))
            verdict = limits.check_pods(pods, now, memory.first_seen, largest)
            if verdict is not None:
                return Step("end", memory, verdict.status, verdict.message, limit=verdict.limit)
        if state == "pending" and not in_line:
            note, notes = memory.notes.say(pods, now)
            memory = replace(memory, notes=notes)
    if memory.hand_back_at is not None and now >= memory.hand_back_at:
        return Step("hand_back", memory, note=note)
    return Step("wait", memory, note=note)


def _take_queue(
    job: dict[str, Any],
    state: str,
    named: str | None,
    now: float,
    memory: WaitMemory,
    queue: QueueState | None,
) -> tuple[WaitMemory, str | None]:
    """``memory`` with the Queue read at ``now`` taken in, and what to say of it (None: nothing new). A job
    seen in line that left pending was admitted even when its PodGroup is gone or unreadable: when it began
    to run."""
    memory = replace(memory, queue_read_at=now)
    left = state != "pending" and memory.queue is not None and memory.queue.in_line
    if left and (queue is None or queue.standing != "admitted"):
        running = job_status.running_since(job)
        at = running.timestamp() if running is not None else now
        queue = QueueState(named or "", now, "admitted", admitted_at=at)
    if queue is None:
        return memory, None
    created = job_status.created_at(job)
    record, said = (memory.queue or QueueRecord(queue.queue)).observe(
        queue, now, created.timestamp() if created else None
    )
    return replace(memory, queue=record), said


def _queue_due(state: str, memory: WaitMemory, now: float) -> bool:
    """Whether to read where the job stands in its Queue now: every ``queue_every`` while it waits there
    (the first time that long into the wait, or at once when an earlier wait saw it in line), and once
    after it left pending, for when it was admitted (that read always settles it); never once it was seen
    admitted."""
    record, last = memory.queue, memory.queue_read_at
    if record is not None and record.admitted_at is not None:
        return False
    if state == "pending":
        if last is None:
            return (record is not None and record.in_line) or now - memory.started >= memory.queue_every
        return now - last >= memory.queue_every
    return (record is None and last is None) or (record is not None and record.in_line)


def quiet(job: dict[str, Any], limits: WaitLimits, memory: WaitMemory, now: float) -> bool:
    """Whether only the deadlines ``next_look`` meets anyway (execution, hand-back) can end the wait on
    ``job`` as it is: it runs, every replica started (no pod to read), no ``running_timeout`` or
    ``progress_timeout`` counts, and nothing is left to read of its Queue."""
    return (
        job_status.outcome(job) == "running"
        and limits.running_timeout is None
        and limits.progress_timeout is None
        and not limits.pods_needed(job)
        and (job_queue(job) is None or not _queue_due("running", memory, now))
    )


def next_look(
    now: float, poll_interval: float, limits: WaitLimits, memory: WaitMemory, job: dict[str, Any]
) -> float:
    """Seconds until ``job`` is looked at again when nothing changes: the poll interval
    (``QUIET_LOOK_SECONDS`` while the wait is ``quiet``) jittered by +-20% (so tasks started together spread
    out), shortened so the execution deadline, a stall and the hand-back are met on time."""
    every = QUIET_LOOK_SECONDS if quiet(job, limits, memory, now) else poll_interval
    delay = every * random.uniform(0.8, 1.2)
    for bound in (limits.execution_deadline, memory.stalled_at, memory.hand_back_at):
        if bound is not None:
            delay = min(delay, bound - now)
    return max(MIN_LOOK_SECONDS, delay)
