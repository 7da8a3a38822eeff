"""How a task ends once its wait stopped: decided from a fresh read of the job (an event only says why the
wait stopped early), with the job kept or deleted as the task's options say."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from t9k_provider.jobclient.client import JobClient
from t9k_provider.jobclient.identity import JobRef
from t9k_provider.operators.diagnostics import failure_report
from t9k_provider.operators.failures import T9kJobFailed, T9kJobTimeout
from t9k_provider.waiting import status as job_status


class Finish(NamedTuple):
    """The operator's options for a job that ended or was given up on."""

    on_finish_action: str
    on_kill_action: str
    retry_on_job_failure: bool
    failure_log_lines: int


def conclude(
    client: JobClient,
    ref: JobRef,
    job: dict[str, Any],
    why: dict[str, Any] | None,
    finish: Finish,
    log: logging.Logger | Any,
) -> dict[str, Any]:
    """The task's result for ``job`` (just read), or the exception that fails it. For a job that has not
    ended, ``why`` says what stopped the wait (``status``: timeout, failed or error; ``message``;
    ``retryable``)."""
    state = job_status.outcome(job)
    if state == "succeeded":
        client.mark_checked(ref)
        if finish.on_finish_action in ("delete", "delete_on_success"):
            client.delete(ref)
        log.info("job %s/%s succeeded", ref.namespace, ref.name)
        return job_status.summary(job)
    report = failure_report(
        client.hook, ref.kind, ref.namespace, ref.name, job, finish.failure_log_lines, log
    )
    if state == "failed":
        client.mark_checked(ref)
        if finish.on_finish_action == "delete":
            client.delete(ref)
        message = f"job {ref.namespace}/{ref.name} failed: {job_status.failure_reason(job)}\n{report}"
        log.error("%s", message)
        raise (AirflowException if finish.retry_on_job_failure else T9kJobFailed)(message)
    why = why or {}
    status = why.get("status")
    reason = why.get("message") or f"stopped waiting in phase {job_status.phase(job) or 'unset'}"
    if status in ("timeout", "failed") and finish.on_kill_action == "delete":
        client.delete(ref)
        reason += "; the job was deleted (on_kill_action=delete)"
    message = f"job {ref.namespace}/{ref.name}: {reason}\n{report}"
    log.error("%s", message)
    if status == "timeout":
        raise T9kJobTimeout(message)
    if status == "failed" or why.get("retryable") is False:
        raise AirflowFailException(message)
    raise AirflowException(message)
