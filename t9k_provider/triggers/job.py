"""``T9kJobTrigger``: wait for a T9k Job in the triggerer without holding a worker slot.

It runs the one wait (``waiting.loop``) through a small seam: the job's states from ``jobclient.feed`` (the
long watch on its job's namespace that all triggers of the triggerer share: a quiet job costs no request at
all), and the live log streams of the replicas it follows. Every ``poll_interval`` the wait re-checks the
absolute deadlines of ``WaitLimits`` on the state it holds (and the job's pods when ``pod_error_timeout`` is
set and a replica has not started). It fires exactly one event, the wait's ``WaitResult``: ``succeeded``,
``failed``, ``timeout``, ``error`` or ``running`` (a periodic hand-back so the worker can print new log
lines). With ``log_targets`` it follows those replicas' logs into the task log while it waits and every
event carries ``log_cursors``: where the worker's final log pass starts. It never buffers logs, and it
deletes the job only when a user kills the task (``on_kill``), never when the triggerer restarts. The
triggers of one triggerer also share one API client (a ``KubeApi`` leased through ``AsyncT9kClient``). What
the kill path needs (a client lease, the imports) is taken when ``run`` starts: ``on_kill`` and ``cleanup``
build nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from t9k_provider.jobclient.aio import AsyncJobClient
from t9k_provider.jobclient.feed import JobFeed
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_3_PLUS
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.loop import wait
from t9k_provider.waiting.reported import ReportedProgress
from t9k_provider.waiting.result import WaitResult
from t9k_provider.waiting.step import WaitMemory

if TYPE_CHECKING:  # the API client and the job models: not at DAG parse
    from t9k_provider.hooks.async_t9k import AsyncT9kClient
    from t9k_provider.jobclient.identity import JobRef
    from t9k_provider.kube.resources import ResourceType
    from t9k_provider.replicalogs.streams import ReplicaLogs
    from t9k_provider.replicalogs.targets import Followed
if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
else:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

#: Airflow 3.3 calls ``BaseTrigger.on_kill`` on user kills; before that only ``cleanup`` runs, on every exit.
TRIGGER_ON_KILL = AIRFLOW_V_3_3_PLUS
#: What the kill path did with the job, as the log says it.
STOPPED = {
    "gone": "already gone",
    "ended": "had already ended; kept",
    "deleted": "deleted",
    "changing": "kept changing; not deleted",
}
#: The constructor's arguments, as ``serialize`` hands them back.
_SERIALIZED = (
    *("credentials", "kind", "plural", "name", "namespace", "uid", "poll_interval", "limits"),
    *("logging_interval", "on_kill_action", "resume", "pod_selector", "log_targets", "log_cursors"),
    *("leader", "progress", "disruptions_seen", "queue"),
)


class T9kJobTrigger(BaseTrigger):
    """Fires when the job is terminal, a limit is hit, or ``logging_interval`` elapsed."""

    def __init__(
        self,
        *,
        credentials: dict[str, Any],
        kind: str,
        plural: str,
        name: str,
        namespace: str,
        uid: str | None = None,
        poll_interval: float = 10.0,
        limits: dict[str, Any] | None = None,
        logging_interval: float | None = None,
        on_kill_action: str = "delete",
        resume: dict[str, Any] | None = None,
        pod_selector: str | None = None,
        log_targets: list[tuple[str | None, int | None]] | None = None,
        log_cursors: dict[str, list[int]] | None = None,
        leader: list[Any] | None = None,
        progress: dict[str, Any] | None = None,
        disruptions_seen: str | None = None,
        queue: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.credentials = credentials
        self.kind = kind
        self.plural = plural
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.poll_interval = poll_interval
        self.limits = dict(limits or {})
        self.logging_interval = logging_interval
        self.on_kill_action = on_kill_action
        #: Small, opaque state of the waiting task, echoed in every event: the task keeps none across defer.
        self.resume = resume
        self.pod_selector = pod_selector
        #: replicas (``ReplicaTarget`` fields) whose logs are followed live; None: none
        self.log_targets = [tuple(t) for t in log_targets] if log_targets is not None else None
        self.log_cursors = dict(log_cursors or {})
        #: the replica (``ReplicaTarget`` fields) whose progress reports count, and what it reported so far
        #: (``ReportedProgress.to_json``): a restarted trigger re-reads the reports after ``log_cursors``
        self.leader = list(leader) if leader else None
        self.progress = progress
        #: the last of the job's disruptions the task's waits said (``waiting.disruptions.cursor``)
        self.disruptions_seen = disruptions_seen
        #: what the task's waits saw of the job's T9k Queue (``waiting.queueing.QueueRecord.to_json``)
        self.queue = queue
        self._fired = False
        #: The lease ``on_kill``/``cleanup`` delete with, taken when ``run`` starts.
        self._kill_client: asyncio.Future[Any] | None = None

    @classmethod
    def for_operator(
        cls,
        ref: JobRef,
        credentials: dict[str, Any],
        limits: WaitLimits,
        followed: Followed,
        cursors: dict[str, list[int]],
        progress: dict[str, Any] | None,
        *,
        poll_interval: float,
        logging_interval: float | None,
        on_kill_action: str,
        follow_logs: bool,
        disruptions_seen: str | None = None,
        queue: dict[str, Any] | None = None,
    ) -> T9kJobTrigger:
        """The trigger an operator defers to for its job ``ref``: ``resume`` carries what the operator needs
        when it resumes, the ``followed`` logs are read from ``cursors`` when ``follow_logs``, the leader's
        progress reports adding to ``progress``."""
        from t9k_provider.replicalogs.targets import pod_selector

        log_targets = [list(t) for t in followed.targets]
        return cls(
            credentials=credentials,
            kind=ref.kind,
            plural=ref.plural,
            name=ref.name,
            namespace=ref.namespace,
            uid=ref.uid,
            poll_interval=poll_interval,
            limits=limits.to_kwargs(),
            logging_interval=logging_interval if follow_logs else None,
            on_kill_action=on_kill_action,
            resume={"job": ref._asdict(), "limits": limits.to_kwargs(), **followed.to_json()},
            pod_selector=pod_selector(ref.kind, ref.name),
            log_targets=log_targets if follow_logs else None,
            log_cursors=cursors,
            leader=list(followed.leader) if followed.leader and follow_logs else None,
            progress=progress,
            disruptions_seen=disruptions_seen,
            queue=queue,
        )

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs = {field: getattr(self, field) for field in _SERIALIZED}
        if self.log_targets is not None:
            kwargs["log_targets"] = [list(t) for t in self.log_targets]
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    def _event(self, result: WaitResult) -> TriggerEvent:
        identity = {"name": self.name, "namespace": self.namespace, "uid": self.uid, "kind": self.kind}
        self._fired = True  # the task resumes on a worker: nothing left for on_kill/cleanup to stop
        payload = {**result.to_event(identity), "resume": self.resume}
        if self.log_targets is not None:
            payload["log_cursors"] = self.log_cursors
        return TriggerEvent(payload)

    def _client(self) -> AsyncT9kClient:
        from t9k_provider.kube.importing import collector_spared

        with collector_spared("t9k_provider.hooks.async_t9k"):
            from t9k_provider.hooks.async_t9k import AsyncT9kClient
        return AsyncT9kClient(self.credentials)

    def _resource(self) -> ResourceType:
        from t9k_provider.jobs.constants import API_VERSION
        from t9k_provider.kube.resources import ResourceType

        return ResourceType(API_VERSION, self.kind, self.plural)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self._reserve_kill_client()
        # decided first, yielded after the client leases, the watch and the log streams are released: a
        # consumer that stops iterating at the first event leaves nothing open. Cancelled, it keeps the kill
        # lease for on_kill and cleanup.
        event = await self._wait()
        await self._release_kill_client()
        yield event

    async def _wait(self) -> TriggerEvent:
        """The event, the followed replicas' logs written into the task log meanwhile, and the leader's
        progress reports read (``progress`` in the event)."""
        shown = self._replica_log()
        reads_progress = self.leader is not None and self.limits.get("progress_timeout") is not None
        limits = WaitLimits(**self.limits)
        seam = _TriggerSeam(
            self._client, self.credentials, self._resource(), self.namespace, self.name, uid=self.uid,
            pod_selector=self.pod_selector, poll_interval=self.poll_interval,
            execution_deadline=limits.execution_deadline, log=self.log,
        )  # fmt: skip
        try:
            if not (self.log_targets and self.pod_selector) or (shown is None and not reads_progress):
                result = await self._run(seam, limits)
                progress = ReportedProgress.from_json(self.progress) if self.progress else None
            else:
                result, progress = await self._run_following(seam, limits, shown)
        finally:
            await seam.close()
        return self._event(replace(result, progress=progress))

    async def _run_following(
        self, seam: _TriggerSeam, limits: WaitLimits, shown: Any
    ) -> tuple[WaitResult, ReportedProgress]:
        """The wait with the followed replicas' live streams (into ``shown``: the task log; None: the
        reports only, the worker prints the lines)."""
        from t9k_provider.replicalogs.lines import ReplicaLines
        from t9k_provider.replicalogs.streams import DRAIN_SECONDS, ReplicaLogs
        from t9k_provider.replicalogs.targets import ReplicaTarget

        targets = [ReplicaTarget(*t) for t in self.log_targets or ()]
        leader = ReplicaTarget(*self.leader) if self.leader else None
        progress = ReportedProgress.from_json(self.progress)
        lines = ReplicaLines(shown or self.log, leader, progress, show=shown is not None)
        async with self._client() as lease:  # the streams' client, held until they are stopped
            logs = seam.logs = ReplicaLogs(
                lease.api, self.log, self.namespace, str(self.pod_selector), targets, self.log_cursors, lines
            )
            try:
                result = await self._run(seam, limits)
                if result.job_ended:
                    await logs.drain(DRAIN_SECONDS)  # the replicas' last lines, before the final pass
            finally:
                await logs.stop()
        if shown is not None:  # else the worker prints the lines, from where they stood
            self.log_cursors = logs.cursors
        lines.flush()
        self.progress = lines.progress.to_json()
        return result, lines.progress

    async def _run(self, seam: _TriggerSeam, limits: WaitLimits) -> WaitResult:
        started = time.time()
        hand_back = started + self.logging_interval if self.logging_interval else None
        carried = WaitResult("running", disruptions_seen=self.disruptions_seen, queue=self.queue)
        memory = WaitMemory.resuming(started, hand_back, carried)
        return await wait(seam, limits, memory, uid=self.uid, poll_interval=self.poll_interval, log=self.log)

    def _replica_log(self) -> Any:
        """Where followed replica lines reach the task log; None: no replica to follow, or they would not
        arrive (the worker prints them at the end)."""
        from t9k_provider.replicalogs.streams import task_log

        if not (self.log_targets and self.pod_selector):
            return None
        return task_log(self.log)

    def _reserve_kill_client(self) -> None:
        """Lease the client a kill deletes with, before anything can be cancelled: the triggerer calls
        ``on_kill``/``cleanup`` only for a ``run`` that started, which does this first, without awaiting."""
        if self.on_kill_action == "delete" and self._kill_client is None:
            self._kill_client = asyncio.ensure_future(self._client().__aenter__())

    async def _release_kill_client(self) -> None:
        reserved, self._kill_client = self._kill_client, None
        if reserved is None or reserved.cancelled():  # cancelled: the lease was given back then
            return
        try:
            api = await reserved
        except Exception:
            return  # never built: nothing to release
        await api.__aexit__(None, None, None)

    async def on_kill(self) -> None:
        """A user killed the deferred task (Airflow >= 3.3): stop the job unless told to keep it."""
        await self._stop_job("task killed")

    async def cleanup(self) -> None:
        """Airflow < 3.3: delete only if the task is no longer deferred (a user kill), never on restart.
        Always: release the kill lease (the last call the triggerer makes)."""
        try:
            if TRIGGER_ON_KILL or self._fired or self.on_kill_action != "delete":
                return
            try:
                state = await self._task_state()
            except Exception as exc:
                self.log.warning("cannot read the task's state, keeping job %s: %s", self.name, exc)
                return
            if state is not None and str(state).lower() != "deferred":
                await self._stop_job(f"task left the deferred state ({state})")
        finally:
            await self._release_kill_client()

    async def _task_state(self) -> Any:
        ti = self.task_instance
        if ti is None:
            return None
        if AIRFLOW_V_3_0_PLUS:
            states = await sync_to_async(RuntimeTaskInstance.get_task_states)(
                dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id], map_index=ti.map_index
            )
            key = (
                f"{ti.task_id}_{ti.map_index}"
                if ti.map_index is not None and ti.map_index >= 0
                else ti.task_id
            )
            return states.get(ti.run_id, {}).get(key)
        return await sync_to_async(_task_state_from_db)(ti)

    async def _stop_job(self, why: str) -> None:
        """Stop the job per ``jobclient.stopping`` through the lease ``run`` took; never raises (the triggerer
        would only log it)."""
        if self._fired or self.on_kill_action != "delete":
            return
        try:
            if self._kill_client is None or self._kill_client.cancelled():
                raise RuntimeError("the trigger holds no client (it never ran, or its lease was cancelled)")
            lease = await self._kill_client
            stopped = await AsyncJobClient(lease.api, self._resource(), self.namespace, self.name).stop(
                self.uid
            )
        except Exception as exc:
            self.log.warning("%s: could not delete job %s/%s: %s", why, self.namespace, self.name, exc)
            return
        self.log.info("%s: job %s/%s %s", why, self.namespace, self.name, STOPPED[stopped])


def _task_state_from_db(ti: Any) -> Any:
    """Airflow 2.x: the triggerer reads the metadata database directly."""
    with create_session() as session:
        return session.scalar(
            select(TaskInstance.state).where(
                TaskInstance.dag_id == ti.dag_id,
                TaskInstance.task_id == ti.task_id,
                TaskInstance.run_id == ti.run_id,
                TaskInstance.map_index == ti.map_index,
            )
        )


class _TriggerSeam(JobFeed):
    """The trigger's side of the wait (``waiting.loop.WaitSeam``): the feed, each state of the job synced to
    the live log streams, which open a stream for every followed container that started."""

    logs: ReplicaLogs | None

    async def next_state(self, job: dict[str, Any] | None, window: float) -> dict[str, Any] | WaitResult:
        state = await super().next_state(job, window)
        if self.logs is not None and not isinstance(state, WaitResult):
            await self.logs.sync(state)  # a finished job too: a replica that ran between two looks
        return state
