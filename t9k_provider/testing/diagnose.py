"""What a cluster looked like when a wait gave up, in words: its components, the pods that tell (not
Running and Ready, not Succeeded, or restarted), each container's state with its reason, exit and restart
count, the last log lines of a container that failed or crash-loops, and the pods' Warning events. A red run
reads this in its failure message instead of someone opening the state directory by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

#: (method, path) -> (HTTP status, JSON body or text): `LocalCluster.request` without its keywords.
Request = Callable[[str, str], tuple[int, dict[str, str], Any]]

MAX_PODS = 12
LOG_LINES = 5
EVENTS_PER_POD = 4


def cluster_report(request: Request, namespace: str | None = None) -> str:
    """The pods that tell of ``namespace`` (all namespaces when None), and Nodes that are not Ready."""
    lines = _nodes(request)
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    status, _, body = request("GET", path)
    if status != 200 or not isinstance(body, dict):
        return "\n".join([*lines, f"pods: GET {path} answered {status}: {str(body)[:300]}"])
    pods = body.get("items") or []
    telling = [p for p in pods if _tells(p)]
    where = f"namespace {namespace}" if namespace else "all namespaces"
    if not telling:
        lines.append(f"pods ({where}): all {len(pods)} Running and Ready or Succeeded, none restarted")
        return "\n".join(lines)
    lines.append(
        f"pods not Running and Ready nor Succeeded, or restarted ({len(telling)} of {len(pods)}, {where}):"
    )
    for pod in telling[:MAX_PODS]:
        lines += [f"  {line}" for line in describe_pod(pod, request)]
    if len(telling) > MAX_PODS:
        lines.append(f"  ... and {len(telling) - MAX_PODS} more")
    return "\n".join(lines)


def _tells(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    if any(s.get("restartCount") for s in statuses):
        return True
    phase = status.get("phase")
    if phase == "Succeeded":
        return False
    return not (phase == "Running" and _condition(pod, "Ready").get("status") == "True")


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


def describe_pod(pod: dict[str, Any], request: Request) -> list[str]:
    """One pod: its phase, node and reason, then a line per container, the last log lines of one that failed,
    and its latest Warning events."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    head = f"{ns}/{name}: {status.get('phase')}"
    if node := (pod.get("spec") or {}).get("nodeName"):
        head += f" on {node}"
    if status.get("reason") or status.get("message"):
        head += f" ({status.get('reason') or ''}: {status.get('message') or ''})"
    failing = [
        f"{c['type']}={c.get('status')} {c.get('reason') or ''} {c.get('message') or ''}".strip()
        for c in status.get("conditions") or []
        if c.get("status") != "True" and c.get("type") in ("PodScheduled", "Ready", "DisruptionTarget")
    ]
    lines = [head + (f"; {'; '.join(failing)}" if failing else "")]
    init = status.get("initContainerStatuses") or []
    for s in [*init, *(status.get("containerStatuses") or [])]:
        lines.append(f"  {s.get('name')}: {container_state(s)}")
        previous = _previous_attempt(s)
        if previous is not None:
            tail = _log_tail(request, ns, name, s["name"], previous)
            lines += [f"    | {line}" for line in tail]
    lines += [f"  event {e}" for e in _warnings(request, ns, name)]
    return lines


def container_state(s: dict[str, Any]) -> str:
    """`waiting CrashLoopBackOff (back-off 20s ...); restarts 6; last: exit 1 (Error) at ...`."""
    state = s.get("state") or {}
    parts = [_state_words(state)]
    if not state.get("terminated") and s.get("ready") is False and "running" in state:
        parts[0] += ", not ready"
    parts.append(f"restarts {s.get('restartCount', 0)}")
    if last := (s.get("lastState") or {}).get("terminated"):
        parts.append(f"last: {_state_words({'terminated': last})}")
    return "; ".join(parts)


def _state_words(state: dict[str, Any]) -> str:
    if waiting := state.get("waiting"):
        message = f" ({waiting['message']})" if waiting.get("message") else ""
        return f"waiting {waiting.get('reason', '')}{message}"
    if running := state.get("running"):
        return f"running since {running.get('startedAt')}"
    if term := state.get("terminated"):
        said = f" {term['message'].strip()!r}" if term.get("message") else ""
        return f"exit {term.get('exitCode')} ({term.get('reason', '')}) at {term.get('finishedAt')}{said}"
    return "no state yet"


def _previous_attempt(s: dict[str, Any]) -> bool | None:
    """Which attempt's log tells why the container fails: the current one when it ended with an error,
    else the previous one when that did; None when none failed."""
    if (term := (s.get("state") or {}).get("terminated")) and term.get("exitCode") not in (0, None):
        return False
    if (last := (s.get("lastState") or {}).get("terminated")) and last.get("exitCode") not in (0, None):
        return True
    return None


def _log_tail(request: Request, ns: str, pod: str, container: str, previous: bool) -> list[str]:
    query = f"container={quote(container)}&tailLines={LOG_LINES}" + ("&previous=true" if previous else "")
    status, _, body = request("GET", f"/api/v1/namespaces/{ns}/pods/{pod}/log?{query}")
    which = "previous attempt" if previous else "last attempt"
    if status != 200:
        return [f"({which}'s log: {status} {str(body)[:200]})"]
    text = body if isinstance(body, str) else str(body)
    return (
        [f"({which}'s last lines)", *text.splitlines()[-LOG_LINES:]]
        if text.strip()
        else [f"({which}: no log)"]
    )


def _warnings(request: Request, ns: str, pod: str) -> list[str]:
    selector = quote(f"involvedObject.name={pod},type=Warning")
    status, _, body = request("GET", f"/api/v1/namespaces/{ns}/events?fieldSelector={selector}")
    if status != 200 or not isinstance(body, dict):
        return []
    events = sorted(body.get("items") or [], key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return [
        f"{e.get('reason')}: {e.get('message')}" + (f" (x{e['count']})" if (e.get("count") or 1) > 1 else "")
        for e in events[-EVENTS_PER_POD:]
    ]


def _nodes(request: Request) -> list[str]:
    status, _, body = request("GET", "/api/v1/nodes")
    if status != 200 or not isinstance(body, dict):
        return [f"nodes: {status} {str(body)[:200]}"]
    lines = []
    for node in body.get("items") or []:
        ready = _condition(node, "Ready")
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        if ready.get("status") != "True" or cordoned:
            why = " ".join(str(ready[k]) for k in ("reason", "message") if ready.get(k))
            said = (
                f"Ready={ready.get('status')}"
                + (f" {why}" if why else "")
                + (", cordoned" if cordoned else "")
            )
            lines.append(f"node {node['metadata']['name']}: {said}")
    return lines
