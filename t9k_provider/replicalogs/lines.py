"""Where the followed replicas' lines go: into the task log with a ``[pod/container]`` prefix, except progress
reports (``t9k_provider.progress``), which update the wait's ``ReportedProgress`` when the leader wrote them
and show as one progress line every few seconds instead of one line per report.

The streams (``streams``, in the triggerer or on the worker's stream thread) and the batch reads
(``follower``) both hand their lines here, so the lines a task log shows and the progress a task knows are
the same whichever way they were read; the lock keeps the worker's stream thread and its wait loop apart.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from t9k_provider.kube.podlogs import LogLine
from t9k_provider.progress import Report, parse
from t9k_provider.replicalogs.targets import ReplicaTarget
from t9k_provider.waiting.reported import ReportedProgress


class ReplicaLines:
    def __init__(
        self,
        log: logging.Logger | Any,
        leader: ReplicaTarget | None = None,
        progress: ReportedProgress | None = None,
        *,
        show: bool = True,
    ) -> None:
        """``leader``: the replica whose reports count (None: none does); ``show``: write the lines into the
        task log (False where the triggerer cannot, while the reports still count)."""
        self.log = log
        self.leader = leader
        self.show = show
        self._progress = progress or ReportedProgress()
        self._pending = False  # a report came since the last progress line
        self._lock = threading.Lock()

    @property
    def progress(self) -> ReportedProgress:
        """A copy of what was reported so far."""
        with self._lock:
            return ReportedProgress.from_json(self._progress.to_json())

    def take(self, pod: str, container: str, labels: dict[str, str], line: LogLine) -> None:
        report = parse(line.text)
        if report is None:
            if self.show:
                self.log.info("[%s/%s] %s", pod, container, line.text)
            return
        self._take_report(labels, report, line)

    def take_reports(self, labels: dict[str, str], lines: list[LogLine]) -> None:
        """The progress reports among ``lines`` (a read of the leader's log besides the streams: ``recent``);
        its other lines are the streams' to print."""
        for line in lines:
            if (report := parse(line.text)) is not None:
                self._take_report(labels, report, line)

    def _take_report(self, labels: dict[str, str], report: Report, line: LogLine) -> None:
        if self.leader is None or not self.leader.matches(labels):
            return  # only the leader's reports count; none is a line of the task log
        at = line.timestamp_ns / 1e9 if line.timestamp_ns else time.time()
        with self._lock:
            taken = self._progress.add(report, at)
            self._pending = bool(taken) or self._pending
            if taken == "resumed" and self.show:
                self.log.info("%s", self._progress.resumed_line())
            if self._pending and self._progress.due(time.time()):
                self._write()

    def flush(self) -> None:
        """Write the progress line if a report came since the last one (the wait is ending)."""
        with self._lock:
            if self._pending:
                self._write()

    def _write(self) -> None:
        self._progress.logged_at = time.time()
        self._pending = False
        if self.show:
            self.log.info("%s", self._progress.line())
