"""Live replica logs in the worker: the triggerer's ``ReplicaLogs`` on an event loop thread of its own.

Batch reads at each status change print a replica's lines in bursts and miss the last ones when a cleanup
policy deletes the pod (its log with it) as the job ends. One ``follow=true`` stream per followed container,
opened as soon as the job shows it started, prints each line as it is written and delivers every line
before its EOF, whatever the job's status watch does. The worker's wait loop hands it each state of the job
(``sync``); ``finish`` lets the streams end by themselves (bounded), stops them and returns the cursors the
trigger or the final pass continue from. Log trouble never fails the task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any

from t9k_provider.hooks.async_t9k import AsyncT9kClient
from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.replicalogs.lines import ReplicaLines
from t9k_provider.replicalogs.streams import ReplicaLogs
from t9k_provider.replicalogs.targets import ReplicaTarget

#: While a followed container has not started, the worker looks at the pods this often (the job's status
#: may not change when a container starts).
STARTING_LOOK_SECONDS = 0.5
#: Bound on one call into the stream thread (opening the client, listing pods, stopping the streams).
CALL_TIMEOUT_SECONDS = 30.0
#: The stream thread's name: it lives from the job's submission to the end of the task's wait.
THREAD_NAME = "t9k-replica-logs"


class WorkerLogStreams:
    def __init__(
        self,
        credentials: dict[str, Any],
        log: logging.Logger,
        namespace: str,
        pod_selector: str,
        targets: list[ReplicaTarget],
        cursors: dict[str, pod_logs.Cursor],
        lines: ReplicaLines,
    ) -> None:
        self.log = log
        self.lines = lines
        self.cursors: dict[str, pod_logs.Cursor] = dict(cursors)
        self._client = AsyncT9kClient(credentials)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=THREAD_NAME, daemon=True)
        self._thread.start()
        self._logs: ReplicaLogs | None = None
        try:
            self._logs = self._call(self._open(namespace, pod_selector, targets))
        except Exception as exc:
            self.log.warning("cannot follow replica logs live (printed at the end instead): %s", exc)

    async def _open(self, namespace: str, pod_selector: str, targets: list[ReplicaTarget]) -> ReplicaLogs:
        lease = await self._client.__aenter__()
        return ReplicaLogs(lease.api, self.log, namespace, pod_selector, targets, self.cursors, self.lines)

    def _call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(CALL_TIMEOUT_SECONDS)
        except concurrent.futures.TimeoutError:
            future.cancel()  # a lease still being opened is then closed as soon as its client is built
            raise

    @property
    def live(self) -> bool:
        """The streams could be set up (a client for the connection was built)."""
        return self._logs is not None

    @property
    def starting(self) -> bool:
        """A followed container has not started yet: the wait loop looks again soon."""
        return self._logs is not None and self._logs.starting

    def sync(self, job: dict[str, Any]) -> None:
        """Open a stream for each followed container that started (pods listed on changes, or while one
        has not started)."""
        if self._logs is None:
            return
        try:
            self._call(self._logs.sync(job, force=self._logs.starting))
        except Exception as exc:
            self.log.debug("cannot sync replica log streams: %s", exc)

    def finish(self, drain_seconds: float) -> dict[str, pod_logs.Cursor]:
        """Give the streams ``drain_seconds`` to reach their EOF, stop them and the thread; the cursors."""
        if self._thread.is_alive():
            try:
                self._call(self._finish(drain_seconds))
            except Exception as exc:
                self.log.debug("stopping replica log streams: %s", exc)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(CALL_TIMEOUT_SECONDS)
            if not self._thread.is_alive():
                self._loop.close()
        return self.cursors

    async def _finish(self, drain_seconds: float) -> None:
        logs, self._logs = self._logs, None
        try:
            if logs is not None:
                try:
                    if drain_seconds > 0:
                        await logs.drain(drain_seconds)
                finally:
                    await logs.stop()
                self.cursors = logs.cursors
        finally:
            await self._client.__aexit__(None, None, None)  # the client's connections close with the lease
