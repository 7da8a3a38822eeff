"""Which class a task's ending falls in (docs/airflow.md#how-a-task-ends), and so which exception fails it
(`failures`): read from what the job and its pods say, never guessed from a message.

A failed job: the controller's reason first (an invalid spec is a configuration; a deadline or its queue's
``maxDuration`` a time limit), then the replica that failed first: one marked ``DisruptionTarget``, failed
for a reason of the node or the control plane, or gone without an exit code was lost to the infrastructure;
one whose program ended it (an exit code, OOMKilled under its own limit) is a workload failure. A wait that
stopped on a limit: the limit says (``startup_timeout``: the cluster did not place the job; a pod that cannot
start: its configuration; ``progress_timeout``: a stall).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from t9k_provider.jobs.contract import INFRASTRUCTURE_REASONS
from t9k_provider.waiting import status as job_status

Kind = Literal["workload", "infrastructure", "stall", "configuration", "timeout"]

#: Failed condition reasons of the controller, by class.
CONFIGURATION_REASONS = frozenset({"InvalidSpec"})
TIME_LIMIT_REASONS = frozenset({"DeadlineExceeded", "MaxDurationExceeded"})
#: Wait limits, by class (others end as their verdict always did).
LIMITS: dict[str, Kind] = {
    "startup_timeout": "infrastructure",
    "unknown_timeout": "infrastructure",
    "pod_error_timeout": "configuration",
    "progress_timeout": "stall",
    "running_timeout": "timeout",
    "execution_timeout": "timeout",
    "queue_timeout": "timeout",
}


@dataclass(frozen=True)
class Ending:
    """The class of an ending, and for an infrastructure one what happened (``lead``: the message's first
    line, e.g. ``worker-1 (pod j-worker-1) on node n1: evicted (EvictionByEvictionAPI)``)."""

    kind: Kind
    lead: str = ""


def of_failed_job(job: dict[str, Any], pods: list[dict[str, Any]] | None, first: str | None) -> Ending:
    """The class of a job that ended Failed; ``first``: the pod of the replica that failed first, if any."""
    failed = next((c for c in job_status.conditions(job) if c.get("type") == "Failed"), {})
    if failed.get("reason") in CONFIGURATION_REASONS:
        return Ending("configuration")
    if failed.get("reason") in TIME_LIMIT_REASONS:
        return Ending("timeout")
    pod = next((p for p in pods or () if p["metadata"]["name"] == first), None)
    lost = disrupted(pod) if pod is not None else None
    return Ending("infrastructure", f"{first}: {lost}") if lost else Ending("workload")


def disrupted(pod: dict[str, Any]) -> str | None:
    """How the infrastructure ended ``pod`` (``evicted (EvictionByEvictionAPI: ...)``), or None when its own
    program did."""
    status = pod.get("status") or {}
    for c in status.get("conditions") or ():
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            return f"disrupted on node {_node(pod)} ({_why(c)})"
    if status.get("phase") == "Failed" and status.get("reason") in INFRASTRUCTURE_REASONS:
        return f"ended by its node {_node(pod)} ({_why(status)})"
    ended = [s for s in status.get("containerStatuses") or () if (s.get("state") or {}).get("terminated")]
    if status.get("phase") == "Failed" and not ended:
        return f"lost on node {_node(pod)} without an exit code"
    return None


def _why(said: dict[str, Any]) -> str:
    return str(said.get("reason")) + (f": {said['message']}" if said.get("message") else "")


def _node(pod: dict[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "unknown")


def of_limit(limit: str) -> Kind | None:
    """The class of a wait that stopped on ``limit``; None for one that keeps its verdict's own ending."""
    return LIMITS.get(limit)
