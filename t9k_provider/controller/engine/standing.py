"""The Decision of a job that drives companion resources itself (BeamJob), from the `Progress` its kind reads.

What JobRun does for a Plan's status envelope, here for a Progress: the terminal phase is final, nothing is
created in the round that ends the job, and cleanup follows only once that phase is in the observed status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from t9k_provider.jobs.contract import TERMINAL_PHASES
from t9k_provider.kube.timestamps import rfc3339

from .decision import Create, Decision, Event
from .jobrun import CLEANUP_REQUEUE_SECONDS
from .plan import Progress
from .status import merge_conditions, sanitized


def progress_decision(job: dict[str, Any], progress: Progress, now: datetime) -> Decision:
    prior = sanitized(job.get("status"))
    if prior.get("phase") in TERMINAL_PHASES:
        return Decision(status=job.get("status") or {}, actions=list(progress.cleanup))
    phase = progress.phase
    ending = phase in TERMINAL_PHASES
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": merge_conditions(prior.get("conditions"), progress.conditions, now),
        "startTime": prior.get("startTime") or rfc3339(now),
    }
    if ending:
        status["completionTime"] = rfc3339(now)
    status.update(progress.fields)
    generation = job["metadata"].get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    events = []
    if phase != prior.get("phase"):
        events.append(Event("Warning" if phase == "Failed" else "Normal", phase, f"The job is {phase}."))
    return Decision(
        status=status,
        actions=[] if ending else [Create(obj) for obj in progress.creates],
        events=events,
        requeue_after=CLEANUP_REQUEUE_SECONDS if ending and progress.cleanup else None,
    )
