"""Status helpers: timestamps, one condition per type, aggregate counts (docs/controller.md#status)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from t9k_provider.jobs.contract import (
    CONDITION_TYPES,
    OLD_CONDITION_TYPES,
    REPLICA_PHASES,
    TASK_REPLICAS_READ,
    task_replicas,
)
from t9k_provider.kube.timestamps import rfc3339

NO_REASON = "-"


def merge_conditions(
    prior: list[dict[str, Any]] | None, desired: dict[str, tuple[str, str, str]], now: datetime
) -> list[dict[str, Any]]:
    """`desired` maps type -> (status, reason, message). lastTransitionTime changes only on a flip.

    Condition types present before but not desired now are kept unchanged (conditions never vanish).
    """
    by_type = {c.get("type"): c for c in prior or [] if c.get("type")}
    for old_spelling in OLD_CONDITION_TYPES:
        by_type.pop(old_spelling, None)
    out: dict[str, dict[str, Any]] = {}
    for ctype in [*CONDITION_TYPES, *sorted(set(by_type) | set(desired))]:
        if ctype in out:
            continue
        old = by_type.get(ctype)
        if ctype in desired:
            status, reason, message = desired[ctype]
            flipped = old is None or old.get("status") != status
            out[ctype] = {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": rfc3339(now)
                if flipped
                else old.get("lastTransitionTime", rfc3339(now)),
            }
        elif old is not None:
            out[ctype] = dict(old)
    return list(out.values())


def condition(status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == ctype), None)


def condition_true(status: dict[str, Any], ctype: str) -> bool:
    cond = condition(status, ctype)
    return cond is not None and cond.get("status") == "True"


def aggregate(phases: list[str]) -> dict[str, int]:
    counts = {p.lower(): 0 for p in REPLICA_PHASES}
    for phase in phases:
        key = phase.lower()
        counts[key if key in counts else "unknown"] += 1
    return counts


def sanitized(prior: Any) -> dict[str, Any]:
    """The prior status with malformed parts dropped: it is read back from the API and may be anything."""
    if not isinstance(prior, dict):
        return {}
    out = dict(prior)
    conditions = out.get("conditions")
    out["conditions"] = [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []
    tasks = out.get("tasks")
    # Each task's replicas as one list whatever key a controller wrote them under (`task_replicas`).
    out["tasks"] = [
        {
            **{k: v for k, v in t.items() if k not in TASK_REPLICAS_READ},
            "replicas": [r for r in task_replicas(t) if isinstance(r, dict)],
        }
        for t in (tasks if isinstance(tasks, list) else [])
        if isinstance(t, dict)
    ]
    for key in ("backoffCount", "restarts"):
        if not isinstance(out.get(key), int) or isinstance(out.get(key), bool) or out[key] < 0:
            out.pop(key, None)
    disruptions = out.get("disruptions")
    out["disruptions"] = (
        [d for d in disruptions if isinstance(d, dict)] if isinstance(disruptions, list) else []
    )
    for key in ("phase", "startTime", "completionTime"):
        if not isinstance(out.get(key), str):
            out.pop(key, None)
    return out
