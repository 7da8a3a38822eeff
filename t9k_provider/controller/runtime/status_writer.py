"""Status writes: a JSON merge patch (RFC 7386) on the ``/status`` subresource, skipped when nothing changed.

The patch carries the resourceVersion the status was computed from, so a write never lands on a job that
changed since it was read (docs/controller.md#r15): the server answers 409 and the caller recomputes from
fresh state.

A change that only mirrors pods' progress may wait (``progress_only``, docs/controller.md#status-writes).
"""

from __future__ import annotations

from typing import Any

from t9k_provider.jobs.contract import ACTIVE_REPLICA_PHASES, TASK_REPLICAS_READ

# How long a progress-only change may wait for the next one: a 4-replica job's binds and starts cost one
# write, not eight, as Kubernetes' Job controller batches pod updates.
PROGRESS_BATCH_SECONDS = 0.5


def merge_patch(current: Any, desired: Any) -> Any:
    """The merge patch turning ``current`` into ``desired``; ``{}`` when they are equal.

    Keys missing from ``desired`` are set to null; lists and scalars are replaced whole (merge patch has no
    list merging). ``None`` values in ``desired`` mean "absent".
    """
    if not isinstance(current, dict) or not isinstance(desired, dict):
        return _strip_none(desired)
    patch: dict[str, Any] = {}
    for key, old in current.items():
        if (key not in desired or desired[key] is None) and old is not None:
            patch[key] = None
    for key, new in desired.items():
        if new is None:
            continue
        old = current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            sub = merge_patch(old, new)
            if sub != {}:
                patch[key] = sub
        elif key not in current or old != _strip_none(new):
            patch[key] = _strip_none(new)
    return patch


def status_patch(job: dict[str, Any], desired_status: dict[str, Any]) -> dict[str, Any] | None:
    """The body to PATCH on ``/status``, or None when the job's status already equals ``desired_status``."""
    diff = merge_patch(job.get("status") or {}, desired_status)
    if not diff:
        return None
    resource_version = (job.get("metadata") or {}).get("resourceVersion")
    body: dict[str, Any] = {"status": diff}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    return body


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


def progress_only(current: dict[str, Any], desired: dict[str, Any]) -> bool:
    """Whether ``desired`` differs from ``current`` only in what mirrors the pods' progress.

    That is a replica's ``nodeName``, its ``containers`` and a move between Pending and Running, the
    ``aggregate`` counts, and a condition's message. Nothing the engine reads back as its memory (uids,
    restart counts, finished replicas, phase, a condition's status or reason) is among them, so leaving such
    a change unwritten for a while changes no decision.
    """
    return _decided(_strip_none(current)) == _decided(_strip_none(desired))


def _decided(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` less its progress fields."""
    out = {k: v for k, v in status.items() if k not in ("aggregate", "conditions", "tasks")}
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "message"} if isinstance(c, dict) else c
        for c in status.get("conditions") or []
    ]
    out["tasks"] = [_decided_task(t) for t in status.get("tasks") or []]
    return out


def _decided_task(task: Any) -> Any:
    if not isinstance(task, dict):
        return task
    return {
        k: [_decided_replica(r) for r in v] if k in TASK_REPLICAS_READ and isinstance(v, list) else v
        for k, v in task.items()
    }


def _decided_replica(replica: Any) -> Any:
    if not isinstance(replica, dict):
        return replica
    out = {k: v for k, v in replica.items() if k not in ("nodeName", "containers")}
    if out.get("phase") in ACTIVE_REPLICA_PHASES:
        out["phase"] = "Active"
    return out
