"""The replica logs of one wait in the worker: live streams (the trigger's ``ReplicaLogs``) on the wait's
event loop while it waits, or else the follower's reads at each look; either way the follower's last pass
continues from where the streams stopped, so no line is printed twice or lost. Both hand their lines to one
``ReplicaLines``, which keeps the leader's progress reports."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.replicalogs import recent
from t9k_provider.replicalogs.follower import LogFollower
from t9k_provider.replicalogs.lines import ReplicaLines
from t9k_provider.replicalogs.streams import DRAIN_SECONDS, ReplicaLogs
from t9k_provider.replicalogs.targets import Followed
from t9k_provider.waiting.reported import ReportedProgress

if TYPE_CHECKING:
    from t9k_provider.kube.api import KubeApi


class WaitLogs:
    def __init__(
        self,
        hook: Any,
        namespace: str,
        selector: str,
        followed: Followed,
        cursors: dict[str, pod_logs.Cursor],
        progress: dict[str, Any] | None,
        log: logging.Logger | Any,
        *,
        live: bool,
    ) -> None:
        """The logs of a wait for the job whose pods ``selector`` selects (``targets.pod_selector``) from
        ``cursors``, the leader's progress adding to ``progress`` (what came before:
        ``ReportedProgress.to_json``); ``live``: follow them with streams while the wait runs (a wait that
        only looks once reads them instead)."""
        self.namespace = namespace
        self.selector = selector
        self.targets = followed.targets
        self.live = live
        self.log = log
        self.lines = ReplicaLines(log, followed.leader, ReportedProgress.from_json(progress))
        self.follower = LogFollower(
            hook, namespace, selector, lambda labels: any(t.matches(labels) for t in self.targets),
            cursors, log, self.lines,
        )  # fmt: skip
        self._streams: ReplicaLogs | None = None
        self._api: KubeApi | None = None

    @property
    def cursors(self) -> dict[str, pod_logs.Cursor]:
        return self.follower.cursors

    @property
    def starting(self) -> bool:
        """A followed container has not started yet: look again soon, its stream opens when it does."""
        return self._streams is not None and self._streams.starting

    def attach(self, api: KubeApi) -> None:
        """The wait's client (on its event loop): the leader's recent reports are read over it, and the
        replicas followed live from the cursors, if ``live``."""
        self._api = api
        if self.live:
            self._streams = ReplicaLogs(
                api, self.log, self.namespace, self.selector, self.targets, self.cursors, self.lines
            )

    async def look(self, job: dict[str, Any]) -> None:
        """Print what the replicas wrote since the last look (streams print on their own: they only learn
        which containers started)."""
        if self._streams is not None:
            await self._streams.sync(job, force=self._streams.starting)
        else:
            await asyncio.to_thread(self.follower.poll)

    async def close_streams(self, *, drain: bool) -> None:
        """Stop the streams, after their last lines (bounded) when ``drain``; the follower continues from
        where they stopped."""
        streams, self._streams = self._streams, None
        if streams is None:
            return
        try:
            if drain:
                await streams.drain(DRAIN_SECONDS)
        finally:
            await streams.stop()
            self.follower.cursors.update(streams.cursors)

    async def read_recent_reports(self, since: float) -> bool:
        """The leader's reports since ``since``, read to the present (``recent``); whether that succeeded."""
        if self._api is None:
            raise RuntimeError("WaitLogs.read_recent_reports before attach()")
        return await recent.read(self._api, self.namespace, self.selector, self.lines, since, self.log)

    def print_new(self, pods: list[dict[str, Any]] | None = None) -> None:
        """The final pass, after the wait: every line not printed yet, and the latest progress. ``pods``: the
        job's pods as just listed (None: the pass lists them)."""
        self.follower.poll(pods)
        self.lines.flush()
