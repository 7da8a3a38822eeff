"""The replica logs of one wait in the worker: live streams where a client for them can be built, otherwise
the follower's reads at each change; either way the follower's last pass continues from where the streams
stopped, so no line is printed twice or lost."""

from __future__ import annotations

import logging
from typing import Any

from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.replicalogs.follower import LogFollower
from t9k_provider.replicalogs.streams import DRAIN_SECONDS
from t9k_provider.replicalogs.targets import ReplicaTarget, pod_selector
from t9k_provider.replicalogs.worker import WorkerLogStreams


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
    ) -> None:
        selector = pod_selector(kind, name)
        self.follower = LogFollower(
            hook, namespace, selector, lambda labels: any(t.matches(labels) for t in targets), cursors, log
        )
        self._streams: WorkerLogStreams | None = None
        if live:
            streams = WorkerLogStreams(hook.credentials, log, namespace, selector, targets, cursors)
            if streams.live:
                self._streams = streams
            else:
                streams.finish(0.0)

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

    def print_new(self) -> None:
        """The final pass: every line not printed yet."""
        self.follower.poll()
