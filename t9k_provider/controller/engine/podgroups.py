"""The T9k Scheduler PodGroup (docs/controller.md#t9k-scheduler): created before any pod, deleted at pause and
at the end."""

from __future__ import annotations

from typing import Any

from .names import child_metadata
from .plan import SchedulerPlan

PODGROUP_API_VERSION = "scheduler.tensorstack.dev/v1beta1"
PODGROUP_KIND = "PodGroup"


def podgroup_spec(plan: SchedulerPlan) -> dict[str, Any]:
    return {"minMember": plan.min_member, "queue": plan.queue, "priority": plan.priority}


def build_podgroup(job: dict[str, Any], plan: SchedulerPlan) -> dict[str, Any]:
    return {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": PODGROUP_KIND,
        "metadata": child_metadata(job, job["metadata"]["name"]),
        "spec": podgroup_spec(plan),
    }


#: The condition the T9k scheduler sets on a PodGroup that ran longer than its Queue's maxDuration.
MAX_DURATION_EXCEEDED = "MaxDurationExceeded"


def overran(podgroups: list[dict[str, Any]]) -> str | None:
    """Why the job must end because its PodGroup outran its Queue's ``maxDuration`` (None: it did not)."""
    for pg in podgroups:
        for c in (pg.get("status") or {}).get("conditions") or ():
            if c.get("type") == MAX_DURATION_EXCEEDED and c.get("status") == "True":
                return f"The job {c.get('message') or 'ran longer than its queue allows'}."
    return None


def podgroup_drift(observed: dict[str, Any], plan: SchedulerPlan) -> dict[str, Any] | None:
    """The merge patch that brings the PodGroup's mutable fields back to the plan, or None.

    The queue is immutable once pods joined it, so only minMember and priority are kept in sync.
    """
    want = podgroup_spec(plan)
    have = observed.get("spec") or {}
    patch = {k: want.get(k) for k in ("minMember", "priority") if have.get(k) != want.get(k)}
    return {"spec": patch} if patch else None
