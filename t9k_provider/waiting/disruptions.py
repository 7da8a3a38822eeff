"""The disruptions a job went through, in the words a task log leads with (pure).

The controller records each replica lost to something outside its program in the job's
``status.disruptions`` (docs/controller.md#disruptions): the replica, its pod and node, the pod signal's
reason and message, when, and what it did (``RestartJob``: the job restarts as a whole; ``RecreateReplica``).
The wait says each new one once, as it sees it; the conclusion pushes those of the task's try to XCom
``t9k_disruptions``.
"""

from __future__ import annotations

import re
from typing import Any

from t9k_provider.kube.timestamps import parse_time

EVICTION = "EvictionByEvictionAPI"
#: The scheduler's preemption message names the preemptor: "(PodGroup ns/name, priority 80 > 50)".
_PREEMPTOR = re.compile(r"\((?:PodGroup|pod) (?P<who>[^,]+), priority (?P<own>-?\d+) > (?P<theirs>-?\d+)\)")


def entries(job: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The job's recorded disruptions, oldest first."""
    found = ((job or {}).get("status") or {}).get("disruptions") or []
    return [e for e in found if isinstance(e, dict)]


def cursor(entry: dict[str, Any]) -> str:
    """Where an entry stands among the job's disruptions: its time, then its pod's uid (JSON: a trigger
    carries it across deferrals)."""
    return f"{entry.get('time', '')}/{entry.get('uid', '')}"


def since(job: dict[str, Any] | None, seen: str | None) -> list[dict[str, Any]]:
    """The disruptions recorded after the one at ``seen`` (``cursor``; None: all of them)."""
    return [e for e in entries(job) if seen is None or cursor(e) > seen]


def describe(entry: dict[str, Any], cordoned: bool = False) -> str:
    """``worker-1 was evicted (drain of node n1) at 10:42:03 UTC; the job restarts as a whole (restart 1)``.
    ``cordoned``: the node was unschedulable when the eviction came, as a drain leaves it."""
    replica = f"{entry.get('replicaType', 'replica')}-{entry.get('replicaIndex', '?')}"
    node = entry.get("node") or "an unknown node"
    reason, message = str(entry.get("reason") or ""), str(entry.get("message") or "")
    if reason == EVICTION:
        what = f"was evicted ({'drain' if cordoned else 'eviction'} of node {node})"
    elif reason == "PreemptionByScheduler":
        found = _PREEMPTOR.search(message)
        by = f" by {found['who']} (priority {found['own']} > {found['theirs']})" if found else ""
        what = f"was preempted{by} on node {node}"
    elif reason == "DeletionByTaintManager":
        what = f"was lost: node {node} stopped reporting"
    elif reason == "DeletedFromOutside":
        what = f"was deleted from outside the job (on node {node})"
    else:
        what = f"was lost on node {node} ({reason}{': ' + message if message else ''})"
    when = parse_time(entry.get("time"))
    at = f" at {when:%H:%M:%S} UTC" if when is not None else ""
    then = (
        f"; the job restarts as a whole (restart {entry['restart']})"
        if entry.get("action") == "RestartJob" and entry.get("restart")
        else "; the replica is created again"
    )
    return f"{replica} {what}{at}{then}"


def for_xcom(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry as XCom ``t9k_disruptions`` holds it: ``{time, replica, pod, node, reason, message, restart}``
    (``restart``: the whole restart it caused or was part of, None when only the replica was created
    again)."""
    return {
        "time": entry.get("time"),
        "replica": f"{entry.get('replicaType', 'replica')}-{entry.get('replicaIndex', '?')}",
        "pod": entry.get("pod"),
        "node": entry.get("node"),
        "reason": entry.get("reason"),
        "message": entry.get("message"),
        "restart": entry.get("restart") if entry.get("action") == "RestartJob" else None,
    }
