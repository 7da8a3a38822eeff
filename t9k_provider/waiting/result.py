"""What a wait ends in, wherever it ran: a ``WaitResult``, which the operator concludes from, the sensor
judges and the trigger sends as its event (plain JSON: the task keeps nothing across a deferral).

Also the two verdicts that no job status gives, decided here once for every caller: the job was deleted, or
its name now holds another object. A task that owns its job (it knows the job's uid) may try again, with a
new job; a wait for a job it does not own (the sensor's) cannot bring it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.reported import ReportedProgress

Status = Literal["succeeded", "failed", "timeout", "error", "running"]


@dataclass(frozen=True)
class WaitResult:
    """``status``: the job ``succeeded`` or ``failed``, a limit hit (``timeout``, or ``failed`` for a paused
    or unknown job), an ``error`` (``retryable``: whether a new try could help; None: the caller decides), or
    ``running``: the wait was handed back with the job still running."""

    status: Status
    message: str = ""
    retryable: bool | None = None
    #: The job as last seen; None when it was never read or is gone.
    job: dict[str, Any] | None = None
    #: What the leader reported (None: its reports are not read).
    progress: ReportedProgress | None = None
    #: The last of the job's disruptions the wait said (``disruptions.cursor``): the next wait says the rest.
    disruptions_seen: str | None = None
    #: The limit that ended the wait (``limits.Verdict.limit``); "" for any other ending.
    limit: str = ""
    #: What the waits saw of the job's T9k Queue (``queueing.QueueRecord.to_json``); None: nothing.
    queue: dict[str, Any] | None = None

    @property
    def job_ended(self) -> bool:
        """The job itself ended (its replicas' last lines are worth waiting for)."""
        return self.status in ("succeeded", "failed") and self.job is not None

    def to_event(self, identity: dict[str, Any]) -> dict[str, Any]:
        """The trigger's event: ``job`` is the job's summary (``identity`` when it was not read)."""
        event: dict[str, Any] = {
            "status": self.status,
            "message": self.message,
            "job": job_status.summary(self.job) if self.job else identity,
        }
        if self.retryable is not None:
            event["retryable"] = self.retryable
        if self.disruptions_seen is not None:
            event["disruptions_seen"] = self.disruptions_seen
        if self.limit:
            event["limit"] = self.limit
        if self.queue is not None:
            event["queue"] = self.queue
        if self.progress is not None and (progress := self.progress.to_json()) is not None:
            event["progress"] = progress
        return event

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> WaitResult:
        progress = event.get("progress")
        return cls(
            event.get("status") or "error",
            event.get("message") or "",
            event.get("retryable"),
            progress=ReportedProgress.from_json(progress) if progress else None,
            disruptions_seen=event.get("disruptions_seen"),
            limit=event.get("limit") or "",
            queue=event.get("queue"),
        )


def deleted(namespace: str, name: str, *, owned: bool) -> WaitResult:
    """The job is gone: a task that created it may try again (a new try creates it anew)."""
    return WaitResult("error", f"job {namespace}/{name} was deleted while the task waited", retryable=owned)


def replaced(namespace: str, name: str, uid: str | None) -> WaitResult:
    """The job's name holds another object now: a new try adopts or replaces it (``reattach``)."""
    return WaitResult(
        "error", f"job {namespace}/{name} was replaced by another object (uid {uid})", retryable=True
    )
