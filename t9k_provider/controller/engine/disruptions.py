"""Disruptions: a replica lost to something outside its program, read from the pod's own Kubernetes signals
(docs/controller.md#disruptions).

The signals: the pod condition `DisruptionTarget=True` (the Eviction API, scheduler preemption, the taint
manager, the kubelet), a pod Failed for an infrastructure reason or without an exit code (`podstate`), and a
pod deleted by someone else while the job runs (gone, or terminating without the controller having asked).
The engine then restarts the job as a whole or recreates the one replica (`Plan.whole_restart`), and keeps
the latest `DISRUPTIONS_KEPT` of them in `status.disruptions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from t9k_provider.jobs.contract import ANNOTATION_JOB_RESTARTS, DISRUPTIONS_KEPT, DisruptionAction
from t9k_provider.kube.timestamps import parse_time, rfc3339

from .podstate import PodState

DISRUPTION_TARGET = "DisruptionTarget"
#: The taint manager deleted the pod for a NoExecute taint (its node unreachable or not ready): no kubelet
#: will confirm the kill, so the pod stays terminating until it is force-deleted.
TAINT_MANAGER = "DeletionByTaintManager"
DELETED_FROM_OUTSIDE = "DeletedFromOutside"
NO_EXIT_CODE = "NoExitCode"
#: A program failure of a replica that restarts as a whole is judged this long after its container finished:
#: a disruption that shows by then (its time at most this much after the failure) caused it. The kubelet may
#: kill a pod before its status says why, and the times come from different machines, in whole seconds.
ATTRIBUTION_WINDOW_SECONDS = 5

_WORDS = {
    "EvictionByEvictionAPI": "was evicted",
    "PreemptionByScheduler": "was preempted",
    TAINT_MANAGER: "was deleted by the taint manager (its node is unreachable or not ready)",
    "TerminationByKubelet": "was terminated by its node's kubelet",
    "Evicted": "was evicted by its node's kubelet",
    "Shutdown": "was stopped by its node's shutdown",
    "NodeShutdown": "was stopped by its node's shutdown",
    "Terminated": "was stopped by its node's shutdown",
    "NodeLost": "lost its node",
    "Preempting": "was preempted",
    DELETED_FROM_OUTSIDE: "was deleted from outside the controller",
    NO_EXIT_CODE: "failed without an exit code",
}


@dataclass(frozen=True)
class Disruption:
    """One replica's pod lost, and why; `replica` is how the job names it (`worker-1`, `launcher`)."""

    replica_type: str
    replica_index: int
    replica: str
    pod: str
    uid: str
    node: str | None
    reason: str
    message: str
    time: str

    def sentence(self) -> str:
        """`worker-1 (pod demo-worker-1) on node n1 was evicted (EvictionByEvictionAPI: <its message>)`."""
        where = f"on node {self.node}" if self.node else "on an unknown node"
        words = _WORDS.get(self.reason, "was stopped by its node")
        why = f"{self.reason}: {self.message}" if self.message else self.reason
        return f"{self.replica} (pod {self.pod}) {where} {words} ({why})"

    def entry(self, action: DisruptionAction, restart: int | None) -> dict[str, Any]:
        """The `status.disruptions` entry (jobs.status.Disruption)."""
        out: dict[str, Any] = {
            "replicaType": self.replica_type,
            "replicaIndex": self.replica_index,
            "pod": self.pod,
            "uid": self.uid,
            "node": self.node,
            "reason": self.reason,
            "message": self.message,
            "time": self.time,
            "action": action,
            "restart": restart,
        }
        return {k: v for k, v in out.items() if v not in (None, "")}


def disruption_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next(
        (
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"
        ),
        None,
    )


def deleted_by_taint_manager(pod: dict[str, Any]) -> bool:
    """Deleted for a NoExecute taint: its node stopped reporting, so nothing will finish the deletion."""
    cond = disruption_condition(pod)
    return (
        bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        and (cond or {}).get("reason") == TAINT_MANAGER
    )


def job_restart_of(pod: dict[str, Any]) -> int:
    """The job's restart the pod was created for (0: none, or a pod built before whole restarts existed)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_JOB_RESTARTS) or ""
    return int(value) if value.isdigit() else 0


def _deletion_time(pod: dict[str, Any]) -> datetime | None:
    """When the deletion was asked for: the deletion deadline minus its grace period."""
    meta = pod.get("metadata") or {}
    deadline = parse_time(meta.get("deletionTimestamp"))
    if deadline is None:
        return None
    grace = meta.get("deletionGracePeriodSeconds")
    return deadline - timedelta(seconds=grace if isinstance(grace, int) else 0)


def of_pod(
    key: tuple[str, int], replica: str, pod: dict[str, Any], state: PodState, outside: bool, now: datetime
) -> Disruption | None:
    """What the pod's signals say, or None when it was not disrupted. `outside`: a deletion of this pod
    (deletionTimestamp) was not the controller's doing."""
    if state.phase == "Succeeded":
        return None
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    cond = disruption_condition(pod)
    if cond is not None:
        reason, message = str(cond.get("reason") or DISRUPTION_TARGET), str(cond.get("message") or "")
        when = parse_time(cond.get("lastTransitionTime")) or _deletion_time(pod)
    elif state.phase == "Failed" and state.infra_failure:
        reason = state.reason or NO_EXIT_CODE
        message = str(status.get("message") or "")
        when = state.finished_at
    elif state.terminating and outside:
        reason, message, when = DELETED_FROM_OUTSIDE, "", _deletion_time(pod)
    else:
        return None
    return Disruption(
        key[0],
        key[1],
        replica,
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        (pod.get("spec") or {}).get("nodeName"),
        reason,
        message,
        rfc3339(when or now),
    )


def of_lost_pod(
    key: tuple[str, int], replica: str, name: str, record: dict[str, Any], now: datetime
) -> Disruption:
    """A running replica's pod that is gone though the controller never deleted it."""
    return Disruption(
        key[0],
        key[1],
        replica,
        name,
        str(record.get("uid") or ""),
        record.get("nodeName"),
        DELETED_FROM_OUTSIDE,
        "",
        rfc3339(now),
    )


def kept(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest `DISRUPTIONS_KEPT` entries, oldest first."""
    return entries[-DISRUPTIONS_KEPT:]
