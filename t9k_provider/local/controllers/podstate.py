"""What the workload controllers read from a pod: ready, since when, still active, its revision."""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.controllers.owned import REVISION_LABEL


def pod_phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def pod_ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def ready_since(pod: dict[str, Any]) -> float | None:
    """When the pod became Ready (epoch seconds), None while it is not."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            stamp = cond.get("lastTransitionTime")
            return parse_timestamp(stamp).timestamp() if stamp else 0.0
    return None


def pod_finished(pod: dict[str, Any]) -> bool:
    return pod_phase(pod) in ("Succeeded", "Failed")


def pod_active(pod: dict[str, Any]) -> bool:
    """Neither finished nor being deleted (``controller.FilterActivePods``)."""
    return not pod_finished(pod) and not pod["metadata"].get("deletionTimestamp")


def pod_revision(pod: dict[str, Any]) -> str | None:
    """The StatefulSet or DaemonSet template revision the pod was made from."""
    return (pod["metadata"].get("labels") or {}).get(REVISION_LABEL)
