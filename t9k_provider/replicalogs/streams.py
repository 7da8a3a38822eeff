"""Live replica logs in the triggerer: follow the selected containers and log their lines as they come.

A trigger's log records reach its task's log (Airflow 3: the triggerer's per-trigger log file; Airflow 2.11:
the ``TriggererHandlerWrapper``, when the task log handler supports it), so a user sees a replica's output
while the task is deferred. Each followed container costs one ``follow=true`` stream on the triggerer's
shared client and no request while it is quiet; the job's own changes (the shared watch) say when a replica
starts, so pods are listed only when the job changed, never on a timer. Per-container cursors (``pod_logs``)
make a reopened stream, and the worker's final log pass after the trigger fired, start after the last line
printed.

Lines must be followed while the replica runs: a cleanup policy (``Unfinished``) deletes a replica still
running when its job succeeds, and its log goes with the pod, so a pass at the end can miss it entirely.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.replicalogs.lines import ReplicaLines
from t9k_provider.replicalogs.targets import ReplicaTarget
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS

if TYPE_CHECKING:
    from t9k_provider.kube.api import KubeApi

#: Streams one trigger keeps open at most; the containers beyond it are printed by the worker at the end.
MAX_STREAMS = 8
#: How long a finished job's log streams may take to deliver their last lines (to their EOF) before the
#: verdict: the worker's and the trigger's.
DRAIN_SECONDS = 3.0
#: Reconnects of one stream after transient failures before it is left to the next change of the job.
MAX_STREAM_FAILURES = 5


def task_log(trigger_log: Any) -> Any:
    """The logger whose records end up in the trigger's task's log here, or None.

    Airflow 3: the trigger's own (the triggerer writes each trigger's records to its task's log;
    ``dag.test()`` logs triggers run in line where it logs the task). Airflow 2.11 in a triggerer: the
    trigger's own if its task log handler supports triggers (``HANDLER_SUPPORTS_TRIGGERER``), else None
    (the worker prints the lines at the end); in line (``dag.test()``, no triggerer) the trigger's records
    go to the root logger, so the lines go to the task loggers' parent (``airflow.task``), whose handlers
    ``dag.test()`` prints.
    """
    if AIRFLOW_V_3_0_PLUS:
        return trigger_log
    from airflow.utils.log.trigger_handler import ctx_indiv_trigger

    if not ctx_indiv_trigger.get(None):
        return logging.getLogger("airflow.task.triggers.replica_logs")
    from airflow.jobs import triggerer_job_runner

    return trigger_log if triggerer_job_runner.HANDLER_SUPPORTS_TRIGGERER else None


class ReplicaLogs:
    """The log streams of one waiting trigger; ``cursors`` holds where each container's output stands."""

    def __init__(
        self,
        api: KubeApi,
        log: logging.Logger,
        namespace: str,
        pod_selector: str,
        targets: list[ReplicaTarget],
        cursors: dict[str, pod_logs.Cursor],
        lines: ReplicaLines | None = None,
    ) -> None:
        """``lines``: where the lines go (default: the task log, no progress)."""
        self.api = api
        self.log = log
        self.lines = lines or ReplicaLines(log)
        self.namespace = namespace
        self.pod_selector = pod_selector
        self.targets = targets
        self.cursors = dict(cursors)
        self._streams: dict[str, asyncio.Task[None]] = {}
        #: restart count of each container when its stream was opened: a finished one is not reopened
        self._opened_at_restart: dict[str, int] = {}
        self._synced_version: str | None = None
        #: a followed container has not started yet (or none exists), as of the last listing: the job may not
        #: change when one starts, so a caller that can afford it lists again soon (``sync(job, force=True)``)
        self.starting = True

    async def sync(self, job: dict[str, Any], force: bool = False) -> None:
        """Open a stream for every selected container that has started and is not followed yet.

        Called with each state of the job; pods are listed only when the job changed since the last call
        (or with ``force``).
        """
        from t9k_provider.kube.resources import PODS

        version = (job.get("metadata") or {}).get("resourceVersion")
        if version is not None and version == self._synced_version and not force:
            return
        self._synced_version = version
        try:
            pods, _ = await self.api.list(PODS, self.namespace, label_selector=self.pod_selector)
        except Exception as exc:  # the next change of the job tries again; logs never fail the task
            self.log.debug("cannot list the pods of %s for logs: %s", self.pod_selector, exc)
            return
        starting = False  # a selected container not started yet, or none listed
        listed = False
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            meta = pod["metadata"]
            if not any(t.matches(meta.get("labels") or {}) for t in self.targets):
                continue
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                listed = True
                starting = not self._open(meta, status) or starting
        self.starting = starting or not listed

    def _open(self, meta: dict[str, Any], status: dict[str, Any]) -> bool:
        """Follow this container of the pod (``meta``) if it started and is not followed; whether it
        started."""
        state = status.get("state") or {}
        if "running" not in state and "terminated" not in state:
            return False  # not started: its log cannot be read yet
        container, restarts = status["name"], int(status.get("restartCount") or 0)
        key = f"{meta.get('uid', '')}/{container}"
        stream = self._streams.get(key)
        if stream is not None and not stream.done():
            return True
        if stream is not None and "terminated" in state and self._opened_at_restart.get(key) == restarts:
            return True  # followed to its end already
        if stream is None and sum(not s.done() for s in self._streams.values()) >= MAX_STREAMS:
            return True
        self._opened_at_restart[key] = restarts
        labels = meta.get("labels") or {}
        self._streams[key] = asyncio.ensure_future(self._follow(meta["name"], container, labels, key))
        return True

    async def _follow(self, pod: str, container: str, labels: dict[str, str], key: str) -> None:
        from t9k_provider.hooks.errors import api_status, backoff_seconds, is_transient

        failures = 0
        while True:
            resume = pod_logs.Resume(self.cursors.get(key))
            previous_ns = 0
            try:
                async for raw in self.api.follow_log(
                    self.namespace, pod, container, since_time=pod_logs.since_time(resume.cursor)
                ):
                    line = pod_logs.parse_line(raw, previous_ns)
                    previous_ns = line.timestamp_ns
                    if resume.fresh(line):
                        self.lines.take(pod, container, labels, line)
                        self.cursors[key] = resume.cursor  # type: ignore[assignment]
                return  # the container stopped, or the pod is gone
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if api_status(exc) in (400, 404) or not is_transient(exc) or failures > MAX_STREAM_FAILURES:
                    self.log.debug("stopped following %s/%s: %s", pod, container, exc)
                    return
                await asyncio.sleep(backoff_seconds(failures, exc))

    async def read_recent_reports(self, since: float) -> bool:
        """The leader's reports since ``since``, read to the present (``recent``); whether that succeeded."""
        from t9k_provider.replicalogs import recent

        return await recent.read(self.api, self.namespace, self.pod_selector, self.lines, since, self.log)

    async def drain(self, seconds: float) -> None:
        """Give the open streams ``seconds`` to end by themselves (their containers have stopped)."""
        open_streams = [s for s in self._streams.values() if not s.done()]
        if open_streams:
            await asyncio.wait(open_streams, timeout=seconds)

    async def stop(self) -> None:
        for stream in self._streams.values():
            stream.cancel()
        await asyncio.gather(*self._streams.values(), return_exceptions=True)
        self._streams.clear()
