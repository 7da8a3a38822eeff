"""Pod status from container attempts: phase, container statuses and conditions, as the kubelet reports them.

Pure functions (no I/O), shared by the process kubelet and the simulated one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.kubelet.runtime import Attempt, container_id

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class ContainerView:
    """What the kubelet knows about one container: its attempts and, if not running, why it is waiting."""

    spec: dict[str, Any]
    attempts: list[Attempt] = field(default_factory=list)
    waiting_reason: str = "ContainerCreating"
    waiting_message: str | None = None
    # What the container's probes say of its running attempt (True when it has no such probe).
    probe_started: bool = True
    probe_ready: bool = True

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def ready(self) -> bool:
        """Running, started and ready by its probes: counts for the pod's Ready condition."""
        cur = self.current
        return (
            cur is not None
            and cur.running
            and bool(cur.started_at)
            and self.probe_started
            and self.probe_ready
        )

    def succeeded(self) -> bool:
        cur = self.current
        return cur is not None and cur.finished and cur.exit_code == 0


def image_id(image: str) -> str:
    return f"{image}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _terminated(pod_uid: str, name: str, a: Attempt) -> dict[str, Any]:
    reason = a.reason or ("Completed" if a.exit_code == 0 else "Error")
    out: dict[str, Any] = {
        "exitCode": a.exit_code,
        "reason": reason,
        "startedAt": a.started_at or a.finished_at,
        "finishedAt": a.finished_at,
        "containerID": container_id(pod_uid, name, a.n),
    }
    if a.message:
        out["message"] = a.message
    return out


def container_status(pod: dict[str, Any], view: ContainerView, *, restart_pending: bool) -> dict[str, Any]:
    """One entry of `containerStatuses`; `restart_pending` means a finished attempt will be restarted."""
    uid = pod["metadata"]["uid"]
    image = view.spec.get("image", "")
    status: dict[str, Any] = {
        "name": view.name,
        "image": image,
        "imageID": "",
        "ready": False,
        "started": False,
    }
    cur = view.current
    finished = [a for a in view.attempts if a.finished]
    restart_count = (
        len(finished) if (cur is None or not cur.finished or restart_pending) else len(finished) - 1
    )
    status["restartCount"] = max(0, restart_count)
    last = None
    if cur is not None and cur.running and cur.started_at:
        status["state"] = {"running": {"startedAt": cur.started_at}}
        status.update(ready=view.ready(), started=view.probe_started)
        last = finished[-1] if finished else None
    elif cur is not None and cur.finished and not restart_pending:
        status["state"] = {"terminated": _terminated(uid, view.name, cur)}
        last = finished[-2] if len(finished) > 1 else None
    else:
        waiting: dict[str, Any] = {"reason": view.waiting_reason}
        if view.waiting_message:
            waiting["message"] = view.waiting_message
        status["state"] = {"waiting": waiting}
        last = finished[-1] if finished else None
    if cur is not None and (cur.running or cur.finished):
        status["containerID"] = container_id(uid, view.name, cur.n)
        status["imageID"] = image_id(image)
    status["lastState"] = {"terminated": _terminated(uid, view.name, last)} if last else {}
    return status


UNLOCATED = {
    "exitCode": 137,
    "reason": "ContainerStatusUnknown",
    "message": "The container could not be located when the pod was terminated",
}


def terminate_unfinished(status: dict[str, Any]) -> None:
    """A pod the kubelet ended (its deadline passed, say) while a container had not run: that container is
    reported terminated with an error, as the kubelet's TerminatePod does, so that no container of a
    finished pod still claims to be waiting. Init containers only where they had started (a containerID)."""
    entries = [(s, True) for s in status.get("containerStatuses") or []]
    entries += [(s, False) for s in status.get("initContainerStatuses") or []]
    for entry, main in entries:
        if "terminated" in entry["state"] or "running" in entry["state"]:
            continue
        if main or entry.get("containerID"):
            entry["state"] = {"terminated": dict(UNLOCATED)}


def wants_restart(restart_policy: str, attempt: Attempt) -> bool:
    if not attempt.finished:
        return False
    if restart_policy == "Always":
        return True
    return restart_policy == "OnFailure" and attempt.exit_code != 0


def init_failed(pod: dict[str, Any], inits: list[ContainerView]) -> bool:
    """An init container failed and will not be retried (restartPolicy Never)."""
    policy = pod["spec"].get("restartPolicy", "Always")
    return policy == "Never" and any(
        v.current and v.current.finished and v.current.exit_code != 0 for v in inits
    )


def phase(pod: dict[str, Any], inits: list[ContainerView], mains: list[ContainerView]) -> str:
    """The kubelet's getPhase: Pending until every container has run once, terminal per restartPolicy."""
    policy = pod["spec"].get("restartPolicy", "Always")
    if init_failed(pod, inits):
        return "Failed"
    if not all(v.succeeded() for v in inits):
        return "Pending"
    running = waiting = stopped = succeeded = 0
    for v in mains:
        cur = v.current
        if cur is None or (cur.running and not cur.started_at and cur.n == 0):
            waiting += 1  # not started yet (the shim has not reported the process)
        elif cur.running:
            running += 1
        else:
            stopped += 1
            succeeded += int(cur.exit_code == 0)
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    return "Running" if policy == "OnFailure" else "Failed"


def _condition(ctype: str, ok: bool, reason: str | None, message: str | None, old: dict, now: str) -> dict:
    status = "True" if ok else "False"
    prev = old.get(ctype) or {}
    cond: dict[str, Any] = {
        "type": ctype,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": prev.get("lastTransitionTime") if prev.get("status") == status else now,
    }
    if not ok and reason:
        cond["reason"] = reason
    if not ok and message:
        cond["message"] = message
    return cond


def conditions(
    pod: dict[str, Any], pod_phase: str, inits: list[ContainerView], mains: list[ContainerView], now: str
) -> list[dict[str, Any]]:
    old = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    pending_inits = [v.name for v in inits if not v.succeeded()]
    initialized = not pending_inits
    unready = [v.name for v in mains if not v.ready()]  # as its containerStatuses entry says
    completed = pod_phase == "Succeeded"
    ready_reason = "PodCompleted" if completed else "ContainersNotReady"
    ready_message = None if completed else f"containers with unready status: [{' '.join(unready)}]"
    init_message = f"containers with incomplete status: [{' '.join(pending_inits)}]"
    if completed or (pod_phase == "Failed" and initialized):
        init_reason: str | None = "PodCompleted"
    else:
        init_reason = "ContainersNotInitialized"
    ready = not unready and pod_phase not in TERMINAL_PHASES
    sched = old.get("PodScheduled") or {}
    return [
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": sched.get("lastTransitionTime") or now,
        },
        _condition("Initialized", initialized, init_reason, init_message, old, now),
        _condition("ContainersReady", ready, ready_reason, ready_message, old, now),
        _condition("Ready", ready, ready_reason, ready_message, old, now),
    ]


#: Lists of a pod's status the kubelet alone writes: a strategic merge patch replaces them whole (their merge
#: key would otherwise keep an address the pod no longer has).
KUBELET_LISTS = ("podIPs", "hostIPs")


def status_patch(status: dict[str, Any]) -> dict[str, Any]:
    """The strategic merge patch that writes ``status``: its conditions merged by type (others' stay), the
    lists the kubelet owns replaced whole."""
    patch = dict(status)
    for key in KUBELET_LISTS:
        if key in patch:
            patch[key] = [*patch[key], {"$patch": "replace"}]
    return {"status": patch}


def pod_status(
    pod: dict[str, Any],
    inits: list[ContainerView],
    mains: list[ContainerView],
    *,
    now: str,
    pod_ip: str,
    host_ip: str,
    start_time: str,
    restart_pending: set[str],
) -> dict[str, Any]:
    pod_phase = phase(pod, inits, mains)
    out: dict[str, Any] = {
        "phase": pod_phase,
        "conditions": conditions(pod, pod_phase, inits, mains, now),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "containerStatuses": [
            container_status(pod, v, restart_pending=v.name in restart_pending) for v in mains
        ],
    }
    if pod_ip:
        out["podIP"] = pod_ip
        out["podIPs"] = [{"ip": pod_ip}]
    if inits:
        out["initContainerStatuses"] = [
            container_status(pod, v, restart_pending=v.name in restart_pending) for v in inits
        ]
    return out


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    return parse_timestamp(text).timestamp()
