"""The exceptions a task fails with beyond Airflow's own, one per class of ending, so a DAG (its
``on_failure_callback``, its ``retries``, Airflow 3.3's ``retry_policy``) can tell why: importable at DAG
parse, as they load nothing else (docs/airflow.md#how-a-task-ends).

- workload: a replica's program failed (an exit code, a traceback, OOMKilled under its own limit):
  ``T9kJobFailed``, never retried unless the task asks (``retry_on_job_failure``);
- infrastructure: a node lost, drained or preempted beyond what the controller recovers, the cluster unable
  to place the job in time, the API unreachable: ``T9kInfrastructureError``, retried;
- stall: no progress report for ``progress_timeout``: ``T9kJobStalled``, retried (from the checkpoint);
- configuration: the manifest, the API's refusal, an image or configuration a replica cannot start with:
  ``T9kConfigurationError``, never retried;
- a time limit the task or the job set (``running_timeout``, ``execution_timeout``, the job's
  ``activeDeadlineSeconds``, its queue's ``maxDuration``): ``T9kJobTimeout``, retried.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from t9k_provider.hooks.errors import T9kConfigurationError, T9kInfrastructureError
from t9k_provider.version_compat import AIRFLOW_V_3_3_PLUS

__all__ = [
    "T9kConfigurationError",
    "T9kInfrastructureError",
    "T9kJobFailed",
    "T9kJobStalled",
    "T9kJobTimeout",
]


class T9kJobFailed(AirflowFailException):
    """A replica's program failed: retrying the task would rerun the same code into the same failure."""


class T9kJobTimeout(AirflowException):
    """A time limit was reached; the job was stopped per ``on_kill_action`` and the task may retry."""


class T9kJobStalled(T9kJobTimeout):
    """No progress report for ``progress_timeout``: the job was stopped; retried, from its checkpoint."""


#: How long the provider's retry policy waits before a try after an infrastructure ending or a stall: the
#: cluster's time to replace a node or free room (the task's own ``retry_delay`` is for its program).
INFRASTRUCTURE_RETRY_DELAY = timedelta(seconds=30)


def retry_policy() -> Any:
    """Airflow 3.3's ``retry_policy`` for T9k tasks: an infrastructure ending or a stall is retried after
    ``INFRASTRUCTURE_RETRY_DELAY`` (within the task's ``retries``); anything else falls through to Airflow's
    rules, and a workload or configuration failure (``AirflowFailException``) fails at once."""
    from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule

    rule = RetryRule(
        exception=[T9kInfrastructureError, T9kJobStalled],
        action=RetryAction.RETRY,
        retry_delay=INFRASTRUCTURE_RETRY_DELAY,
        reason="infrastructure or stall: retried from the checkpoint",
    )
    return ExceptionRetryPolicy(rules=[rule])


class DefaultRetryPolicy:
    """``retry_policy()``, built when first consulted: the default every T9k task carries. A DAG file's parse
    then loads nothing of Airflow's retry policies (the scheduler reads only that a task has one; the worker
    evaluates it), which the DAG processor would pay in every parsing process
    (docs/benchmarks.md#5-dag-parse-cost)."""

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int, context: Any = None) -> Any:
        return _built_policy().evaluate(exception, try_number, max_tries, context)

    def serialize(self) -> dict[str, Any]:
        return dict(_built_policy().serialize())


@functools.cache
def _built_policy() -> Any:
    return retry_policy()


DEFAULT_RETRY_POLICY = DefaultRetryPolicy()


def with_retry_policy(kwargs: dict[str, Any]) -> dict[str, Any]:
    """An operator's arguments with the provider's retry policy where the task sets none, on Airflow 3.3+
    (older ones have no retry policy: there the exception types alone decide)."""
    if AIRFLOW_V_3_3_PLUS and kwargs.get("retry_policy") is None:
        return {**kwargs, "retry_policy": DEFAULT_RETRY_POLICY}
    return kwargs
