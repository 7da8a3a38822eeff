"""The one wait for a job: the loop around ``step`` that the operator's wait in the worker and the trigger
both run, and the seam (``WaitSeam``) through which it sees the job.

The loop owns the whole ``step`` protocol: each look asks ``step``, reads what it asks for through the seam
(the leader's recent reports, the job's pods and the largest node), asks again, logs the note, then ends,
hands back or waits for the job's next state. What a wait may do to the world is the seam's: the trigger
implements it with its shared watch and live log streams, the worker with the same on its own event loop.
So a deferrable and a non-deferrable task cannot differ in what ends their wait.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Protocol

from t9k_provider.waiting import disruptions
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.queueing import READ_EVERY_POLLS, QueueState
from t9k_provider.waiting.reported import ReportedProgress
from t9k_provider.waiting.result import WaitResult
from t9k_provider.waiting.step import Step, WaitMemory, next_look, step


class LookSeam(Protocol):
    """What one look reads besides the job, when ``step`` asks for it."""

    async def pods(self) -> list[dict[str, Any]]:
        """The job's pods; [] when they cannot be read now (a later look reads again)."""
        ...

    async def largest_node(self) -> dict[str, int] | None:
        """The most of each extended resource one node can give (``placement``); None: unknown."""
        ...

    async def recent_reports(self, since: float) -> bool:
        """Read the leader's reports since ``since`` (epoch seconds) to the present; whether that worked."""
        ...

    def progress(self) -> ReportedProgress | None:
        """What the leader reported so far; None when its reports are not read."""
        ...

    async def queue(self, job: dict[str, Any]) -> QueueState | None:
        """Where ``job`` stands in the T9k Queue it names (``waiting.queueing``); None: it cannot be read."""
        ...


class WaitSeam(LookSeam, Protocol):
    """What a wait reads of the world, and nothing else."""

    async def cordoned_nodes(self) -> set[str]:
        """The nodes cordoned now (empty when they cannot be read): an eviction from one was a drain."""
        ...

    async def next_state(self, job: dict[str, Any] | None, window: float) -> dict[str, Any] | WaitResult:
        """The job's state to look at next: its current state for None, else the next state within
        ``window`` seconds, or ``job`` again when none came (only the deadlines moved). A ``WaitResult``
        when the wait cannot go on (the job is gone, the API keeps failing)."""
        ...


class Logger(Protocol):
    def info(self, msg: str, *args: Any) -> Any: ...


async def look(
    seam: LookSeam, job: dict[str, Any], limits: WaitLimits, memory: WaitMemory, now: float, uid: str | None
) -> Step:
    """One look at ``job`` at ``now``: ``step``, with what it asks for read through ``seam`` and ``step``
    asked again; the answer is never a read, and its note is every line the look's answers said."""
    progress = seam.progress()
    said: list[str] = []
    decided = step(job, limits, now, memory, uid=uid, progress=progress)
    queue_read = False
    if decided.action == "read_queue":
        queue, queue_read = await seam.queue(job), True
        decided = step(
            job, limits, now, decided.memory, uid=uid, progress=progress, queue=queue, queue_read=True
        )
    if decided.action == "read_progress":  # stalled? first read what the streams may not have yet
        said.extend([decided.note] if decided.note else [])
        read_at = time.time()
        whole = await seam.recent_reports(decided.since if decided.since is not None else now)
        progress = seam.progress()
        read = read_at if whole else None
        decided = step(
            job, limits, now, decided.memory, uid=uid, progress=progress, read_at=read, queue_read=queue_read
        )
        if decided.action == "read_progress":  # the read failed: again after a poll interval, not at once
            due = decided.memory.hand_back_at is not None and now >= decided.memory.hand_back_at
            decided = decided._replace(action="hand_back" if due else "wait")
    if decided.action == "read_pods":
        said.extend([decided.note] if decided.note else [])
        pods = await seam.pods()
        largest = await seam.largest_node() if pods else None
        decided = step(
            job, limits, now, decided.memory, uid=uid, pods=pods, largest=largest, progress=progress,
            queue_read=queue_read,
        )  # fmt: skip
    said.extend([decided.note] if decided.note else [])
    return decided._replace(note="\n".join(said) or None)


async def wait(
    seam: WaitSeam,
    limits: WaitLimits,
    memory: WaitMemory,
    *,
    uid: str | None,
    poll_interval: float,
    log: Logger,
) -> WaitResult:
    """Look at each state of the job ``seam`` brings until a look ends the wait (the job's outcome, a limit,
    the job gone: its ``WaitResult``) or hands it back (``running``, at ``memory.hand_back_at``)."""
    memory = replace(memory, queue_every=READ_EVERY_POLLS * poll_interval)
    job = await seam.next_state(None, 0.0)
    while not isinstance(job, WaitResult):
        now = time.time()
        decided = await look(seam, job, limits, memory, now, uid)
        memory = decided.memory  # the wait's memory changes here only
        for line in (decided.note or "").splitlines():
            log.info("%s", line)
        if new := disruptions.since(job, memory.disruptions_seen):
            memory = replace(memory, disruptions_seen=disruptions.cursor(new[-1]))
            evicted = any(e.get("reason") == disruptions.EVICTION for e in new)
            cordoned = await seam.cordoned_nodes() if evicted else set()
            for entry in new:
                log.info("disruption: %s", disruptions.describe(entry, entry.get("node") in cordoned))
        seen = memory.disruptions_seen
        queue = memory.queue.to_json() if memory.queue is not None else None
        if decided.action == "end":
            status: Any = decided.status
            ended = WaitResult(status, decided.message, decided.retryable, job=job, disruptions_seen=seen)
            return replace(ended, limit=decided.limit, queue=queue)
        if decided.action == "hand_back":
            return WaitResult("running", job=job, disruptions_seen=seen, queue=queue)
        job = await seam.next_state(job, next_look(now, poll_interval, limits, memory, job))
    return job
