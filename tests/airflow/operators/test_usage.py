"""What a job's replicas used (``operators.usage``) and how every task end reports it: one line in the task
log and XCom ``t9k_usage``, in both wait modes, on success and failure, from one list of the job's pods."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, TaskDeferred

from t9k_provider.jobclient import identity as ident
from t9k_provider.operators import T9kJobFailed
from t9k_provider.operators.usage import describe, gpus, ran, usage
from tests.airflow.fakes import FakeHook, FakeTI, make
from tests.support.builders import FAILED, RUNNING, SUCCEEDED, replica_pod, running, stamp, terminated

pytestmark = pytest.mark.timeout(60)

NOW = datetime(2026, 1, 1, 0, 5, tzinfo=timezone.utc)  # second 300


def job_pods(name: str) -> list[dict[str, Any]]:
    """A master that ran 100 s on 2 GPUs, a worker that ran 84 s, a worker running for 30 s at ``NOW`` on one
    GPU, and a worker that never started."""
    return [
        terminated(replica_pod(f"{name}-master-0", "master", 0, name), 10, 110, 0, gpus=2),
        terminated(replica_pod(f"{name}-worker-0", "worker", 0, name), 20, 104, 1),
        running(replica_pod(f"{name}-worker-1", "worker", 1, name), stamp(270), gpus=1),
        replica_pod(f"{name}-worker-2", "worker", 2, name) | {"status": {"phase": "Pending"}},
    ]


def test_replica_and_gpu_seconds_per_type_from_the_pods_own_clocks() -> None:
    used = usage(job_pods("j"), NOW)
    assert used == {
        "replicas": 3,
        "replica_seconds": {"master": 100.0, "worker": 114.0, "total": 214.0},
        "gpu_seconds": {"master": 200.0, "worker": 30.0, "total": 230.0},
    }
    assert describe(used) == (
        "usage: 3 replicas, 214 replica-seconds (master 100, worker 114), "
        "230 GPU-seconds (master 200, worker 30)"
    )


def test_the_log_line_of_a_cpu_job() -> None:
    pods = [terminated(replica_pod(f"j-worker-{i}", "worker", i, "j"), 0, 92, 0) for i in range(2)]
    pods[1]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = "2026-01-01T00:01:32.2Z"
    line = "usage: 2 replicas, 184.2 replica-seconds (worker 184.2), 0 GPU-seconds"
    assert describe(usage(pods, NOW)) == line


def test_a_pod_runs_from_its_first_start_to_its_last_finish() -> None:
    """Containers that ended at different times, one restarted (its last run counts from the first start),
    an unlabelled pod, and GPU requests where a container has no limit."""
    p = terminated(replica_pod("p", "worker", 0, "j", containers=("main", "sidecar")), 5, 50, 1)
    p["status"]["containerStatuses"][1]["state"]["terminated"]["finishedAt"] = stamp(65)
    earlier_run = {"startedAt": stamp(1), "finishedAt": stamp(4)}
    p["status"]["containerStatuses"][0]["lastState"] = {"terminated": earlier_run}
    p["spec"]["containers"][1]["resources"] = {"requests": {"nvidia.com/gpu": 1}}
    assert ran(p, NOW) == (datetime(2026, 1, 1, 0, 0, 1, tzinfo=timezone.utc), NOW - timedelta(seconds=235))
    assert gpus(p) == 1
    del p["metadata"]["labels"]
    assert usage([p], NOW)["replica_seconds"] == {"other": 64.0, "total": 64.0}
    assert ran(replica_pod("q", "worker", 0, "j") | {"status": {}}, NOW) is None


# -- every task end reports it ------------------------------------------------------------------------------


def prepared(hook: FakeHook, ti: FakeTI) -> str:
    name = ident.job_name(ident.task_identity(ti))
    hook.pods = job_pods(name)
    return name


def lists(hook: FakeHook) -> int:
    return len([c for c, _ in hook.calls if c == "list_pods"])


def test_a_succeeded_task_logs_and_pushes_its_usage(
    fake_hook: FakeHook,
    context: dict[str, Any],
    ti: FakeTI,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    prepared(fake_hook, ti)
    fake_hook.script = [SUCCEEDED]
    with caplog.at_level(logging.INFO):
        make(fake_hook, get_logs=False, pod_error_timeout=None).execute(context)
    used = ti.xcoms["t9k_usage"]
    assert set(used) == {"replica_seconds", "gpu_seconds"}
    assert used["replica_seconds"]["master"] == 100.0 and used["gpu_seconds"]["master"] == 200.0
    assert "usage: 3 replicas, " in caplog.text + capsys.readouterr().out  # Airflow 3: structlog, on stdout
    assert lists(fake_hook) == 1


def test_the_conclusion_lists_the_pods_once_for_the_logs_and_the_usage(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    """The logs' last pass and the usage read the same pods, listed once after the job's final read (a
    request whose answer is known is not made again on every task's way to its end)."""
    prepared(fake_hook, ti)
    fake_hook.script = [SUCCEEDED]
    make(fake_hook, get_logs=True, pod_error_timeout=None).execute(context)
    calls = [c for c, _ in fake_hook.calls]
    final = max(i for i, c in enumerate(calls) if c == "get")  # the conclusion's read of the job
    assert calls[final:].count("list_pods") == 1
    assert set(ti.xcoms["t9k_usage"]) == {"replica_seconds", "gpu_seconds"}


def test_a_failed_task_reports_its_usage_from_the_pods_its_failure_report_read(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    name = prepared(fake_hook, ti)
    fake_hook.script = [FAILED]
    with pytest.raises(T9kJobFailed) as failure:
        make(fake_hook, get_logs=False, pod_error_timeout=None).execute(context)
    assert ti.xcoms["t9k_usage"]["replica_seconds"]["total"] > 0
    assert lists(fake_hook) == 1
    lead = f"job conn-ns/{name} failed: {name}-worker-0 failed, at {stamp(104)}: exit code 1"
    assert str(failure.value).startswith(lead)


def test_a_deferred_task_reports_its_usage_when_it_resumes(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    prepared(fake_hook, ti)
    fake_hook.script = [RUNNING]
    op = make(fake_hook, deferrable=True, get_logs=False, pod_error_timeout=None)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    assert "t9k_usage" not in ti.xcoms and lists(fake_hook) == 0
    fake_hook.script = [SUCCEEDED]
    resumed = FakeTI()  # a new process: the operator only has what execute_complete is given
    op.execute_complete({"ti": resumed}, {"status": "succeeded", "resume": deferred.value.trigger.resume})
    assert resumed.xcoms["t9k_usage"]["gpu_seconds"]["master"] == 200.0
    assert lists(fake_hook) == 1


def test_pods_that_cannot_be_listed_only_skip_the_usage(
    fake_hook: FakeHook,
    context: dict[str, Any],
    ti: FakeTI,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prepared(fake_hook, ti)
    fake_hook.script = [SUCCEEDED]

    def forbidden(*_: Any) -> list[dict[str, Any]]:
        raise AirflowException("pods is forbidden")

    fake_hook.list_pods = forbidden  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        result = make(fake_hook, get_logs=False, pod_error_timeout=None).execute(context)
    assert result["phase"] == "Succeeded" and "t9k_usage" not in ti.xcoms
    said = "(no usage reported): pods is forbidden"
    assert said in caplog.text or said in capsys.readouterr().out  # Airflow 3's task logger writes to stdout


def test_an_xcom_that_cannot_be_pushed_does_not_change_the_outcome(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    prepared(fake_hook, ti)
    fake_hook.script = [SUCCEEDED]
    pushed = ti.xcom_push

    def refuse_usage(key: str, value: Any) -> None:
        if key == "t9k_usage":
            raise RuntimeError("XCom backend down")
        pushed(key, value)

    ti.xcom_push = refuse_usage  # type: ignore[method-assign]
    assert make(fake_hook, get_logs=False, pod_error_timeout=None).execute(context)["phase"] == "Succeeded"
