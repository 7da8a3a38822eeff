"""What a job's replicas used: replica-seconds and GPU-seconds per replica type, from the pods' own clocks.

A pod ran from its containers' earliest start (``startedAt`` of the running or terminated state, or of the
last terminated one) to their latest finish (``finishedAt``), or until ``now`` while one still runs; its
GPU-seconds are that time times the GPU (``kube.resources.GPU``) limits of its containers. Only the pods that
exist when the task ends count: pods deleted before (replaced replicas, ``cleanUpPolicy`` that removed them)
are not seen. Pure functions over plain dicts, for the task's conclusion.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from t9k_provider.jobs.contract import LABEL_REPLICA_TYPE
from t9k_provider.kube.resources import GPU, whole_units
from t9k_provider.kube.timestamps import parse_time

#: The replica type of a pod without the controller's label.
UNLABELLED = "other"
TOTAL = "total"


def ran(pod: dict[str, Any], now: datetime) -> tuple[datetime, datetime] | None:
    """When the pod's containers started and finished (``now`` while one runs); None if none started."""
    starts: list[datetime] = []
    ends: list[datetime] = []
    running = False
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        last = (cs.get("lastState") or {}).get("terminated") or {}
        for moment in (
            (state.get("running") or {}).get("startedAt"),
            (state.get("terminated") or {}).get("startedAt"),
            last.get("startedAt"),
        ):
            if (parsed := parse_time(moment)) is not None:
                starts.append(parsed)
        running = running or bool((state.get("running") or {}).get("startedAt"))
        for moment in ((state.get("terminated") or {}).get("finishedAt"), last.get("finishedAt")):
            if (parsed := parse_time(moment)) is not None:
                ends.append(parsed)
    if not starts:
        return None
    start = min(starts)
    end = now if running or not ends else max(ends)
    return start, max(start, end)


def gpus(pod: dict[str, Any]) -> int:
    """The GPUs the pod's containers are limited to (their requests where a container has no limit)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU, (resources.get("requests") or {}).get(GPU))
        total += (whole_units(value) or 0) if value is not None else 0
    return total


def replica_type(pod: dict[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_REPLICA_TYPE) or UNLABELLED)


def usage(pods: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """``{"replica_seconds": {type: s, ..., "total": s}, "gpu_seconds": {...}}``, rounded to 0.1 s, and
    ``replicas``: how many pods ran (the XCom ``t9k_usage`` leaves that count out)."""
    replica_seconds: dict[str, float] = {}
    gpu_seconds: dict[str, float] = {}
    replicas = 0
    for pod in pods:
        interval = ran(pod, now)
        if interval is None:
            continue
        replicas += 1
        seconds = (interval[1] - interval[0]).total_seconds()
        kind = replica_type(pod)
        replica_seconds[kind] = replica_seconds.get(kind, 0.0) + seconds
        gpu_seconds[kind] = gpu_seconds.get(kind, 0.0) + seconds * gpus(pod)
    return {
        "replicas": replicas,
        "replica_seconds": _with_total(replica_seconds),
        "gpu_seconds": _with_total(gpu_seconds),
    }


def _with_total(per_type: dict[str, float]) -> dict[str, float]:
    out = {kind: round(value, 1) for kind, value in sorted(per_type.items())}
    out[TOTAL] = round(sum(per_type.values()), 1)
    return out


def describe(used: dict[str, Any]) -> str:
    """The task log's line: ``usage: 2 replicas, 184.2 replica-seconds (worker 184.2), 0 GPU-seconds``."""
    parts = [f"usage: {used['replicas']} replica{'' if used['replicas'] == 1 else 's'}"]
    for key, unit in (("replica_seconds", "replica-seconds"), ("gpu_seconds", "GPU-seconds")):
        values = used[key]
        per_type = ", ".join(f"{kind} {_number(s)}" for kind, s in values.items() if kind != TOTAL)
        parts.append(f"{_number(values[TOTAL])} {unit}" + (f" ({per_type})" if values[TOTAL] else ""))
    return ", ".join(parts)


def _number(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")
