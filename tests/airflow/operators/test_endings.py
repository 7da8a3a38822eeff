"""Which class a task's ending falls in, and the retry policy that acts on it: read from the job's conditions
and the first failing replica's pod, and from the limit that stopped a wait."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from t9k_provider.operators import endings
from t9k_provider.operators.failures import (
    INFRASTRUCTURE_RETRY_DELAY,
    T9kConfigurationError,
    T9kInfrastructureError,
    T9kJobFailed,
    T9kJobStalled,
    T9kJobTimeout,
    retry_policy,
    with_retry_policy,
)
from t9k_provider.version_compat import AIRFLOW_V_3_3_PLUS


def failed_job(reason: str = "Failed") -> dict[str, Any]:
    return {
        "status": {"phase": "Failed", "conditions": [{"type": "Failed", "status": "True", "reason": reason}]}
    }


def pod(
    name: str = "j-worker-1", *, conditions: list | None = None, reason: str = "", exit_code: int | None = 1
) -> dict[str, Any]:
    state = (
        {"terminated": {"exitCode": exit_code, "reason": "Error"}}
        if exit_code is not None
        else {"running": {}}
    )
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Failed", "reason": reason, "conditions": conditions or [],
                   "containerStatuses": [{"name": "main", "state": state}]},
    }  # fmt: skip


def test_a_program_that_failed_is_a_workload_failure() -> None:
    assert endings.of_failed_job(failed_job(), [pod()], "j-worker-1") == endings.Ending("workload")
    assert endings.of_failed_job(failed_job(), None, None).kind == "workload"  # no pod tells: the job did


def test_a_replica_lost_to_the_infrastructure_is_an_infrastructure_ending_that_says_how() -> None:
    target = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    evicted = pod(conditions=[{**target, "message": "Eviction API: evicting"}])
    ending = endings.of_failed_job(failed_job(), [evicted], "j-worker-1")
    assert ending == endings.Ending(
        "infrastructure", "j-worker-1: disrupted on node n1 (EvictionByEvictionAPI: Eviction API: evicting)"
    )
    node_pressure = pod(reason="Evicted", exit_code=137)
    assert endings.of_failed_job(failed_job(), [node_pressure], "j-worker-1").kind == "infrastructure"
    vanished = pod(exit_code=None)
    assert endings.of_failed_job(failed_job(), [vanished], "j-worker-1").lead == (
        "j-worker-1: lost on node n1 without an exit code"
    )


@pytest.mark.parametrize(
    ("reason", "kind"),
    [("InvalidSpec", "configuration"), ("DeadlineExceeded", "timeout"), ("MaxDurationExceeded", "timeout")],
)
def test_the_controllers_reason_decides_first(reason: str, kind: str) -> None:
    assert endings.of_failed_job(failed_job(reason), [pod()], "j-worker-1").kind == kind


@pytest.mark.parametrize(
    ("limit", "kind"),
    [
        ("startup_timeout", "infrastructure"),
        ("unknown_timeout", "infrastructure"),
        ("pod_error_timeout", "configuration"),
        ("progress_timeout", "stall"),
        ("running_timeout", "timeout"),
        ("execution_timeout", "timeout"),
        ("paused_timeout", None),
    ],
)
def test_each_wait_limit_has_its_class(limit: str, kind: str | None) -> None:
    assert endings.of_limit(limit) == kind


def test_the_classes_fail_or_retry_as_airflow_reads_them() -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    for never in (T9kJobFailed, T9kConfigurationError):
        assert issubclass(never, AirflowFailException)
    for retried in (T9kInfrastructureError, T9kJobStalled, T9kJobTimeout):
        assert not issubclass(retried, AirflowFailException)
    assert issubclass(T9kJobStalled, T9kJobTimeout)


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="retry policies came with Airflow 3.3")
def test_the_retry_policy_retries_the_infrastructure_and_stalls_after_its_delay_and_nothing_else() -> None:
    from airflow.sdk import RetryAction

    policy = retry_policy()
    for retried in (T9kInfrastructureError("node lost"), T9kJobStalled("no progress")):
        decision = policy.evaluate(retried, 1, 3)
        assert (decision.action, decision.retry_delay) == (RetryAction.RETRY, INFRASTRUCTURE_RETRY_DELAY)
    assert policy.evaluate(T9kJobTimeout("running_timeout"), 1, 3).action == RetryAction.DEFAULT
    assert policy.evaluate(RuntimeError("other"), 1, 3).action == RetryAction.DEFAULT
    # a task's own policy is kept, and without one it gets the provider's
    own = object()
    assert with_retry_policy({"retry_policy": own})["retry_policy"] is own
    default = with_retry_policy({})["retry_policy"]
    assert default.serialize() == policy.serialize()
    for ending in (T9kInfrastructureError("node lost"), T9kJobTimeout("running_timeout")):
        assert default.evaluate(ending, 1, 3) == policy.evaluate(ending, 1, 3)


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="retry policies came with Airflow 3.3")
def test_the_task_runner_consults_the_policy_an_operator_carries_by_default() -> None:
    """Airflow's task runner, as it decides a failed try, on an operator built without a ``retry_policy``:
    the provider's default (built only now) retries a lost node after its delay."""
    import structlog
    from airflow.sdk import RetryAction
    from airflow.sdk.execution_time.task_runner import _evaluate_retry_policy

    from t9k_provider.operators import GenericJobOperator

    task = GenericJobOperator(task_id="t", manifest={"kind": "GenericJob"}, retries=3)
    assert task.has_retry_policy  # what the serialized DAG tells the scheduler
    ti = SimpleNamespace(task=task, try_number=1, _ti_context_from_server=None)
    decision = _evaluate_retry_policy(ti, T9kInfrastructureError("node lost"), structlog.get_logger())
    assert (decision.action, decision.retry_delay) == (RetryAction.RETRY, INFRASTRUCTURE_RETRY_DELAY)
    decision = _evaluate_retry_policy(ti, RuntimeError("other"), structlog.get_logger())
    assert decision.action == RetryAction.DEFAULT


@pytest.mark.skipif(AIRFLOW_V_3_3_PLUS, reason="Airflow 2.11 and 3.0-3.2 have no retry policy")
def test_before_airflow_3_3_the_exception_types_alone_decide() -> None:
    assert "retry_policy" not in with_retry_policy({"task_id": "t"})
