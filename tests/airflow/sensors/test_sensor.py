"""T9kJobSensor: poke outcomes, Paused/Unknown limits, deferrable path."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, TaskDeferred

from t9k_provider.hooks.errors import T9kFatalApiError
from t9k_provider.sensors import T9kJobSensor
from t9k_provider.triggers.job import T9kJobTrigger
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS
from tests.airflow.fakes import FakeHook, api_error
from tests.support.builders import generic_manifest, with_status

pytestmark = pytest.mark.timeout(60)


def sensor(hook: FakeHook, **kwargs: Any) -> T9kJobSensor:
    s = T9kJobSensor(
        task_id="wait", kind=kwargs.pop("kind", "GenericJob"), name="j", poke_interval=0.01, **kwargs
    )
    s.__dict__["hook"] = hook
    return s


def put(hook: FakeHook, phase: str, *conditions: tuple[str, str, str]) -> None:
    hook.jobs.clear()
    hook.put(with_status(generic_manifest("j", namespace="conn-ns"), phase, *conditions))


@pytest.mark.parametrize(("phase", "done"), [("Pending", False), ("Running", False), ("Succeeded", True)])
def test_poke(fake_hook: FakeHook, context: dict[str, Any], phase: str, done: bool) -> None:
    put(fake_hook, phase)
    assert sensor(fake_hook).poke(context) is done


def test_failed_raises_with_reason(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    put(fake_hook, "Failed", ("Failed", "Failed", "The job exited with an error code."))
    with pytest.raises(AirflowFailException, match="error code"):
        sensor(fake_hook).poke(context)


def test_paused_keeps_waiting_by_default_and_fails_after_limit(
    fake_hook: FakeHook, context: dict[str, Any]
) -> None:
    put(fake_hook, "Paused", ("Paused", "", "paused"))  # condition dated 2026-01-01: long ago
    assert sensor(fake_hook).poke(context) is False
    with pytest.raises(AirflowFailException, match="paused_timeout"):
        sensor(fake_hook, paused_timeout=60).poke(context)


def test_unknown_limit(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    put(fake_hook, "Unknown")
    s = sensor(fake_hook, unknown_timeout=0)
    with pytest.raises(AirflowFailException, match="unknown_timeout"):
        s.poke(context)


def test_missing_job_fails(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    with pytest.raises(T9kFatalApiError, match="not found"):
        sensor(fake_hook).poke(context)


def test_forbidden_fails(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    fake_hook.failures["get_job"] = [api_error(403, "forbidden")]
    with pytest.raises(AirflowFailException, match="permission denied"):
        sensor(fake_hook).poke(context)


def test_unknown_kind(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    with pytest.raises(AirflowFailException, match="not a T9k Job kind"):
        sensor(fake_hook, kind="SparkApplication").poke(context)


def test_old_kind_spelling(fake_hook: FakeHook) -> None:
    assert sensor(fake_hook, kind="DeepspeedJob").plural == "deepspeedjobs"


def test_poke_mode_execute_until_success(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    put(fake_hook, "Running")
    fake_hook.script = [("Running", ()), ("Succeeded", ())]
    sensor(fake_hook, timeout=30).execute(context)


def test_deferrable_defers_then_completes(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    put(fake_hook, "Running")
    s = sensor(fake_hook, deferrable=True, paused_timeout=10)
    with pytest.raises(TaskDeferred) as deferred:
        s.execute(context)
    trigger = deferred.value.trigger
    assert isinstance(trigger, T9kJobTrigger)
    assert trigger.on_kill_action == "keep" and trigger.limits["paused_timeout"] == 10
    s.execute_complete(context, {"status": "succeeded"})
    with pytest.raises(AirflowFailException):
        s.execute_complete(context, {"status": "failed", "message": "boom"})
    with pytest.raises(AirflowException):
        s.execute_complete(context, {"status": "error", "message": "api", "retryable": True})


def test_deferrable_finishes_immediately_when_already_done(
    fake_hook: FakeHook, context: dict[str, Any]
) -> None:
    put(fake_hook, "Succeeded")
    sensor(fake_hook, deferrable=True).execute(context)


def test_reschedule_mode_frees_the_worker_between_pokes(
    fake_hook: FakeHook, context: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.airflow.versions import AirflowRescheduleException

    if not AIRFLOW_V_3_0_PLUS:  # Airflow 2 reads the first try's start from the metadata database
        monkeypatch.setattr("airflow.sensors.base._orig_start_date", lambda **_: None)
    put(fake_hook, "Running")
    context["task_reschedule_count"] = 0
    with pytest.raises(AirflowRescheduleException):
        sensor(fake_hook, mode="reschedule").execute(context)
