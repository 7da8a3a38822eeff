"""What to tell the user when a job failed or a wait limit hit: the first things they would look up.

Conditions, why pods are stuck in Pending, the failing replica's last log lines and recent events, gathered
best-effort (a diagnostic that cannot be read is reported, never raised).
"""

from __future__ import annotations

import logging
from typing import Any

from t9k_provider.replicalogs.follower import LogFollower
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.waiting import status as job_status

#: Most recent events shown per object.
EVENTS_PER_OBJECT = 10


def failure_report(
    hook: Any,
    kind: str,
    namespace: str,
    name: str,
    job: dict[str, Any],
    log_lines: int,
    log: logging.Logger | Any,
) -> str:
    lines = [f"phase: {job_status.phase(job) or 'unset'}"]
    lines += [
        f"condition {c['type']}={c.get('status')}: {c.get('reason', '')} {c.get('message', '')}".rstrip()
        for c in job_status.conditions(job)
    ]
    selector = pod_selector(kind, name)
    try:
        pods = {p["metadata"]["name"]: p for p in hook.list_pods(namespace, selector)}
    except Exception as exc:
        pods = {}
        lines.append(f"pods unavailable: {exc}")
    failed = job_status.failed_replicas(job)[:1]
    stuck = [n for n, p in sorted(pods.items()) if (p.get("status") or {}).get("phase") == "Pending"][:2]
    for pod_name in stuck:
        lines += [f"pod {pod_name} Pending: {why}" for why in waiting_reasons(pods[pod_name])]
    reader = LogFollower(hook, namespace, selector, lambda _: True, log=log)
    for pod_name in failed:
        spec = (pods.get(pod_name) or {}).get("spec") or {}
        lines.append(f"last {log_lines} log lines of {pod_name}:")
        lines += reader.tail(pod_name, [c["name"] for c in spec.get("containers") or []], log_lines)
    for involved in [name, *failed, *(n for n in stuck if n not in failed)]:
        lines += _events(hook, namespace, involved)
    return "\n".join(lines)


def waiting_reasons(pod: dict[str, Any]) -> list[str]:
    """Why a pod is not running: unschedulable conditions, waiting containers (e.g. ImagePullBackOff)."""
    status = pod.get("status") or {}
    reasons = [
        f"{c.get('reason')}: {c.get('message', '')}".rstrip(": ")
        for c in status.get("conditions") or []
        if c.get("status") == "False" and c.get("reason")
    ]
    for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            reasons.append(
                f"container {cs.get('name')}: {waiting['reason']} {waiting.get('message', '')}".rstrip()
            )
    return reasons


def _events(hook: Any, namespace: str, name: str) -> list[str]:
    try:
        events = hook.list_events(namespace, name)
    except Exception as exc:
        return [f"events of {name} unavailable: {exc}"]
    return [
        f"event {name}: {e.get('type')} {e.get('reason')}: {e.get('message')}"
        for e in events[-EVENTS_PER_OBJECT:]
    ]
