"""Reading a T9k Job's status: the single place that decides what a phase and its conditions mean.

Pure functions over the job as a plain dict, shared by the operator, the sensor and the trigger, so the three
can never disagree about when a job succeeded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from t9k_provider.jobs.contract import PENDING_PHASES, task_replicas
from t9k_provider.kube.timestamps import parse_time, rfc3339

Outcome = Literal["pending", "running", "paused", "unknown", "succeeded", "failed"]


def conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("status") or {}).get("conditions") or [])


def condition_is_true(job: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and str(c.get("status")) == "True" for c in conditions(job))


def phase(job: dict[str, Any]) -> str:
    return str((job.get("status") or {}).get("phase") or "")


def outcome(job: dict[str, Any]) -> Outcome:
    """Terminal outcome from phase and conditions; a Failed signal wins over a Completed one."""
    current = phase(job)
    if current == "Failed" or condition_is_true(job, "Failed"):
        return "failed"
    if current == "Succeeded" or condition_is_true(job, "Completed"):
        return "succeeded"
    if current == "Paused":
        return "paused"
    if current == "Unknown":
        return "unknown"
    if not current or current in PENDING_PHASES:
        return "pending"  # the admission/scheduling timeout applies here
    return "running"


def created_at(job: dict[str, Any]) -> datetime | None:
    return parse_time((job.get("metadata") or {}).get("creationTimestamp"))


def running_since(job: dict[str, Any]) -> datetime | None:
    """When the job started running, from the cluster's own clock (survives triggerer restarts)."""
    for cond in conditions(job):
        if cond.get("type") == "Running" and str(cond.get("status")) == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def paused_since(job: dict[str, Any]) -> datetime | None:
    for cond in conditions(job):
        if cond.get("type") == "Paused" and str(cond.get("status")) == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def failure_reason(job: dict[str, Any]) -> str:
    """The controller's own explanation: the Failed condition, else the newest condition with a message."""
    for cond in conditions(job):
        if cond.get("type") == "Failed" and str(cond.get("status")) == "True":
            return _reason_text(cond)
    for cond in reversed(conditions(job)):
        if cond.get("message") and cond.get("type") in ("ReplicaFailure", "Completed"):
            return _reason_text(cond)
    return f"phase {phase(job) or 'unset'}"


def _reason_text(cond: dict[str, Any]) -> str:
    reason, message = cond.get("reason") or "", cond.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message or str(cond.get("type"))


def failed_replicas(job: dict[str, Any]) -> list[str]:
    """Names of replica pods that failed or whose container exited non-zero, failed ones first."""
    failed, nonzero = [], []
    for task in (job.get("status") or {}).get("tasks") or []:
        for replica in task_replicas(task):
            name = replica.get("name")
            if not name:
                continue
            if replica.get("phase") == "Failed":
                failed.append(name)
            elif any((c.get("exitCode") or 0) != 0 for c in replica.get("containers") or []):
                nonzero.append(name)
    return failed + [n for n in nonzero if n not in failed]


def replicas_started(job: dict[str, Any]) -> bool:
    """The job runs and every replica its status lists has all containers running or terminated.

    Then no replica is stuck before its start (``ErrImagePull`` and the like leave a container ``waiting``)
    and a fail-fast check has no pod to read; a replica that starts over shows ``waiting`` again.
    """
    if outcome(job) != "running":
        return False
    replicas = [r for t in (job.get("status") or {}).get("tasks") or [] for r in task_replicas(t)]
    return bool(replicas) and all(
        r.get("containers") and all(c.get("state") in ("running", "terminated") for c in r["containers"])
        for r in replicas
    )


def replica_counts(job: dict[str, Any]) -> dict[str, int]:
    """Replicas per type, from the status the controller wrote, else from the spec's replicaSpecs."""
    tasks = (job.get("status") or {}).get("tasks") or []
    if tasks:
        return {str(t.get("type")): len(task_replicas(t)) for t in tasks if t.get("type")}
    specs = (job.get("spec") or {}).get("replicaSpecs") or []
    return {
        str(s.get("type")): int(s.get("replicas", 1)) for s in specs if isinstance(s, dict) and s.get("type")
    }


def summary(job: dict[str, Any]) -> dict[str, Any]:
    """The compact, JSON-safe result a task returns to XCom and a trigger attaches to its events."""
    meta = job.get("metadata") or {}
    status = job.get("status") or {}
    since = running_since(job)
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "kind": job.get("kind"),
        "api_version": job.get("apiVersion"),
        "phase": phase(job) or None,
        "conditions": [
            {k: c.get(k) for k in ("type", "status", "reason", "message", "lastTransitionTime") if c.get(k)}
            for c in conditions(job)
        ],
        "start_time": status.get("startTime") or (rfc3339(since) if since else None),
        "completion_time": status.get("completionTime"),
        "replicas": replica_counts(job),
        "aggregate": status.get("aggregate"),
    }
