"""What an observed pod says about its replica: phase, training exit code, retryable or not
(docs/controller.md#r9)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from t9k_provider.jobs.contract import INFRASTRUCTURE_REASONS
from t9k_provider.kube.timestamps import parse_time


@dataclass(frozen=True)
class PodState:
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    exit_code: int | None  # of the training container, when it terminated
    exit_reason: str  # why it terminated, as the kubelet says (OOMKilled, Error...); "" while it runs
    infra_failure: bool  # failed for a reason outside the user's program
    ready: bool
    terminating: bool
    containers: list[dict[str, Any]]
    reason: str
    finished_at: datetime | None = None  # when the training container terminated, as the kubelet says


def container_summaries(pod: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        entry: dict[str, Any] = {"name": cs.get("name", "")}
        if "terminated" in state:
            entry["state"] = "terminated"
            entry["exitCode"] = int(state["terminated"].get("exitCode", 0))
        elif "running" in state:
            entry["state"] = "running"
        else:
            entry["state"] = "waiting"
        out.append(entry)
    return out


def _terminated(status: dict[str, Any] | None) -> tuple[int | None, str, datetime | None] | None:
    """A container status's exit code, reason and end, once it terminated."""
    terminated = ((status or {}).get("state") or {}).get("terminated")
    if terminated is None:
        return None
    code = terminated.get("exitCode")
    reason = str(terminated.get("reason") or "")
    return (int(code) if code is not None else None), reason, parse_time(terminated.get("finishedAt"))


def _training_termination(pod: dict[str, Any], container: str) -> tuple[int | None, str, datetime | None]:
    """The training container's exit code, termination reason and end, once it terminated; else those of an
    init container that failed with an exit code: the job's own program failed before the training started
    (a pod without any exit code is an infrastructure failure, docs/controller.md#disruptions)."""
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    chosen = next((cs for cs in statuses if cs.get("name") == container), None)
    if chosen is None and statuses and not container:
        chosen = statuses[0]
    found = _terminated(chosen)
    if found is not None:
        return found
    for init in status.get("initContainerStatuses") or []:
        failed = _terminated(init)
        if failed is not None and failed[0]:
            return failed
    return None, "", None


def telling_exit_reason(reason: str) -> bool:
    """Does the kubelet's termination reason say more than the exit code (OOMKilled...)? Its defaults, Error
    and Completed (container reasons, not the job's condition), do not."""
    return reason not in ("", "Error", "Completed")


def classify(pod: dict[str, Any], training_container: str) -> PodState:
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    reason = status.get("reason") or ""
    conditions = status.get("conditions") or []
    disrupted = any(c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in conditions)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    has_ready_condition = any(c.get("type") == "Ready" for c in conditions)
    exit_code, exit_reason, finished_at = _training_termination(pod, training_container)
    infra = phase == "Failed" and (reason in INFRASTRUCTURE_REASONS or disrupted or exit_code is None)
    return PodState(
        phase=phase,
        exit_code=exit_code,
        exit_reason=exit_reason,
        infra_failure=infra,
        # A pod without a Ready condition (e.g. a minimal kubelet) counts as ready once Running.
        ready=phase == "Running" and (ready or not has_ready_condition),
        terminating=bool((pod.get("metadata") or {}).get("deletionTimestamp")),
        containers=container_summaries(pod),
        reason=reason,
        finished_at=finished_at,
    )
