"""A waited-for job as the wait sees it, the I/O behind ``waiting.loop``'s seam for the trigger and the
worker's wait alike: the job's next state, its pods and the largest node, over a lease of the shared async
client, and the leader's reports from the logs the wait follows. Each adapter adds what is its own (the
trigger its live streams, the worker its kill and its logs) by overriding ``next_state``.

The job's next state comes from the shared watch (``watch``): the job is read once after subscribing (so no
change after that read can be missed), then each event for it is taken as soon as the server sends it,
without a read. The job is read again only when the watch fails: ``410 Expired``, a dropped stream or a
server error (with backoff), or a deletion (the read's 404 ends the wait). An API that refuses the watch, or
five watches in a row that fail, is read every poll interval instead, and watched again after a watch
period. A new state never comes sooner than a short pause after the previous one, so a flood of changes
cannot spin; the job's end, which comes once, is taken at once. Read failures are judged by
``hooks.errors``: transient ones are retried with backoff (up to ``MAX_CONSECUTIVE_ERRORS`` in a row), a 401
retires the shared client so the next lease reloads the credentials (``MAX_REAUTHENTICATIONS`` in a row),
anything else ends the wait.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from t9k_provider.hooks.errors import api_status, backoff_seconds, describe, is_transient
from t9k_provider.jobclient.aio import AsyncJobClient
from t9k_provider.jobclient.queues import QueueReader
from t9k_provider.jobclient.watch import JobWatch
from t9k_provider.jobs.contract import job_queue
from t9k_provider.kube.timeouts import within
from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.queueing import READ_EVERY_POLLS, QueueState
from t9k_provider.waiting.result import WaitResult, deleted

if TYPE_CHECKING:
    from t9k_provider.hooks.async_t9k import AsyncT9kClient
    from t9k_provider.kube.resources import ResourceType
    from t9k_provider.replicalogs.lines import ReplicaLines
    from t9k_provider.waiting.reported import ReportedProgress

#: Consecutive transient API failures tolerated before the wait ends in a retryable error.
MAX_CONSECUTIVE_ERRORS = 20
#: Shortest gap between two looks at the job (a read or a watched change) when changes stream in quickly.
MIN_READ_SPACING_SECONDS = 0.5
#: The outcomes that end a wait: a state that reaches one is never held back by the spacing.
TERMINAL = ("succeeded", "failed")
#: Fresh clients opened after a 401, so expiring exec-plugin tokens are reloaded.
MAX_REAUTHENTICATIONS = 3
#: Failed watches in a row (no event, no long-lived watch between them) after which the wait polls for one
#: watch period before it tries again.
MAX_WATCH_FAILURES = 5


class FollowedLogs(Protocol):
    """The logs a wait follows, as far as the wait reads them: the leader's reports."""

    lines: ReplicaLines

    async def read_recent_reports(self, since: float) -> bool: ...


class JobFeed:
    """``waiting.loop.WaitSeam`` for the job ``namespace/name`` (``uid``: the object the task owns; None: a
    job it only watches), with the leader's reports of ``logs`` (None: not read); ``close`` ends its watch
    and lease. ``alone``: no other wait shares the event loop (the worker's), so the watch is on this job
    only."""

    def __init__(
        self,
        client: Callable[[], AsyncT9kClient],
        credentials: dict[str, Any],
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        uid: str | None,
        pod_selector: str | None,
        poll_interval: float,
        execution_deadline: float | None,
        log: logging.Logger | Any,
        logs: FollowedLogs | None = None,
        alone: bool = False,
    ) -> None:
        self._client = client
        self._credentials = credentials
        self._rt = rt
        self.namespace = namespace
        self.name = name
        self._uid = uid
        self._pod_selector = pod_selector
        self._poll_interval = poll_interval
        self._deadline = execution_deadline
        self._log = log
        self._alone = alone
        self.logs = logs
        self._lease: AsyncT9kClient | None = None
        self._jobs: AsyncJobClient | None = None
        self._watch: JobWatch | None = None
        self._errors = 0
        self._reauthentications = 0
        self._queue = QueueReader(namespace, name, log)

    async def _open(self) -> AsyncJobClient:
        if self._jobs is None:
            lease = self._client()
            await lease.__aenter__()
            self._lease = lease
            self._jobs = AsyncJobClient(lease.api, self._rt, self.namespace, self.name)
            self._watch = JobWatch(
                self._client, self._credentials, self._rt, self.namespace, self.name, alone=self._alone
            )
        return self._jobs

    async def close(self) -> None:
        """Leave the watch and give the lease back; the feed opens them again if asked for more."""
        watch, lease = self._watch, self._lease
        self._watch = self._lease = self._jobs = None
        try:
            if watch is not None:
                await watch.stop()
        finally:
            if lease is not None:
                await lease.__aexit__(None, None, None)

    async def pods(self) -> list[dict[str, Any]]:
        return await (await self._open()).pods(self._pod_selector, self._log)

    async def largest_node(self) -> dict[str, int] | None:
        return await (await self._open()).largest_node(self._log)

    async def cordoned_nodes(self) -> set[str]:
        return await (await self._open()).cordoned_nodes(self._log)

    async def recent_reports(self, since: float) -> bool:
        return await self.logs.read_recent_reports(since) if self.logs is not None else True

    def progress(self) -> ReportedProgress | None:
        return self.logs.lines.progress if self.logs is not None else None

    async def queue(self, job: dict[str, Any]) -> QueueState | None:
        name = job_queue(job)
        if name is None:
            return None
        api = (await self._open()).api
        return await self._queue.read(api, name, READ_EVERY_POLLS * self._poll_interval)

    async def next_state(self, job: dict[str, Any] | None, window: float) -> dict[str, Any] | WaitResult:
        """``waiting.loop.WaitSeam.next_state``: the job read at once for None (or before the feed watches),
        else what the watch brings within ``window``; a ``WaitResult`` once reading it cannot go on."""
        state = await self._watched(job, window) if job is not None and self._watch is not None else None
        while state is None:
            jobs = await self._open()
            watch = self._watch
            assert watch is not None
            if not watch.running and not watch.disabled:
                await watch.subscribe()  # before the read: no change after it is missed
            try:
                state = await jobs.read()
            except Exception as exc:
                if api_status(exc) == 401 and self._reauthentications < MAX_REAUTHENTICATIONS:
                    self._reauthentications += 1
                    if self._lease is not None:
                        self._lease.reauthenticate()
                    await self.close()  # the next lease builds a client with reloaded credentials
                    continue
                ending = self._read_failed(exc)
                if ending is not None:
                    return ending
                self._errors += 1
                await asyncio.sleep(backoff_seconds(self._errors, exc))
                continue
            self._errors = self._reauthentications = 0
            watch.looked_at = time.monotonic()
            watch.seen(state)
        return state

    def _read_failed(self, exc: BaseException) -> WaitResult | None:
        """What ends the wait after a failed read, or None to retry it (``self._errors`` so far)."""
        status = api_status(exc)
        if status == 404:
            return deleted(self.namespace, self.name, owned=self._uid is not None)
        if not is_transient(exc) or self._errors >= MAX_CONSECUTIVE_ERRORS:
            return WaitResult(
                "error",
                f"reading job {self.name}: {describe(exc)}",
                # 401: a new try resolves the connection afresh on a worker
                retryable=is_transient(exc) or status == 401,
            )
        self._log.warning("transient error reading job %s (%s): %s", self.name, self._errors + 1, exc)
        if self._deadline is not None and time.time() >= self._deadline:
            return WaitResult("timeout", "execution_timeout reached while the API was unreachable")
        return None

    async def _watched(self, job: dict[str, Any], delay: float) -> dict[str, Any] | None:
        """The job's next state from the watch: what it brought, ``job`` again after ``delay`` (nothing
        changed: only the deadlines moved), or None when the job must be read (no watch, or it failed)."""
        watch = self._watch
        assert watch is not None
        if not watch.running and not watch.changed.is_set():
            if watch.disabled:  # no watch: poll, also where a watched wait would look only at its deadlines
                await asyncio.sleep(min(delay, self._poll_interval))
            # else not subscribed yet (another read opened the feed first, the worker's pods say): subscribe
            # and read now, or the job's end would wait a whole window for the next read
            return None
        try:
            await within(watch.changed.wait(), delay)
        except asyncio.TimeoutError:
            return job
        watch.changed.clear()  # what arrives from here on starts the next round
        # A job's end comes once, so it cannot flood: it is taken at once. A short job's whole life fits in
        # the spacing, which would otherwise add itself to every task
        # (docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators).
        latest = watch.latest
        ended = latest is not None and not watch.deleted and job_status.outcome(latest) in TERMINAL
        pause = 0.0 if ended else MIN_READ_SPACING_SECONDS - (time.monotonic() - watch.looked_at)
        failure = watch.failure
        if failure is not None:
            status = api_status(failure)
            self._log.debug("watch on job %s ended: %s", self.name, failure)
            failures = watch.count_failure()
            if (status not in (401, 410) and not is_transient(failure)) or failures >= MAX_WATCH_FAILURES:
                watch.disable()  # no watch permission or support, or it keeps failing: poll for a while
                self._log.warning(
                    "cannot watch job %s (%s); reading it every %gs instead", self.name, failure,
                    self._poll_interval,
                )  # fmt: skip
            else:  # jittered: every wait on a failed shared watch reads its job, not all at once
                pause = max(pause, min(delay, backoff_seconds(failures, failure)))
        if pause > 0 and failure is not None:
            await asyncio.sleep(pause)  # the failure's backoff
        elif pause > 0:
            await _spaced(watch, pause)
        if watch.failure is not None or watch.deleted or watch.latest is None:
            return None  # read it: a failed watch restarts from that read; a deletion shows as 404
        watch.looked_at = time.monotonic()
        return watch.latest


def _final(watch: JobWatch) -> bool:
    """Whether what the watch holds ends the wait: the job's end, its deletion or the watch's failure."""
    latest = watch.latest
    ended = latest is not None and job_status.outcome(latest) in TERMINAL
    return watch.failure is not None or watch.deleted or ended


async def _spaced(watch: JobWatch, seconds: float) -> None:
    """The spacing pause before a new state is taken, cut short when the job's end (or its deletion, or the
    watch's failure) arrives meanwhile: a job that starts and ends within the spacing is seen ending at
    once. The changes that arrive during the pause are taken with the state after it (``watch.latest``)."""
    deadline = time.monotonic() + seconds
    while not _final(watch) and (left := deadline - time.monotonic()) > 0:
        try:
            await within(watch.changed.wait(), left)
        except asyncio.TimeoutError:
            return
        if not _final(watch):
            watch.changed.clear()  # taken with the state after the pause; what ends the wait stays news
