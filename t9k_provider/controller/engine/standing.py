"""The Decision of a job that drives companion resources itself (BeamJob), from the `Standing` its kind reads.

What JobRun does for a Plan's status envelope, here for a Standing: the terminal phase is final, nothing is
created in the round that ends the job, and cleanup follows only once that phase is in the observed status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from t9k_provider.jobs.contract import TERMINAL_PHASES
from t9k_provider.kube.timestamps import rfc3339

from .decision import Create, Decision, Event
from .jobrun import CLEANUP_REQUEUE_SECONDS
from .plan import Standing
from .status import merge_conditions, sanitized


def standing_decision(job: dict[str, Any], standing: Standing, now: datetime) -> Decision:
    prior = sanitized(job.get("status"))
    if prior.get("phase") in TERMINAL_PHASES:
        return Decision(status=job.get("status") or {}, actions=list(standing.cleanup))
    phase = standing.phase
    ending = phase in TERMINAL_PHASES
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": merge_conditions(prior.get("conditions"), standing.conditions, now),
        "startTime": prior.get("startTime") or rfc3339(now),
    }
    if ending:
        status["completionTime"] = rfc3339(now)
    status.update(standing.fields)
    generation = job["metadata"].get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    events = []
    if phase != prior.get("phase"):
        events.append(Event("Warning" if phase == "Failed" else "Normal", phase, f"The job is {phase}."))
    return Decision(
        status=status,
        actions=[] if ending else [Create(obj) for obj in standing.creates],
        events=events,
        requeue_after=CLEANUP_REQUEUE_SECONDS if ending and standing.cleanup else None,
    )
