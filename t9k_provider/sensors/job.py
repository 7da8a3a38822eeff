"""``T9kJobSensor``: wait for an existing T9k Job (created elsewhere) in poke, reschedule or deferrable mode.

Succeeded -> success; Failed -> ``AirflowFailException`` with the controller's reason; Paused and Unknown keep
the sensor waiting unless ``paused_timeout``/``unknown_timeout`` bound them. The sensor's own ``timeout``
applies as usual.

Kill and timeout paths load nothing: ``on_kill`` only records the kill (the sensor never owns the job, so
there is nothing to stop), and the timeouts are Airflow's own or an event the trigger already built; what a
poke needs is imported and built by the first poke, before the wait. A killed sensor fails rather than
reporting a success it read after the kill (Airflow 3's SIGTERM handler returns into the poke).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowFailException,
    BaseSensorOperator,
    conf,
)

from t9k_provider.operators.options import seconds

if TYPE_CHECKING:
    from t9k_provider.hooks.t9k import T9kHook
    from t9k_provider.waiting.limits import WaitLimits
    from t9k_provider.waiting.step import WaitMemory


class T9kJobSensor(BaseSensorOperator):
    """Wait until the job ``kind``/``name`` in ``namespace`` is terminal.

    :param kind: the job's kind, e.g. ``PyTorchTrainingJob`` (old spellings accepted).
    :param name: the job's name (templated; e.g. ``{{ ti.xcom_pull('train', key='t9k_job')['name'] }}``).
    :param namespace: default: the connection's namespace.
    :param paused_timeout: fail once the job has been Paused this many seconds (None: keep waiting).
    :param unknown_timeout: fail once the job has been Unknown this many seconds (None: keep waiting).
    :param deferrable: wait in the triggerer; default ``[operators] default_deferrable``.
    """

    template_fields: Sequence[str] = ("name", "namespace", "kubernetes_conn_id")

    def __init__(
        self,
        *,
        kind: str,
        name: str,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        paused_timeout: float | timedelta | None = None,
        unknown_timeout: float | timedelta | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.paused_timeout = seconds(paused_timeout, "paused_timeout")
        self.unknown_timeout = seconds(unknown_timeout, "unknown_timeout")
        self.deferrable = deferrable
        self._killed = False

    @cached_property
    def hook(self) -> T9kHook:
        from t9k_provider.kube.importing import collector_spared

        with collector_spared("t9k_provider.hooks.t9k"):
            from t9k_provider.hooks.t9k import T9kHook
        return T9kHook(conn_id=self.kubernetes_conn_id)

    @cached_property
    def plural(self) -> str:
        from t9k_provider.jobs import KINDS
        from t9k_provider.jobs.constants import KIND_ALIASES

        kind = KIND_ALIASES.get(self.kind, self.kind)
        if kind not in KINDS:
            raise AirflowFailException(
                f"kind: {self.kind!r} is not a T9k Job kind ({', '.join(sorted(KINDS))})"
            )
        return KINDS[kind].PLURAL

    def _namespace(self) -> str:
        return self.namespace or self.hook.default_namespace

    @cached_property
    def _memory(self) -> WaitMemory:
        from t9k_provider.waiting.step import WaitMemory

        return WaitMemory(time.time())

    def _limits(self) -> WaitLimits:
        from t9k_provider.waiting.limits import WaitLimits

        return WaitLimits(paused_timeout=self.paused_timeout, unknown_timeout=self.unknown_timeout)

    def on_kill(self) -> None:
        """Only remember the kill: it runs in a signal handler, and the job is not the sensor's to stop."""
        self._killed = True

    def _raise_if_killed(self) -> None:
        if self._killed:
            raise AirflowException(f"task killed while waiting for job {self.name} (the job is left alone)")

    def execute(self, context: Any) -> Any:
        result = None
        if not self.deferrable:
            result = super().execute(context)
        elif not self.poke(context):
            self._raise_if_killed()  # killed after the poke: no trigger to wait in
            self._defer()
        self._raise_if_killed()  # a kill as the last poke decided
        return result

    def _defer(self) -> None:
        from t9k_provider.triggers.job import T9kJobTrigger

        self.defer(
            trigger=T9kJobTrigger(
                credentials=self.hook.credentials,
                kind=self.kind,
                plural=self.plural,
                name=self.name,
                namespace=self._namespace(),
                poll_interval=self.poke_interval,
                limits=self._limits().to_kwargs(),
                on_kill_action="keep",  # the sensor never owns the job
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def poke(self, context: Any) -> bool:
        from t9k_provider.hooks.errors import T9kFatalApiError
        from t9k_provider.jobclient.client import JobClient
        from t9k_provider.jobclient.identity import JobRef
        from t9k_provider.waiting import status as job_status
        from t9k_provider.waiting.loop import look
        from t9k_provider.waiting.result import WaitResult

        self._raise_if_killed()
        ref = JobRef(self.kind, self.plural, self.name, self._namespace(), None)
        job = JobClient(self.hook, self.log).read(ref)
        if isinstance(job, WaitResult):
            raise T9kFatalApiError(f"read {self.kind} {self.name}: not found")
        self._raise_if_killed()  # killed while it read: what it read no longer decides
        self.log.info("job %s/%s phase %s", ref.namespace, self.name, job_status.phase(job) or "unset")
        # One look of the wait the operators run, without pods (the sensor does not own the job's replicas).
        # A rescheduled sensor is a new instance: the Paused condition's timestamp still bounds Paused, while
        # Unknown (no condition) is bounded per sensor run.
        decided = asyncio.run(look(_NoPods(), job, self._limits(), self._memory, time.time(), None))
        self._memory = decided.memory
        if decided.action != "end":
            return False
        if decided.status == "succeeded":
            return True
        if decided.status == "failed":
            raise AirflowFailException(f"job {self.name} failed: {decided.message}")
        raise AirflowFailException(f"job {self.name}: {decided.message}")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> None:
        """Decide from the event alone: it imports, builds and reads nothing (this is also the timeout path
        when the trigger's own limit fired)."""
        self._raise_if_killed()
        status = event.get("status")
        if status == "succeeded":
            return
        message = f"job {self.name}: {event.get('message') or status}"
        if status in ("failed", "timeout") or event.get("retryable") is False:
            raise AirflowFailException(message)
        raise AirflowException(message)


class _NoPods:
    """The sensor's side of a look (``waiting.loop.LookSeam``): it reads no pods, nodes, reports or queue."""

    async def pods(self) -> list[dict[str, Any]]:
        return []

    async def largest_node(self) -> dict[str, int] | None:
        return None

    async def recent_reports(self, since: float) -> bool:
        return True

    def progress(self) -> None:
        return None

    async def queue(self, job: dict[str, Any]) -> None:
        return None
