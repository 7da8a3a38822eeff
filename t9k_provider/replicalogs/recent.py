"""The leader's recent progress reports, read to the present: what a stall verdict waits for.

A live stream delivers a report some time after it was written, and a stream that has just opened (a
triggerer restart, a trigger picked up late, a new try adopting a running job) has delivered nothing yet: a
stall called on what the streams brought so far could stop a training that reports every second. So before a
verdict (``waiting.step``'s ``read_progress``) the leader's log is read once, up to now, from
``WaitLimits.reports_since``: one request per leader container, made only when a job looks stalled.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.kube.timestamps import rfc3339
from t9k_provider.replicalogs.follower import started_containers
from t9k_provider.replicalogs.lines import ReplicaLines

if TYPE_CHECKING:
    from t9k_provider.kube.api import KubeApi

#: A read this full did not reach the present: no verdict on it (a replica this chatty is not hung).
LIMIT_BYTES = pod_logs.MAX_READ_LIMIT_BYTES


def _leader_containers(pods: list[dict[str, Any]], lines: ReplicaLines) -> list[tuple[dict[str, Any], str]]:
    leader = lines.leader
    if leader is None:
        return []
    found = []
    for pod in pods:
        if leader.matches((pod.get("metadata") or {}).get("labels") or {}):
            found.extend((pod, container) for container in started_containers(pod))
    return found


def _take(lines: ReplicaLines, pod: dict[str, Any], text: str) -> bool:
    """Take the reports of one read; whether it reached the present."""
    lines.take_reports((pod.get("metadata") or {}).get("labels") or {}, pod_logs.parse_lines(text))
    return len(text.encode()) < LIMIT_BYTES


async def read(
    api: KubeApi, namespace: str, selector: str, lines: ReplicaLines, since: float, log: logging.Logger | Any
) -> bool:
    """Read the leader's reports since ``since`` (epoch seconds) into ``lines``; whether every read reached
    the present. A failure is False (no verdict on it) and a warning: the next look reads again."""
    from t9k_provider.kube.resources import PODS

    try:
        pods, _ = await api.list(PODS, namespace, label_selector=selector)
        whole = True
        for pod, container in _leader_containers(pods, lines):
            name = pod["metadata"]["name"]
            text = await api.read_log(
                namespace, name, container, since_time=rfc3339(int(since)), limit_bytes=LIMIT_BYTES
            )
            whole = _take(lines, pod, text) and whole
        return whole
    except Exception as exc:
        log.warning("cannot read the leader's log to confirm a stall: %s", exc)
        return False
