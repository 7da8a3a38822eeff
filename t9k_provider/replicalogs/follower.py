"""Copy replica logs into the task log incrementally, with ``[pod/container]`` prefixes.

Each ``poll()`` lists the job's pods once and reads every selected container from its cursor with bounded
reads, so a dropped connection or a worker re-entry after deferral simply continues where it stopped.
Log trouble is reported and never fails the task: the job's status alone decides the outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.progress import parse as parse_report
from t9k_provider.replicalogs.lines import ReplicaLines

#: Bounded reads per container per poll; with 1 MiB reads this caps one poll at a few MiB per container.
MAX_READS_PER_POLL = 8


class LogFollower:
    def __init__(
        self,
        hook: Any,
        namespace: str,
        label_selector: str,
        select: Callable[[dict[str, str]], bool],
        cursors: dict[str, list[int]] | None = None,
        log: logging.Logger | None = None,
        lines: ReplicaLines | None = None,
    ) -> None:
        """``lines``: where the lines go (default: the task log, no progress)."""
        self.hook = hook
        self.namespace = namespace
        self.label_selector = label_selector
        self.select = select
        self.cursors: dict[str, list[int]] = dict(cursors or {})
        self.log = log or logging.getLogger(__name__)
        self.lines = lines or ReplicaLines(self.log)
        self._read_limits: dict[str, int] = {}
        self._warned: set[str] = set()

    def poll(self, pods: list[dict[str, Any]] | None = None) -> int:
        """Print every new line of the selected containers; return how many lines were printed. ``pods``: the
        pods of the selector as just listed (None: list them)."""
        try:
            pods = self.hook.list_pods(self.namespace, self.label_selector) if pods is None else pods
        except Exception as exc:
            self.log.warning("cannot list pods %s for logs: %s", self.label_selector, exc)
            return 0
        printed = 0
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            if self.select((pod.get("metadata") or {}).get("labels") or {}):
                for container in started_containers(pod):
                    printed += self._drain(pod, container)
        return printed

    def _drain(self, pod: dict[str, Any], container: str) -> int:
        name, uid = pod["metadata"]["name"], pod["metadata"].get("uid", "")
        labels = pod["metadata"].get("labels") or {}
        key = f"{uid}/{container}"
        printed = 0
        for _ in range(MAX_READS_PER_POLL):
            cursor = self.cursors.get(key)
            limit = self._read_limits.get(key, pod_logs.READ_LIMIT_BYTES)
            try:
                text = self.hook.read_pod_log(
                    self.namespace,
                    name,
                    container,
                    since_seconds=pod_logs.since_seconds(cursor, time.time()),
                    limit_bytes=limit,
                )
            except Exception as exc:
                self._report(key, f"cannot read the log of {name}/{container}: {exc}", exc)
                return printed
            lines, moved = pod_logs.advance(pod_logs.parse_lines(text), cursor)
            for line in lines:
                self.lines.take(name, container, labels, line)
            printed += len(lines)
            if moved is not None:
                self.cursors[key] = moved
            full = len(text.encode()) >= limit
            if not full:
                return printed
            if not lines and cursor is not None:
                # Only already-seen lines filled the read: read more, or (over the cap) give up that burst.
                if limit < pod_logs.MAX_READ_LIMIT_BYTES:
                    self._read_limits[key] = limit * 4
                    continue
                self.cursors[key] = pod_logs.skip_to_recent(time.time())
                self.log.warning(
                    "[%s/%s] more log output than can be read back (%d MiB within a few seconds): "
                    "lines before now were skipped",
                    name,
                    container,
                    pod_logs.MAX_READ_LIMIT_BYTES >> 20,
                )
                return printed
        return printed

    def _report(self, key: str, message: str, exc: BaseException) -> None:
        """A container that has not started yet answers 400: expected, so quiet; anything else once loud."""
        if getattr(exc, "status", None) == 400 or key in self._warned:
            self.log.debug("%s", message)
            return
        self._warned.add(key)
        self.log.warning("%s", message)

    def tail(self, pod_name: str, containers: Sequence[str], lines: int) -> list[str]:
        """Last ``lines`` lines of each container of one pod, for failure reports; progress reports are left
        out, as from the task log (the latest shows in the progress line)."""
        out: list[str] = []
        for container in containers:
            try:
                text = self.hook.read_pod_log(self.namespace, pod_name, container, tail_lines=lines)
            except Exception as exc:
                out.append(f"[{pod_name}/{container}] <log unavailable: {exc}>")
                continue
            kept = [line for line in pod_logs.parse_lines(text) if parse_report(line.text) is None]
            out.extend(f"[{pod_name}/{container}] {line.text}" for line in kept)
        return out


def started_containers(pod: dict[str, Any]) -> list[str]:
    """Containers that have (or had) a process, so reading their log cannot fail with 'waiting to start'."""
    started = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = status.get("state") or {}
        last = status.get("lastState") or {}
        if state.get("running") is not None or state.get("terminated") is not None or last.get("terminated"):
            started.append(status["name"])
    return started
