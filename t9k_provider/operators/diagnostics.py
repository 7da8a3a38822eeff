"""What to tell the user when a job failed or a wait limit hit: the first things they would look up.

The replica that failed first leads (by its container's termination time; within the same second, by the
time of its last log line), with how it ended and its last log lines, then the replicas that failed after
it, briefly. Then the conditions, why pods are stuck in Pending and recent events. Gathered best-effort (a
diagnostic that cannot be read is reported, never raised).
"""

from __future__ import annotations

import logging
import math
import re
import signal
from datetime import datetime
from typing import Any, NamedTuple

from t9k_provider.kube.podlogs import parse_lines
from t9k_provider.kube.timestamps import parse_time, rfc3339
from t9k_provider.replicalogs.follower import LogFollower
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.waiting import status as job_status

#: Most recent events shown per object.
EVENTS_PER_OBJECT = 10
#: Failed replicas whose last log line is read: to order those that ended in the same second, and to show
#: the ones that failed after the first.
LAST_LINES_READ = 6
#: Replicas listed after the first one that failed ("and N more" beyond).
LISTED_AFTER_FIRST = 5
#: Lines read back from each of those, for one that says something.
LAST_LINE_TAIL = 5
MARKER = re.compile(r"[A-Z][A-Z0-9_]*")
LAST_LINE_CHARS = 200


def _says_no_more(reason: str) -> bool:
    """Whether a container's termination reason (Kubernetes' words, not a T9k status) says no more than its
    exit code."""
    return reason in ("", "Error", "Completed")


class Ended(NamedTuple):
    """A replica pod that failed: its failed container, when and how it ended (None: no container exit)."""

    pod: str
    container: str | None
    finished: datetime | None
    how: str


class Report(NamedTuple):
    """``lead``: how the first failing replica ended (None if no pod says); ``text``: the report's lines;
    ``first``: that replica's pod."""

    lead: str | None
    text: str
    first: str | None


def failure_report(
    hook: Any,
    kind: str,
    namespace: str,
    name: str,
    job: dict[str, Any],
    log_lines: int,
    log: logging.Logger | Any,
    pods: list[dict[str, Any]] | Exception,
) -> Report:
    """``pods``: the job's pods as listed for this conclusion, or why they could not be."""
    if isinstance(pods, Exception):
        by_name: dict[str, dict[str, Any]] = {}
        unavailable = [f"pods unavailable: {pods}"]
    else:
        by_name, unavailable = {p["metadata"]["name"]: p for p in pods}, []
    selector = pod_selector(kind, name)
    reader = LogFollower(hook, namespace, selector, lambda _: True, log=log)
    ended = in_failure_order(hook, namespace, failed_pods(list(by_name.values())))
    lines: list[str] = []
    lead, first = None, None
    if ended:
        (first_ended, _), after = ended[0], ended[1:]
        first = first_ended.pod
        lead = (
            f"{first} failed{' first' if after else ''}, at {_when(first_ended.finished)}: {first_ended.how}"
        )
        lines += _last_lines(reader, by_name, first, log_lines, first_ended.container)
        lines += _after_first(first_ended, after)
    lines.append(f"phase: {job_status.phase(job) or 'unset'}")
    lines += [
        f"condition {c['type']}={c.get('status')}: {c.get('reason', '')} {c.get('message', '')}".rstrip()
        for c in job_status.conditions(job)
    ]
    lines += unavailable
    failed = [first] if first else job_status.failed_replicas(job)[:1]
    stuck = [n for n, p in sorted(by_name.items()) if (p.get("status") or {}).get("phase") == "Pending"][:2]
    for pod_name in stuck:
        lines += [f"pod {pod_name} Pending: {why}" for why in waiting_reasons(by_name[pod_name])]
    if not first:
        for pod_name in failed:
            lines += _last_lines(reader, by_name, pod_name, log_lines)
    for involved in [name, *failed, *(n for n in stuck if n not in failed)]:
        lines += _events(hook, namespace, involved)
    return Report(lead, "\n".join(lines), first)


def failed_pods(pods: list[dict[str, Any]]) -> list[Ended]:
    """The pods that failed, in the order their failed containers terminated (pods without one last)."""
    found = []
    for pod in pods:
        status = pod.get("status") or {}
        exits = [
            (parse_time(t.get("finishedAt")), cs.get("name"), t)
            for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
            if (t := _failed_termination(cs)) is not None
        ]
        name = pod["metadata"]["name"]
        if exits:
            finished, container, terminated = min(exits, key=lambda e: _order(e[0]))
            found.append(Ended(name, container, finished, how_it_ended(terminated)))
        elif status.get("phase") == "Failed":
            reason = ": ".join(str(v) for v in (status.get("reason"), status.get("message")) if v)
            found.append(Ended(name, None, None, reason or "pod Failed"))
    return sorted(found, key=lambda e: (_order(e.finished), e.pod))


def how_it_ended(terminated: dict[str, Any]) -> str:
    """``OOMKilled (exit code 137)``, ``signal 9 (SIGKILL), exit code 137``, ``exit code 3``, with the
    container's termination message, if it wrote one."""
    code, reason = terminated.get("exitCode"), str(terminated.get("reason") or "")
    number = terminated.get("signal") or (code - 128 if isinstance(code, int) and code > 128 else None)
    if not _says_no_more(reason):
        how = f"{reason} (exit code {code})" if code is not None else reason
    elif number:
        how = f"signal {number} ({_signal_name(number)}), exit code {code}"
    else:
        how = f"exit code {code}"
    message = str(terminated.get("message") or "").strip().splitlines()
    return f"{how}: {message[-1][:LAST_LINE_CHARS]}" if message else how


def in_failure_order(hook: Any, namespace: str, ended: list[Ended]) -> list[tuple[Ended, str | None]]:
    """``ended`` (in termination order) with the last log line of the first ``LAST_LINES_READ``; those that
    ended in the same second as each other are ordered by the time of that line (kubelets write whole
    seconds, ranks that fail together do so within one)."""
    read = [
        (item, *(_last_line(hook, namespace, item) if index < LAST_LINES_READ else (None, math.inf)))
        for index, item in enumerate(ended)
    ]
    read.sort(key=lambda r: (_order(r[0].finished), r[2]))
    return [(item, line) for item, line, _ in read]


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


def _failed_termination(cs: dict[str, Any]) -> dict[str, Any] | None:
    """The container's failed exit: its terminated state, or the last one while it waits to restart."""
    state = cs.get("state") or {}
    terminated = state.get("terminated") or (
        (cs.get("lastState") or {}).get("terminated") if state.get("waiting") is not None else None
    )
    if terminated and (terminated.get("exitCode") or 0) != 0:
        return terminated
    return None


def _order(moment: datetime | None) -> tuple[bool, float]:
    return (moment is None, moment.timestamp() if moment else 0.0)


def _when(moment: datetime | None) -> str:
    return rfc3339(moment) if moment else "an unknown time"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _last_line(hook: Any, namespace: str, ended: Ended) -> tuple[str | None, float]:
    """The failed container's last line that says something (a bare marker, one upper-case word such as the
    TaskFlow runner's ``T9K_TASKFLOW_ERROR_END``, does not), and when its very last line was written."""
    if ended.container is None:
        return None, math.inf
    try:
        text = hook.read_pod_log(namespace, ended.pod, ended.container, tail_lines=LAST_LINE_TAIL)
    except Exception:
        return None, math.inf  # its last lines are read again (and the failure shown) if it leads
    lines = [line for line in parse_lines(text) if line.text.strip()]
    telling = [line.text.strip() for line in lines if not MARKER.fullmatch(line.text.strip())]
    return (telling[-1] if telling else None), (lines[-1].timestamp_ns if lines else math.inf)


def _last_lines(
    reader: LogFollower, pods: dict[str, Any], pod_name: str, count: int, failed: str | None = None
) -> list[str]:
    """The pod's containers' last lines; a failed init container's first."""
    spec = (pods.get(pod_name) or {}).get("spec") or {}
    containers = [c["name"] for c in spec.get("containers") or []]
    if failed and failed not in containers:
        containers.insert(0, failed)
    return [f"last {count} log lines of {pod_name}:", *reader.tail(pod_name, containers, count)]


def _after_first(first: Ended, after: list[tuple[Ended, str | None]]) -> list[str]:
    """The replicas that failed after the first, briefly: when, how and their last line."""
    if not after:
        return []
    lines = ["then, after it:"]
    for item, line in after[:LISTED_AFTER_FIRST]:
        seconds = (
            (item.finished - first.finished).total_seconds() if item.finished and first.finished else None
        )
        when = "later" if seconds is None else f"{seconds:.0f} s later" if seconds else "in the same second"
        last = f"; last line: {line.strip()[:LAST_LINE_CHARS]}" if line else ""
        lines.append(f"  {item.pod}, {when}: {item.how}{last}")
    if len(after) > LISTED_AFTER_FIRST:
        lines.append(f"  and {len(after) - LISTED_AFTER_FIRST} more")
    return lines


def _events(hook: Any, namespace: str, name: str) -> list[str]:
    try:
        events = hook.list_events(namespace, name)
    except Exception as exc:
        return [f"events of {name} unavailable: {exc}"]
    return [
        f"event {name}: {e.get('type')} {e.get('reason')}: {e.get('message')}"
        for e in events[-EVENTS_PER_OBJECT:]
    ]
