"""The replica logs of one wait in the worker: live streams where a client for them can be built, otherwise
the follower's reads at each change; either way the follower's last pass continues from where the streams
stopped, so no line is printed twice or lost. Both hand their lines to one ``ReplicaLines``, which keeps the
leader's progress reports."""

from __future__ import annotations

import logging
from typing import Any

from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.replicalogs import recent
from t9k_provider.replicalogs.follower import LogFollower
from t9k_provider.replicalogs.lines import ReplicaLines
from t9k_provider.replicalogs.streams import DRAIN_SECONDS
from t9k_provider.replicalogs.targets import Followed, ReplicaTarget, pod_selector
from t9k_provider.replicalogs.worker import WorkerLogStreams
from t9k_provider.waiting.reported import ReportedProgress


class WaitLogs:
    def __init__(
        self,
        hook: Any,
        kind: str,
        namespace: str,
        name: str,
        targets: list[ReplicaTarget],
        cursors: dict[str, pod_logs.Cursor],
        log: logging.Logger | Any,
        *,
        live: bool,
        lines: ReplicaLines,
    ) -> None:
        selector = pod_selector(kind, name)
        self.lines = lines
        self.follower = LogFollower(
            hook, namespace, selector, lambda labels: any(t.matches(labels) for t in targets), cursors, log,
            lines,
        )  # fmt: skip
        self._streams: WorkerLogStreams | None = None
        if live:
            streams = WorkerLogStreams(hook.credentials, log, namespace, selector, targets, cursors, lines)
            if streams.live:
                self._streams = streams
            else:
                streams.finish(0.0)

    @classmethod
    def for_wait(
        cls,
        hook: Any,
        ref: Any,
        followed: Followed,
        cursors: dict[str, pod_logs.Cursor],
        progress: dict[str, Any] | None,
        log: logging.Logger | Any,
        live: bool,
    ) -> WaitLogs:
        """The logs of a wait for the job ``ref`` (a ``JobRef``) from ``cursors``, the leader's progress
        adding to ``progress`` (what came before: ``ReportedProgress.to_json``)."""
        lines = ReplicaLines(log, followed.leader, ReportedProgress.from_json(progress))
        return cls(
            hook, ref.kind, ref.namespace, ref.name, followed.targets, cursors, log, live=live, lines=lines
        )

    @property
    def cursors(self) -> dict[str, pod_logs.Cursor]:
        return self.follower.cursors

    @property
    def starting(self) -> bool:
        """A followed container has not started yet: look again soon, its stream opens when it does."""
        return self._streams is not None and self._streams.starting

    def look(self, job: dict[str, Any]) -> None:
        """Print what the replicas wrote since the last look (streams print on their own: they only learn
        which containers started)."""
        if self._streams is not None:
            self._streams.sync(job)
        else:
            self.follower.poll()

    def finish(self, *, drain: bool) -> None:
        """Stop the streams, after their last lines (bounded) when ``drain``; idempotent."""
        streams, self._streams = self._streams, None
        if streams is not None:
            self.follower.cursors.update(streams.finish(DRAIN_SECONDS if drain else 0.0))

    def read_recent_reports(self, since: float, log: logging.Logger | Any) -> bool:
        """The leader's reports since ``since``, read to the present (``recent``); whether that succeeded."""
        follower = self.follower
        return recent.read_sync(
            follower.hook, follower.namespace, follower.label_selector, self.lines, since, log
        )

    def print_new(self) -> None:
        """The final pass: every line not printed yet (from where the streams stopped: they stop first), and
        the latest progress."""
        self.finish(drain=False)
        self.follower.poll()
        self.lines.flush()
