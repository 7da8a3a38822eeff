"""Deadlines for waiting on a job, checked by the wait's ``step`` in the worker and in the triggerer alike.

Every limit is anchored to an absolute instant: the job's creation time (admission/scheduling, and the time in
its T9k Queue's line), the moment its Queue admitted it (scheduling, for a job in a Queue: the time in line is
``queue_timeout``'s, never ``startup_timeout``'s), the moment its Running condition turned true (running), or
an epoch deadline fixed when the task started (execution_timeout).
Restarting the triggerer or re-entering the worker therefore never extends a timeout. What has no timestamp
of its own (an Unknown phase, a replica that cannot start) is anchored in ``first_seen``, which
``stages_seen`` and ``pods_seen`` return anew and the checks only read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, NamedTuple

from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.placement import unplaceable
from t9k_provider.waiting.queueing import QueueRecord
from t9k_provider.waiting.reported import ReportedProgress

STALL = "progress_timeout"


class Verdict(NamedTuple):
    status: Literal["timeout", "failed"]
    message: str
    #: The limit that fired (``startup_timeout``, ``progress_timeout``...): how a task's ending is classed.
    limit: str = ""


@dataclass(frozen=True)
class WaitLimits:
    """Seconds allowed per stage; None means no limit. ``execution_deadline`` is epoch seconds."""

    startup_timeout: float | None = None
    running_timeout: float | None = None
    execution_deadline: float | None = None
    paused_timeout: float | None = None
    unknown_timeout: float | None = None
    pod_error_timeout: float | None = None
    #: Seconds a running job may go without a progress report (``waiting.reported``).
    progress_timeout: float | None = None
    #: Seconds a job may wait in its T9k Queue's line, from its creation (``waiting.queueing``).
    queue_timeout: float | None = None

    @classmethod
    def of(cls, options: Any, execution_deadline: float | None = None) -> WaitLimits:
        """The limits that ``options`` (an operator) sets in attributes of the same names."""
        named = {f.name: getattr(options, f.name, None) for f in fields(cls)}
        return cls(**{**named, "execution_deadline": execution_deadline})

    def to_kwargs(self) -> dict[str, Any]:
        return asdict(self)

    def stages_seen(
        self, job: dict[str, Any], now: float, first_seen: Mapping[str, float]
    ) -> dict[str, float]:
        """``first_seen`` after a look at ``job`` at ``now``: a stage without a timestamp of its own starts
        now, one the job left is forgotten. The checks below only read what this returns."""
        seen = dict(first_seen)
        state = job_status.outcome(job)
        if state == "pending":
            if job_status.created_at(job) is None:
                seen.setdefault("pending", now)
            return seen
        if state == "running" and job_status.running_since(job) is None:
            seen.setdefault("running", now)
        if state != "paused":
            seen.pop("paused", None)
        elif job_status.paused_since(job) is None:
            seen.setdefault("paused", now)
        if state != "unknown":
            seen.pop("unknown", None)
        else:
            seen.setdefault("unknown", now)
        if job_status.replicas_started(job):
            seen.pop("pod_error", None)  # a problem seen before is over
        return seen

    def pods_seen(
        self,
        pods: list[dict[str, Any]],
        now: float,
        first_seen: Mapping[str, float],
        largest: dict[str, int] | None = None,
    ) -> dict[str, float]:
        """``first_seen`` after a look at the job's pods: when a replica first could not start, or nothing
        once none is stuck."""
        seen = dict(first_seen)
        if blocking_pod_problem(pods, largest) is None or self.pod_error_timeout is None:
            seen.pop("pod_error", None)
        else:
            seen.setdefault("pod_error", now)
        return seen

    def check(
        self,
        job: dict[str, Any],
        now: float,
        first_seen: Mapping[str, float],
        queue: QueueRecord | None = None,
    ) -> Verdict | None:
        """Why waiting must stop now, or None; ``first_seen`` as ``stages_seen`` returned it for this look,
        ``queue`` what the waits saw of the job's Queue (None: it names none, or it was not read)."""
        if self.execution_deadline is not None and now >= self.execution_deadline:
            return Verdict(
                "timeout", "execution_timeout reached while waiting for the job", "execution_timeout"
            )

        def over(limit: float | None, since: datetime | None, stage: str) -> bool:
            """Whether ``limit`` passed since the cluster's ``since``, else since ``stage`` was first seen."""
            start = since.timestamp() if since else first_seen.get(stage, now)
            return limit is not None and now - start >= limit

        state = job_status.outcome(job)
        if state == "pending":
            created = job_status.created_at(job)
            if queue is not None and queue.in_line:  # its Queue holds it: queue_timeout's time, not startup's
                if over(self.queue_timeout, created, "pending"):
                    message = f"not admitted by its queue within queue_timeout={self.queue_timeout:g}s: "
                    return Verdict("timeout", message + queue.last, "queue_timeout")
                return None
            if queue is not None and queue.admitted_at is not None:
                admitted = datetime.fromtimestamp(queue.admitted_at, timezone.utc)
                if over(self.startup_timeout, max(admitted, created) if created else admitted, "pending"):
                    return Verdict(
                        "timeout",
                        f"job still {job_status.phase(job) or 'Pending'} after startup_timeout="
                        f"{self.startup_timeout:g}s since queue {queue.queue} admitted it (not scheduled)",
                        "startup_timeout",
                    )
                return None
            if over(self.startup_timeout, created, "pending"):
                return Verdict(
                    "timeout",
                    f"job still {job_status.phase(job) or 'Pending'} after startup_timeout="
                    f"{self.startup_timeout:g}s (not admitted or not scheduled)",
                    "startup_timeout",
                )
            return None
        if state == "running" and over(self.running_timeout, job_status.running_since(job), "running"):
            message = f"job still running after running_timeout={self.running_timeout:g}s"
            return Verdict("timeout", message, "running_timeout")
        if state == "paused" and over(self.paused_timeout, job_status.paused_since(job), "paused"):
            message = f"job paused for longer than paused_timeout={self.paused_timeout:g}s"
            return Verdict("failed", message, "paused_timeout")
        if state == "unknown" and over(self.unknown_timeout, None, "unknown"):
            message = f"job phase Unknown for longer than unknown_timeout={self.unknown_timeout:g}s"
            return Verdict("failed", message, "unknown_timeout")
        return None

    def needs_queue(
        self, job: dict[str, Any], now: float, first_seen: Mapping[str, float], queue: QueueRecord | None
    ) -> bool:
        """Whether a verdict on a pending job waits for a fresh read of its Queue: one of its limits has
        passed on what the waits saw (nothing yet: counted from the job's creation; in line: queue_timeout),
        and a read may show the job admitted, or in line, or why it still waits."""
        if queue is not None and queue.admitted_at is not None:
            return False
        created = job_status.created_at(job)
        start = created.timestamp() if created else first_seen.get("pending", now)
        limits = (self.queue_timeout,) if queue is not None and queue.in_line else (
            self.queue_timeout, self.startup_timeout,
        )  # fmt: skip
        return any(limit is not None and now - start >= limit for limit in limits)

    def progress_deadline(
        self,
        job: dict[str, Any],
        progress: ReportedProgress | None,
        first_seen: Mapping[str, float],
        now: float,
    ) -> float | None:
        """When a running job without a new report is stalled: ``progress_timeout`` after the latest report,
        or after the job's Running when none came; None when not running or no limit is set."""
        if self.progress_timeout is None or job_status.outcome(job) != "running":
            return None
        if progress is not None and progress.at is not None:
            return progress.at + self.progress_timeout
        since = job_status.running_since(job)
        return (since.timestamp() if since else first_seen.get("running", now)) + self.progress_timeout

    def reports_since(
        self,
        job: dict[str, Any],
        progress: ReportedProgress | None,
        first_seen: Mapping[str, float],
        now: float,
    ) -> float:
        """Where a read for a stall verdict starts: after the latest report known (or the job's Running), but
        at most ``progress_timeout`` back, since an older report cannot prevent the stall."""
        deadline = self.progress_deadline(job, progress, first_seen, now)
        if deadline is None or self.progress_timeout is None:
            return now
        return max(deadline, now) - self.progress_timeout

    def check_progress(
        self,
        job: dict[str, Any],
        progress: ReportedProgress | None,
        now: float,
        first_seen: Mapping[str, float],
    ) -> Verdict | None:
        """Give up on a job whose training reported no progress for ``progress_timeout`` seconds."""
        deadline = self.progress_deadline(job, progress, first_seen, now)
        if deadline is None or now < deadline:
            return None
        limit = f"progress_timeout={self.progress_timeout:g}s"
        if progress is None or progress.at is None:
            return Verdict("timeout", f"no progress report since the job started running ({limit})", STALL)
        return Verdict("timeout", f"no progress report for {limit}; the last: {progress.latest(now)}", STALL)

    def pods_needed(self, job: dict[str, Any]) -> bool:
        """Whether ``check_pods`` needs the job's pods now: not once every replica has started."""
        return self.pod_error_timeout is not None and not job_status.replicas_started(job)

    def check_pods(
        self,
        pods: list[dict[str, Any]],
        now: float,
        first_seen: Mapping[str, float],
        largest: dict[str, int] | None = None,
    ) -> Verdict | None:
        """Fail fast when a replica cannot start (bad image, bad config, a request for more GPUs than any node
        has, judged from ``largest``: ``placement``) for ``pod_error_timeout`` seconds; ``first_seen`` as
        ``pods_seen`` returned it for these pods."""
        problem = blocking_pod_problem(pods, largest)
        if problem is None or self.pod_error_timeout is None:
            return None
        if now - first_seen.get("pod_error", now) >= self.pod_error_timeout:
            message = f"{problem} for pod_error_timeout={self.pod_error_timeout:g}s"
            return Verdict("timeout", message, "pod_error_timeout")
        return None

    def seconds_left(self, now: float) -> float | None:
        return None if self.execution_deadline is None else self.execution_deadline - now

    def deferral_timeout(self, now: float, poll_interval: float) -> float | None:
        """Seconds Airflow lets a deferral last: past the execution deadline, leaving the trigger time to
        report the timeout itself, so the job is stopped rather than orphaned."""
        left = self.seconds_left(now)
        return None if left is None else max(0.0, left) + max(60.0, 2 * poll_interval)


def execution_deadline(started: datetime | None, execution_timeout: timedelta | None) -> float | None:
    """The task's ``execution_timeout`` as an epoch deadline from its start (now, when Airflow gave none)."""
    if not execution_timeout:
        return None
    return (started or datetime.now(timezone.utc)).timestamp() + execution_timeout.total_seconds()


#: Container waiting reasons that do not resolve by waiting: the image or the container config is wrong.
BLOCKING_WAITING_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)


def blocking_pod_problem(pods: list[dict[str, Any]], largest: dict[str, int] | None = None) -> str | None:
    """The first container that cannot start, as ``pod <name> container <c>: <reason>: <message>``, or the
    first pod no node can take (``largest``: the most of each extended resource a node has; None: unknown)."""
    for pod in pods:
        status = pod.get("status") or {}
        for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in BLOCKING_WAITING_REASONS:
                detail = f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
                return f"pod {pod['metadata']['name']} container {cs.get('name')}: {detail}"
    if largest is not None:
        for pod in pods:
            if problem := unplaceable(pod, largest):
                return problem
    return None
