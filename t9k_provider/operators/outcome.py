"""How a task ends once its wait stopped (``conclude``): decided from a fresh read of the job (the wait's
``WaitResult`` only says why it stopped early), with the job kept or deleted as the task's options say, and
what its replicas used (``operators.usage``), reported (``waiting.reported``) and waited in their Queue
(``waiting.queueing``) logged and pushed to XCom, whatever the outcome; the metrics of a success also go
into its asset events.

What the task returns and what a failure's message leads with are the operator's hook points
(``Concluding``), each given the ``Outcome``: the decorated operator reads its function's result and
traceback there, and inherits the rest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, NamedTuple, Protocol

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from t9k_provider.jobclient.client import JobClient
from t9k_provider.jobclient.identity import TRY_NUMBER, JobRef
from t9k_provider.kube.timestamps import rfc3339
from t9k_provider.operators import endings
from t9k_provider.operators.diagnostics import failure_report
from t9k_provider.operators.failures import (
    T9kConfigurationError,
    T9kInfrastructureError,
    T9kJobFailed,
    T9kJobStalled,
    T9kJobTimeout,
)
from t9k_provider.operators.kill import KillSwitch
from t9k_provider.operators.usage import describe, usage
from t9k_provider.replicalogs.waitlogs import WaitLogs
from t9k_provider.waiting import disruptions
from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.queueing import QueueRecord
from t9k_provider.waiting.reported import ReportedProgress
from t9k_provider.waiting.result import WaitResult

#: XCom key of what the job's replicas used (``operators.usage``), pushed when the task ends.
USAGE_XCOM_KEY = "t9k_usage"
#: XCom key of the training's progress (``waiting.reported``), pushed when the task ends after a report.
PROGRESS_XCOM_KEY = "t9k_progress"
#: XCom key of the disruptions the job went through during the task's try (``waiting.disruptions``).
DISRUPTIONS_XCOM_KEY = "t9k_disruptions"
#: XCom key of the job's time in its T9k Queue and the places it held there (``waiting.queueing``).
QUEUE_XCOM_KEY = "t9k_queue"
#: What fails a task, by the class of its ending (``endings``); a workload failure is the operator's to raise.
FAILS: dict[str, type[Exception]] = {
    "infrastructure": T9kInfrastructureError,
    "stall": T9kJobStalled,
    "configuration": T9kConfigurationError,
    "timeout": T9kJobTimeout,
}


@dataclass(frozen=True)
class Outcome:
    """How the job ended, as the conclusion found it: ``job`` as just read, its ``pods`` (None: they could
    not be listed), what they used (None: not known), what the leader reported, the pod of the replica
    that failed first (None: none, or no pod tells) and the class of a failure (None: a success, or an
    ending of no class)."""

    ref: JobRef
    job: dict[str, Any]
    pods: list[dict[str, Any]] | None
    usage: dict[str, Any] | None
    progress: ReportedProgress | None
    failed_first: str | None = None
    ending: endings.Ending | None = None

    @property
    def summary(self) -> dict[str, Any]:
        """The compact, JSON-safe result of a task (``waiting.status.summary``)."""
        return job_status.summary(self.job)


class FailureLead(NamedTuple):
    """What a failed job's message says besides the job's report: ``text`` before it (``after``: after it)
    and whether a new try could help."""

    text: str
    retryable: bool
    after: bool = False


class Concluding(Protocol):
    """What ``conclude`` takes from the operator: its options and its hook points."""

    on_finish_action: str
    on_kill_action: str
    retry_on_job_failure: bool
    failure_log_lines: int
    outlets: Any

    def job_result(self, outcome: Outcome) -> Any:
        """What the task returns for a job that succeeded (the job's summary)."""

    def failure_lead(self, outcome: Outcome) -> FailureLead | None:
        """What a failed job's message leads with besides the replica that failed first (None: nothing)."""

    def concluded(self, outcome: Outcome) -> None:
        """Told how the job ended before the task returns or raises (the task's lineage reports it)."""


def conclude(
    task: Concluding,
    client: JobClient,
    ref: JobRef,
    result: WaitResult,
    context: Mapping[str, Any],
    logs: WaitLogs | None,
    kill: KillSwitch,
    log: logging.Logger | Any,
) -> Any:
    """The task's result for the job ``ref`` once the wait ended in ``result``, or the exception that fails
    it; ``context`` is the task's (its XCom gets the usage and the progress). A kill is never a success."""
    job = client.read(ref)
    if isinstance(job, WaitResult):  # gone: deleted (by the kill's own stop, maybe) or replaced
        kill.check(lambda: client)
        log.error("%s", job.message)
        raise (AirflowException if job.retryable else AirflowFailException)(job.message)
    pods = _pods(client, ref, log)  # listed once: the logs' last pass, the usage and the failure report
    if logs is not None:
        logs.print_new(None if isinstance(pods, Exception) else pods)
    progress = logs.lines.progress if logs is not None else result.progress
    value = _end(task, client, ref, job, result, context, progress, pods, log)
    kill.check(lambda: client)  # a kill even now is no success
    return value


def _end(
    task: Concluding,
    client: JobClient,
    ref: JobRef,
    job: dict[str, Any],
    result: WaitResult,
    context: Mapping[str, Any],
    progress: ReportedProgress | None,
    pods: list[dict[str, Any]] | Exception,
    log: logging.Logger | Any,
) -> Any:
    """``conclude`` for ``job`` (just read) and its ``pods`` (as listed after it, or why they could not be):
    the usage (logged, and pushed to XCom ``t9k_usage``) and the failure report; ``progress`` goes to XCom
    ``t9k_progress``."""
    state = job_status.outcome(job)
    used = report_usage(pods, context.get("ti"), log)
    report_progress(progress, context, task.outlets, state == "succeeded", log)
    report_disruptions(job, context.get("ti"), log)
    report_queue(result.queue, job, context.get("ti"), log)
    report_tensorboard(job, log)
    listed = None if isinstance(pods, Exception) else pods
    if state == "succeeded":
        client.mark_checked(ref)
        log.info("job %s/%s succeeded", ref.namespace, ref.name)
        outcome = Outcome(ref, job, listed, used, progress)
        task.concluded(outcome)
        value = task.job_result(outcome)
        if task.on_finish_action in ("delete", "delete_on_success"):
            client.delete(ref)
        return value
    report = failure_report(
        client.hook, ref.kind, ref.namespace, ref.name, job, task.failure_log_lines, log, pods
    )
    if state == "failed":
        client.mark_checked(ref)
        ending = endings.of_failed_job(job, listed, report.first)
        outcome = Outcome(ref, job, listed, used, progress, report.first, ending)
        lead = task.failure_lead(outcome)
        task.concluded(outcome)
        if task.on_finish_action == "delete":
            client.delete(ref)
        message = f"job {ref.namespace}/{ref.name} failed: {report.lead or job_status.failure_reason(job)}"
        message += f"\n{report.text}"
        if lead is not None:
            message = f"{message}\n{lead.text}" if lead.after else f"{lead.text}\n{message}"
        if ending.lead:
            message = f"{ending.lead}\n{message}"
        log.error("%s", message)
        if ending.kind != "workload":
            raise FAILS[ending.kind](message)
        retried = task.retry_on_job_failure and (lead is None or lead.retryable)
        raise (AirflowException if retried else T9kJobFailed)(message)
    reason = result.message or f"stopped waiting in phase {job_status.phase(job) or 'unset'}"
    if result.status in ("timeout", "failed") and task.on_kill_action == "delete":
        client.delete(ref)
        reason += "; the job was deleted (on_kill_action=delete)"
    message = "\n".join(
        line for line in (f"job {ref.namespace}/{ref.name}: {reason}", report.lead, report.text) if line
    )
    log.error("%s", message)
    kind = endings.of_limit(result.limit) or ("timeout" if result.status == "timeout" else None)
    ending = endings.Ending(kind) if kind is not None else None
    task.concluded(Outcome(ref, job, listed, used, progress, report.first, ending))
    if kind is not None:
        raise FAILS[kind](message)
    if result.status == "failed" or result.retryable is False:
        raise AirflowFailException(message)
    raise AirflowException(message)


def _pods(client: JobClient, ref: JobRef, log: logging.Logger | Any) -> list[dict[str, Any]] | Exception:
    try:
        return client.pods(ref)
    except Exception as exc:
        log.warning("cannot list the pods of job %s/%s (no usage reported): %s", ref.namespace, ref.name, exc)
        return exc


def report_progress(
    progress: ReportedProgress | None,
    context: Mapping[str, Any],
    outlets: Any,
    succeeded: bool,
    log: logging.Logger | Any,
) -> None:
    """Push the progress to XCom ``t9k_progress`` and, after a success, put the final step and metrics into
    the extra of each outlet's asset event; never fails the task."""
    data = progress.to_json() if progress is not None else None
    ti = context.get("ti")
    if data is None or ti is None:
        return
    try:
        data.pop("time")
        data.pop("logged")  # the wait's own pace, not the training's
        ti.xcom_push(key=PROGRESS_XCOM_KEY, value=data)
        events = context.get("outlet_events") if succeeded else None
        final = {"step": data["step"], "total": data["total"], "metrics": data["metrics"]}
        for outlet in (outlets or ()) if events is not None else ():
            events[outlet].extra.update(final)
    except Exception as exc:
        log.warning("cannot report the training's progress: %s", exc)


def report_tensorboard(job: dict[str, Any], log: logging.Logger | Any) -> None:
    """Say in the task log how the job's TensorBoard stands (its ``status.tensorboard``, which the controller
    mirrors from the TensorBoard's Ready condition: why it does not serve, a missing claim say), as the
    "TensorBoard" link leads there; a warning when it cannot serve as specified."""
    mirror = (job.get("status") or {}).get("tensorboard") or {}
    if mirror.get("note"):
        (log.warning if mirror.get("type") == "Warning" else log.info)("%s", mirror["note"])


def report_disruptions(job: dict[str, Any], ti: Any, log: logging.Logger | Any) -> None:
    """Push to XCom ``t9k_disruptions`` the disruptions the job went through during the task's try, each as
    docs/airflow.md#how-a-task-ends lists it, when it went through any (a push is an API request of the
    task's end, which most tries would pay for an empty list); never fails the task."""
    if ti is None:
        return
    try:
        value = [disruptions.for_xcom(e) for e in tried(job, ti)]
        if value:
            ti.xcom_push(key=DISRUPTIONS_XCOM_KEY, value=value)
    except Exception as exc:
        log.warning("cannot report the job's disruptions: %s", exc)


def tried(job: dict[str, Any], ti: Any) -> list[dict[str, Any]]:
    """The job's disruptions during ``ti``'s try: every one of a job this try created; of a job an earlier try
    created (adopted), those since the try started. Not the start alone: ``dag.test()`` on Airflow 3 gives a
    task resumed after a deferral the resumption's time as its ``start_date`` (a deployment keeps the
    try's)."""
    created_by = ((job.get("metadata") or {}).get("annotations") or {}).get(TRY_NUMBER)
    if created_by is not None and created_by == str(getattr(ti, "try_number", None)):
        return disruptions.entries(job)
    started = getattr(ti, "start_date", None)
    since = rfc3339(started) if started is not None else ""
    return [e for e in disruptions.entries(job) if str(e.get("time") or "") >= since]


def report_queue(
    carried: dict[str, Any] | None, job: dict[str, Any], ti: Any, log: logging.Logger | Any
) -> None:
    """Push to XCom ``t9k_queue`` what the task's waits saw of the job's T9k Queue (``carried``: the wait's
    record; None: the job names no Queue, or it was never read): the seconds waited, when it was admitted,
    each place it held; never fails the task."""
    if ti is None or not carried:
        return
    try:
        record = QueueRecord.from_json(carried)
        if record.admitted_at is None and job_status.outcome(job) != "pending":  # it ended between two looks
            running = job_status.running_since(job)
            record = replace(record, admitted_at=running.timestamp() if running is not None else None)
        created = job_status.created_at(job)
        value = record.xcom(created.timestamp() if created is not None else None, time.time())
        ti.xcom_push(key=QUEUE_XCOM_KEY, value=value)
    except Exception as exc:
        log.warning("cannot report the job's time in its queue: %s", exc)


def report_usage(
    pods: list[dict[str, Any]] | Exception, ti: Any, log: logging.Logger | Any
) -> dict[str, Any] | None:
    """Log what the pods used and push it to XCom ``t9k_usage``; the usage (None: unknown). Never fails the
    task."""
    if isinstance(pods, Exception):
        return None  # said where the read failed
    try:
        used = usage(pods, datetime.now(timezone.utc))
        log.info("%s", describe(used))
        if ti is not None:
            ti.xcom_push(key=USAGE_XCOM_KEY, value={k: used[k] for k in ("replica_seconds", "gpu_seconds")})
        return used
    except Exception as exc:
        log.warning("cannot report the job's usage: %s", exc)
        return None
