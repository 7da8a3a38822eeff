"""The progress of the jobs a queued job waits for: their leaders' reports (``t9k_provider.progress``), read
from their logs for the expected start the queue line says (``waiting.queueing``).

A job ahead is another task's (or no task's): its reports are read here, not followed. Each read continues
from the last line the previous one took (at first, the last ``FIRST_READ_SECONDS``), and what was read is
kept per event loop, so the waits of a triggerer that wait in one Queue read each leader once per interval
between them, not once each.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from t9k_provider.jobs.contract import LABEL_REPLICA_TYPE
from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.kube.timestamps import rfc3339
from t9k_provider.progress import parse
from t9k_provider.replicalogs.follower import started_containers
from t9k_provider.replicalogs.targets import ReplicaTarget
from t9k_provider.waiting.reported import ReportedProgress, duration

if TYPE_CHECKING:
    from t9k_provider.kube.api import KubeApi

#: How far back the first read of a leader's log goes: enough reports for a rate.
FIRST_READ_SECONDS = 600
#: The most one read takes; a chattier log is caught up with over the next reads.
LIMIT_BYTES = 256 * 1024


@dataclass
class _Read:
    progress: ReportedProgress
    #: The timestamp (ns) of the last line taken: the next read starts at its second.
    cursor_ns: int
    at: float


_READS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, str, str], _Read]] = (
    weakref.WeakKeyDictionary()
)


def leader_pod(kind: str, pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pod of the job's leader replica (its kind's ``LEADER``) among the job's ``pods``."""
    from t9k_provider.jobs import KINDS  # the models: only once a wait reads a queue

    model = KINDS.get(kind)
    types = sorted({str((p["metadata"].get("labels") or {}).get(LABEL_REPLICA_TYPE)) for p in pods})
    if model is None or not types:
        return None
    target = ReplicaTarget(*model.LEADER.pick(types))
    return next((p for p in pods if target.matches(p["metadata"].get("labels") or {})), None)


async def progress_of(
    api: KubeApi, pod: dict[str, Any], fresh_for: float, log: logging.Logger | Any
) -> ReportedProgress | None:
    """What the leader ``pod`` reported (None: nothing yet, or its log cannot be read); read again only
    once what was read is ``fresh_for`` seconds old."""
    meta = pod["metadata"]
    containers = started_containers(pod)
    if not containers:
        return None
    key = (id(api), meta.get("namespace", "default"), str(meta.get("uid") or meta["name"]))
    reads = _READS.setdefault(asyncio.get_running_loop(), {})
    known = reads.get(key)
    now = time.time()
    if known is not None and now - known.at < fresh_for:
        return known.progress if known.progress.at is not None else None
    progress = known.progress if known is not None else ReportedProgress()
    cursor = known.cursor_ns if known is not None else int((now - FIRST_READ_SECONDS) * 1e9)
    try:
        text = await api.read_log(
            meta.get("namespace", "default"), meta["name"], containers[0],
            since_time=rfc3339(cursor / 1e9), limit_bytes=LIMIT_BYTES,
        )  # fmt: skip
    except Exception as exc:
        log.debug("cannot read the progress of %s: %s", meta["name"], exc)
        return known.progress if known is not None and known.progress.at is not None else None
    for line in pod_logs.parse_lines(text):
        report = parse(line.text)
        if report is not None and line.timestamp_ns:
            progress.add(report, line.timestamp_ns / 1e9)
        cursor = max(cursor, line.timestamp_ns or cursor)
    reads[key] = _Read(progress, cursor, now)
    return progress if progress.at is not None else None


def ends_at(progress: ReportedProgress) -> float | None:
    """When the training is expected to end: its latest report plus its ETA then."""
    eta = progress.eta()
    return None if eta is None or progress.at is None else progress.at + eta


def summary(progress: ReportedProgress, now: float) -> str:
    """``step 12/40, ETA 0:00:18``: where a job ahead is (its ETA counted to ``now``)."""
    total = f"/{progress.total:g}" if progress.total else ""
    text = f"step {progress.step:g}{total}" if progress.step is not None else "no step yet"
    end = ends_at(progress)
    return text + (f", ETA {duration(max(0.0, end - now))}" if end is not None else "")
