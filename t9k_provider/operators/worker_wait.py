"""The wait for a job in the worker: the one wait (``waiting.loop``), the trigger's, run on an event loop
thread of the task's own, which also carries the replica logs' live streams. Its seam is the trigger's too
(the job's states from ``jobclient.feed``, on a watch of this one job), plus the task's kill: checked before
and after every state, so a killed task never reports a success."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from t9k_provider.jobclient.client import JobClient
from t9k_provider.jobclient.feed import JobFeed
from t9k_provider.jobclient.identity import JobRef
from t9k_provider.operators.kill import KillSwitch
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.replicalogs.waitlogs import WaitLogs
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.loop import wait
from t9k_provider.waiting.result import WaitResult
from t9k_provider.waiting.step import WaitMemory

T = TypeVar("T")

#: While a followed container has not started, the worker looks at the pods this often (the job's status
#: may not change when a container starts).
STARTING_LOOK_SECONDS = 0.5
#: How long the wait's event loop may take to wind down (streams, watch, client) once the wait is over.
CLOSE_TIMEOUT_SECONDS = 30.0
#: The event loop thread's name: it lives for one wait in the worker.
THREAD_NAME = "t9k-wait"


class WorkerWait:
    def __init__(
        self,
        client: JobClient,
        ref: JobRef,
        limits: WaitLimits,
        logs: WaitLogs | None,
        *,
        poll_interval: float,
        kill: KillSwitch,
        log: logging.Logger | Any,
    ) -> None:
        self.client = client
        self.ref = ref
        self.limits = limits
        self.logs = logs
        self.poll_interval = poll_interval
        self.kill = kill
        self.log = log

    def run(self, job: dict[str, Any], until: float | None, earlier: WaitResult | None = None) -> WaitResult:
        """Wait from ``job`` (a fresh state) until the wait ends, or hands back (``running``) once ``until``
        (epoch seconds) passed; the replicas' live streams stop with it, after the last lines of a job that
        ended. ``earlier``: an earlier wait's hand-back (the disruptions it said, what it saw of a Queue)."""
        loop = _LoopThread()
        try:
            return loop.run(self._wait(job, until, earlier))
        finally:
            loop.close()

    async def _wait(self, job: dict[str, Any], until: float | None, earlier: WaitResult | None) -> WaitResult:
        hook, ref = self.client.hook, self.ref
        seam = _WorkerSeam(
            hook.async_client, hook.credentials, ref.resource, ref.namespace, ref.name, uid=ref.uid,
            pod_selector=pod_selector(ref.kind, ref.name), poll_interval=self.poll_interval,
            execution_deadline=self.limits.execution_deadline, log=self.log, logs=self.logs, alone=True,
            first=job, check_killed=self._check_killed,
        )  # fmt: skip
        ended = False
        try:
            async with hook.async_client() as lease:  # the streams' and the reports' reads
                if self.logs is not None:
                    self.logs.attach(lease.api)
                try:
                    memory = WaitMemory.resuming(time.time(), until, earlier)
                    result = await wait(
                        seam, self.limits, memory, uid=ref.uid, poll_interval=self.poll_interval, log=self.log
                    )
                    ended = result.job_ended
                    return result
                finally:
                    if self.logs is not None:  # every line of the ended replicas before the verdict
                        await self.logs.close_streams(drain=ended)
        finally:
            await seam.close()

    def _check_killed(self) -> None:
        self.kill.check(lambda: self.client)


class _WorkerSeam(JobFeed):
    """The worker's side of the wait (``waiting.loop.WaitSeam``): the feed, from ``first`` (the state the
    wait starts from), the kill checked before and after each state, and the replica logs caught up with
    it."""

    logs: WaitLogs | None

    def __init__(
        self, *args: Any, first: dict[str, Any], check_killed: Callable[[], None], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.first: dict[str, Any] | None = first
        self.check_killed = check_killed

    async def next_state(self, job: dict[str, Any] | None, window: float) -> dict[str, Any] | WaitResult:
        self.check_killed()
        if job is None and self.first is not None:
            state: dict[str, Any] | WaitResult = self.first
            self.first = None
        else:
            if self.logs is not None and self.logs.starting:
                window = min(window, STARTING_LOOK_SECONDS)
            state = await super().next_state(job, window)
        self.check_killed()  # a job the kill deleted is the kill's to report
        if self.logs is not None and not isinstance(state, WaitResult):
            await self.logs.look(state)
        return state


class _LoopThread:
    """An event loop on a thread of its own: the wait runs there while the task's thread waits for its
    result (and takes a kill's signal, which stops the job at once)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # Airflow 2's SIGTERM handler raised here: the wait winds down in ``close``
            raise

    def close(self) -> None:
        """Let what the wait leaves (a cancelled wait's clean-up, a client closing) finish, bounded, then stop
        the loop and its thread."""
        settled = asyncio.run_coroutine_threadsafe(_settle(CLOSE_TIMEOUT_SECONDS), self.loop)
        try:
            settled.result(CLOSE_TIMEOUT_SECONDS + 1)
        except Exception as exc:
            logging.getLogger(__name__).debug("winding down the wait's event loop: %s", exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CLOSE_TIMEOUT_SECONDS)
        if not self._thread.is_alive():
            self.loop.close()


async def _settle(timeout: float) -> None:
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    if others:
        await asyncio.wait(others, timeout=timeout)
