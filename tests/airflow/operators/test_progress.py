"""How a task reports a training's progress: the leader's reports read from the replica log the task follows
become XCom ``t9k_progress`` and its asset events' extra at the end, in the worker and after a deferral (the
trigger carries the progress it read, as it carries the log cursors); and ``progress_timeout`` ends a
stalled job."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException, TaskDeferred

from t9k_provider.jobclient import identity as ident
from t9k_provider.operators import T9kJobTimeout
from tests.airflow.fakes import FakeHook, FakeTI, make
from tests.support.builders import RUNNING, SUCCEEDED, replica_pod

pytestmark = pytest.mark.timeout(60)


def written(at: datetime) -> str:
    """A leader's log: a line, then reports of steps 1 and 2 at ``at`` + 1 s and + 3 s."""

    def stamp(seconds: int) -> str:
        return (at + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

    return "\n".join(
        [
            f"{stamp(0)} epoch 1",
            f'{stamp(1)} T9K_PROGRESS {{"step": 1, "total": 4, "metrics": {{"loss": 0.5}}}}',
            f'{stamp(3)} T9K_PROGRESS {{"step": 2, "total": 4, "metrics": {{"loss": 0.25}}}}',
        ]
    )


REPORTS = written(datetime(2026, 1, 1, 0, 0, 1, tzinfo=timezone.utc))


def reporting(hook: FakeHook, ti: FakeTI, log: str = REPORTS) -> str:
    """The task's job has a running leader whose log holds ``log``, and a worker that reports too (not
    counted: only the leader's reports are)."""
    name = ident.job_name(ident.task_identity(ti))
    hook.pods = [
        replica_pod(f"{name}-worker-0", "worker", 0, name),
        replica_pod(f"{name}-worker-1", "worker", 1, name),
    ]
    hook.logs[(f"{name}-worker-0", "main")] = log
    hook.logs[(f"{name}-worker-1", "main")] = '2026-01-01T00:00:09Z T9K_PROGRESS {"step": 99}'
    return name


class Outlet:
    """An asset's outlet event accessor: what the task writes into its ``extra``."""

    def __init__(self) -> None:
        self.extra: dict[str, Any] = {"owner": "ml"}


def test_a_task_pushes_the_leaders_progress_and_its_assets_carry_the_metrics(
    fake_hook: FakeHook,
    context: dict[str, Any],
    ti: FakeTI,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    reporting(fake_hook, ti)
    fake_hook.script = [RUNNING, SUCCEEDED]
    events = {"model": Outlet()}
    with caplog.at_level(logging.INFO):
        make(fake_hook, outlets=["model"], pod_error_timeout=None).execute(
            {**context, "outlet_events": events}
        )
    pushed = ti.xcoms["t9k_progress"]
    assert (pushed["step"], pushed["total"], pushed["metrics"]) == (2, 4, {"loss": 0.25})
    assert [h["step"] for h in pushed["history"]] == [1, 2]
    assert events["model"].extra == {"owner": "ml", "step": 2, "total": 4, "metrics": {"loss": 0.25}}
    out = caplog.text + capsys.readouterr().out  # Airflow 3's task log is structlog's, on stdout
    assert "progress: step 2/4 (50.0%), 0.5 steps/s, ETA 0:00:04, loss=0.25" in out
    assert "epoch 1" in out and "T9K_PROGRESS" not in out


def test_a_failed_task_pushes_its_progress_but_touches_no_asset(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    reporting(fake_hook, ti)
    fake_hook.script = [("Failed", (("Failed", "Failed", "The job is failed with rule"),))]
    events = {"model": Outlet()}
    with pytest.raises(AirflowFailException):
        make(fake_hook, outlets=["model"], pod_error_timeout=None).execute(
            {**context, "outlet_events": events}
        )
    assert ti.xcoms["t9k_progress"]["step"] == 2
    assert events["model"].extra == {"owner": "ml"}


def test_no_report_pushes_no_progress(fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI) -> None:
    reporting(fake_hook, ti, log="2026-01-01T00:00:01Z just training")
    fake_hook.script = [SUCCEEDED]
    make(fake_hook, pod_error_timeout=None).execute(context)
    assert "t9k_progress" not in ti.xcoms


def test_the_progress_travels_through_the_deferral(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    """What the worker read before deferring goes to the trigger; what the trigger read comes back in its
    event; the task keeps nothing across."""
    reporting(fake_hook, ti, written(datetime.now(timezone.utc) - timedelta(seconds=5)))
    fake_hook.script = [RUNNING]
    op = make(fake_hook, deferrable=True, wait_before_defer=0.3, progress_timeout=600, pod_error_timeout=None)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    trigger = deferred.value.trigger
    _, kwargs = trigger.serialize()
    assert kwargs["leader"] == ["worker", 0] and kwargs["progress"]["step"] == 2
    assert kwargs["limits"]["progress_timeout"] == 600 and trigger.resume["leader"] == ["worker", 0]
    later = dict(kwargs["progress"], step=3, metrics={"loss": 0.1})
    later["history"] = [*later["history"], {"step": 3, "time": later["time"] + 2, "metrics": {"loss": 0.1}}]
    fake_hook.script = [SUCCEEDED]
    resumed = FakeTI()  # a new process: the operator only has what execute_complete is given
    event = {"status": "succeeded", "resume": trigger.resume, "log_cursors": kwargs["log_cursors"]}
    op.execute_complete({"ti": resumed}, {**event, "progress": later})
    assert resumed.xcoms["t9k_progress"]["step"] == 3
    assert [h["step"] for h in resumed.xcoms["t9k_progress"]["history"]] == [1, 2, 3]


def test_a_stalled_job_is_stopped_and_the_task_may_retry(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    name = reporting(fake_hook, ti)
    fake_hook.script = [RUNNING]  # Running since 2026-01-01: its last report is long overdue
    with pytest.raises(T9kJobTimeout) as stalled:
        make(fake_hook, progress_timeout=30, pod_error_timeout=None).execute(context)
    message = str(stalled.value)
    assert (
        "no progress report for progress_timeout=30s; the last: step 2/4 at 2026-01-01 00:00:04 UTC"
        in message
    )
    assert "the job was deleted (on_kill_action=delete)" in message
    assert fake_hook.deletes() == [name]


def test_progress_timeout_needs_the_leaders_log(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="progress_timeout: needs get_logs=True"):
        make(fake_hook, progress_timeout=60, get_logs=False)
    op = make(fake_hook, progress_timeout=60, log_replicas="worker/1")
    with pytest.raises(AirflowFailException, match="log_replicas: progress_timeout reads"):
        op.execute(context)
    assert not [c for c, _ in fake_hook.calls if c == "create"]  # refused before any call
