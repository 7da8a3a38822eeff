"""An Airflow retry after a reported job failure runs a new job, on every path: the typed operator and a
decorated function, waiting in the worker and deferred. Try 1 runs to the job's failure and reports it
retryably; try 2 (Airflow's automatic retry: same task instance, ``try_number`` 2 of ``max_tries`` 1) meets
the failed job under the same name and must replace it, not adopt and report the old failure again."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.providers.common.compat.sdk import (
    DAG,
    AirflowException,
    AirflowFailException,
    TaskDeferred,
    task,
)

from t9k_provider.decorators import runner
from t9k_provider.jobclient import identity as ident
from t9k_provider.operators import T9kJobOperator
from tests.airflow.fakes import FakeHook, FakeTI, make
from tests.support.builders import FAILED, RUNNING, SUCCEEDED, replica_pod

pytestmark = pytest.mark.timeout(60)

FIRST_TRY = {"try_number": 1, "max_tries": 1}
RETRY = {"try_number": 2, "max_tries": 1}


def train(epochs: int) -> int:
    return epochs


def typed(hook: FakeHook, deferrable: bool) -> T9kJobOperator:
    return make(hook, retries=1, retry_on_job_failure=True, deferrable=deferrable)


def decorated(hook: FakeHook, deferrable: bool) -> T9kJobOperator:
    """``@task.t9k_pytorch(retries=1, retry_on_job_failure=True)``, built anew as each try builds it."""
    with DAG("retries", schedule=None):
        op = task.t9k_pytorch(
            workers=2, retries=1, retry_on_job_failure=True, deferrable=deferrable, wait_before_defer=0
        )(train)(3).operator
    op.__dict__["hook"] = hook
    if not deferrable:
        op.poll_interval = 0.01
    return op


def run_try(op: T9kJobOperator, hook: FakeHook, ti: FakeTI, ending: tuple) -> Any:
    """One try to the job's ``ending``: in the worker, or deferred and resumed with the trigger's event."""
    context = {"ti": ti, "run_id": ti.run_id}
    if hasattr(op, "python_callable"):
        op.render_template_fields(context)
    if not op.deferrable:
        hook.script = hook.script or [ending]
        return op.execute(context)
    try:
        result = op.execute(context)
    except TaskDeferred as deferred:
        hook.script = [ending]
        status = "succeeded" if ending is SUCCEEDED else "failed"
        event = {"status": status, "message": "", "resume": deferred.trigger.resume}
        return op.execute_complete(context, event)
    return result


def stamped(lines: list[str]) -> str:
    return "\n".join(f"2026-01-01T00:00:01Z {line}" for line in lines)


def replica_logs(hook: FakeHook, name: str, text: str) -> None:
    hook.pods = [replica_pod(f"{name}-worker-{i}", "worker", i, name) for i in range(2)]
    for index in range(2):
        hook.logs[(f"{name}-worker-{index}", "pytorch")] = text
        hook.logs[(f"{name}-worker-{index}", "main")] = text


@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferred"])
@pytest.mark.parametrize("build", [typed, decorated], ids=["typed", "decorated"])
def test_a_retry_after_a_reported_job_failure_runs_a_new_job(
    fake_hook: FakeHook, build: Any, deferrable: bool
) -> None:
    ti = FakeTI(**FIRST_TRY)
    first = build(fake_hook, deferrable)
    ti.task_id = first.task_id
    name = ident.job_name(ident.task_identity(ti))
    crash = [
        f"{runner.ERROR_MARKER} {runner.RETRYABLE} train() on rank 1 raised RuntimeError",
        runner.ERROR_END_MARKER,
    ]
    replica_logs(fake_hook, name, stamped(crash))
    fake_hook.script = [RUNNING] if deferrable else [FAILED]
    with pytest.raises(AirflowException) as failure:
        run_try(first, fake_hook, ti, FAILED)
    assert not isinstance(failure.value, AirflowFailException), "try 1 must fail retryably"
    (old,) = fake_hook.jobs.values()
    assert old["metadata"]["annotations"][ident.CHECKED] == "true"  # try 1 reported the failure

    ti.__dict__.update(RETRY)
    second = build(fake_hook, deferrable)
    replica_logs(fake_hook, name, stamped(runner.encode_result(3, None).splitlines()))
    fake_hook.script = [FAILED, RUNNING] if deferrable else [FAILED, SUCCEEDED]  # the old job, then the new
    result = run_try(second, fake_hook, ti, SUCCEEDED)
    (new,) = fake_hook.jobs.values()
    assert new["metadata"]["uid"] != old["metadata"]["uid"], "try 2 adopted the failed job of try 1"
    assert new["metadata"]["annotations"][ident.TRY_NUMBER] == "2"
    assert fake_hook.deletes() == [name]
    assert result == 3 if build is decorated else result["uid"] == new["metadata"]["uid"]
