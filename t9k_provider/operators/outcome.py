"""How a task ends once its wait stopped: decided from a fresh read of the job (an event only says why the
wait stopped early), with the job kept or deleted as the task's options say, and what its replicas used
(``operators.usage``) and reported (``waiting.reported``) logged and pushed to XCom, whatever the outcome; the
metrics of a success also go into its asset events."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, NamedTuple

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from t9k_provider.jobclient.client import JobClient
from t9k_provider.jobclient.identity import JobRef
from t9k_provider.operators.diagnostics import failure_report
from t9k_provider.operators.failures import T9kJobFailed, T9kJobTimeout
from t9k_provider.operators.usage import describe, usage
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.reported import ReportedProgress

#: XCom key of what the job's replicas used (``operators.usage``), pushed when the task ends.
USAGE_XCOM_KEY = "t9k_usage"
#: XCom key of the training's progress (``waiting.reported``), pushed when the task ends after a report.
PROGRESS_XCOM_KEY = "t9k_progress"


class Finish(NamedTuple):
    """The operator's options for a job that ended or was given up on."""

    on_finish_action: str
    on_kill_action: str
    retry_on_job_failure: bool
    failure_log_lines: int
    #: The task's context, whose XCom gets the usage and the progress (None: they are only logged).
    context: Any = None
    #: The task's outlets, whose asset events get the final metrics.
    outlets: tuple[Any, ...] = ()

    @classmethod
    def of(cls, operator: Any) -> Finish:
        """The options of a ``T9kJobOperator``, and the context its ``execute`` or ``execute_complete``
        runs in."""
        return cls(
            operator.on_finish_action,
            operator.on_kill_action,
            operator.retry_on_job_failure,
            operator.failure_log_lines,
            getattr(operator, "_context", None),
            tuple(getattr(operator, "outlets", None) or ()),
        )

    @property
    def ti(self) -> Any:
        return self.context["ti"] if self.context else None


def conclude(
    client: JobClient,
    ref: JobRef,
    job: dict[str, Any],
    why: dict[str, Any] | None,
    finish: Finish,
    log: logging.Logger | Any,
    progress: ReportedProgress | None = None,
) -> dict[str, Any]:
    """The task's result for ``job`` (just read), or the exception that fails it. For a job that has not
    ended, ``why`` says what stopped the wait (``status``: timeout, failed or error; ``message``;
    ``retryable``). The job's pods are listed once: for the usage (logged, and pushed to XCom ``t9k_usage``)
    and the failure report. ``progress``: what the leader reported (XCom ``t9k_progress``)."""
    state = job_status.outcome(job)
    pods = _pods(client, ref, log)
    report_usage(pods, finish.ti, log)
    report_progress(progress, finish, state == "succeeded", log)
    if state == "succeeded":
        client.mark_checked(ref)
        if finish.on_finish_action in ("delete", "delete_on_success"):
            client.delete(ref)
        log.info("job %s/%s succeeded", ref.namespace, ref.name)
        return job_status.summary(job)
    report = failure_report(
        client.hook, ref.kind, ref.namespace, ref.name, job, finish.failure_log_lines, log, pods
    )
    if state == "failed":
        client.mark_checked(ref)
        if finish.on_finish_action == "delete":
            client.delete(ref)
        message = f"job {ref.namespace}/{ref.name} failed: {report.lead or job_status.failure_reason(job)}"
        message += f"\n{report.text}"
        log.error("%s", message)
        failed = (AirflowException if finish.retry_on_job_failure else T9kJobFailed)(message)
        failed.pods = None if isinstance(pods, Exception) else pods  # the decorated operator's to reuse
        failed.failed_first = report.first
        raise failed
    why = why or {}
    status = why.get("status")
    reason = why.get("message") or f"stopped waiting in phase {job_status.phase(job) or 'unset'}"
    if status in ("timeout", "failed") and finish.on_kill_action == "delete":
        client.delete(ref)
        reason += "; the job was deleted (on_kill_action=delete)"
    message = "\n".join(
        line for line in (f"job {ref.namespace}/{ref.name}: {reason}", report.lead, report.text) if line
    )
    log.error("%s", message)
    if status == "timeout":
        raise T9kJobTimeout(message)
    if status == "failed" or why.get("retryable") is False:
        raise AirflowFailException(message)
    raise AirflowException(message)


def _pods(client: JobClient, ref: JobRef, log: logging.Logger | Any) -> list[dict[str, Any]] | Exception:
    try:
        return client.hook.list_pods(ref.namespace, pod_selector(ref.kind, ref.name))
    except Exception as exc:
        log.warning("cannot list the pods of job %s/%s (no usage reported): %s", ref.namespace, ref.name, exc)
        return exc


def report_progress(
    progress: ReportedProgress | None, finish: Finish, succeeded: bool, log: logging.Logger | Any
) -> None:
    """Push the progress to XCom ``t9k_progress`` and, after a success, put the final step and metrics into
    the extra of each outlet's asset event; never fails the task."""
    data = progress.to_json() if progress is not None else None
    if data is None or finish.ti is None:
        return
    try:
        data.pop("time")
        finish.ti.xcom_push(key=PROGRESS_XCOM_KEY, value=data)
        events = finish.context.get("outlet_events") if succeeded else None
        final = {"step": data["step"], "total": data["total"], "metrics": data["metrics"]}
        for outlet in finish.outlets if events is not None else ():
            events[outlet].extra.update(final)
    except Exception as exc:
        log.warning("cannot report the training's progress: %s", exc)


def report_usage(pods: list[dict[str, Any]] | Exception, ti: Any, log: logging.Logger | Any) -> None:
    """Log what the pods used and push it to XCom ``t9k_usage``; never fails the task."""
    if isinstance(pods, Exception):
        return  # said where the read failed
    try:
        used = usage(pods, datetime.now(timezone.utc))
        log.info("%s", describe(used))
        if ti is not None:
            ti.xcom_push(key=USAGE_XCOM_KEY, value={k: used[k] for k in ("replica_seconds", "gpu_seconds")})
    except Exception as exc:
        log.warning("cannot report the job's usage: %s", exc)
