"""T9kJobTrigger: serialisation, the event of every way its wait ends, its hand-back, kill semantics (on_kill,
cleanup, the lease the kill path holds)."""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from typing import Any

import pytest

from t9k_provider.triggers.job import T9kJobTrigger
from tests.airflow.fakes import api_error
from tests.airflow.scripted import (
    FakeAsyncClient,
    cancelled,
    first_event,
    job,
    trigger,
    use_script,
)
from tests.airflow.versions import airflow3_only
from tests.support.builders import replica_pod, unschedulable, waiting

pytestmark = pytest.mark.timeout(60)


def test_serialisation_round_trip() -> None:
    original = trigger(limits={"startup_timeout": 5.0, "execution_deadline": 123.0}, logging_interval=30.0)
    classpath, kwargs = original.serialize()
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert classpath == "t9k_provider.triggers.job.T9kJobTrigger"
    import json

    json.dumps(kwargs)  # plain JSON: no client objects, no file paths the triggerer may lack


def test_serialisation_round_trip_with_live_logs() -> None:
    original = trigger(
        pod_selector="tensorstack.dev/owner-name=j",
        log_targets=[["worker", 0], [None, None]],
        log_cursors={"uid/main": [5, 1]},
    )
    classpath, kwargs = original.serialize()
    assert kwargs["log_targets"] == [["worker", 0], [None, None]]
    rebuilt = T9kJobTrigger(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert rebuilt.log_cursors == {"uid/main": [5, 1]}


async def test_succeeded(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(
        monkeypatch, [job("Pending"), job("Running"), job("Succeeded", ("Completed", "Succeeded", "ok"))]
    )
    event = await first_event(trigger(resume={"job": {"name": "j"}, "cursors": {"u/c": [5, 1]}}))
    assert event["status"] == "succeeded"
    assert event["job"]["phase"] == "Succeeded" and event["job"]["uid"] == "uid-1"
    assert event["resume"] == {"job": {"name": "j"}, "cursors": {"u/c": [5, 1]}}  # echoed for the worker


async def test_failed_carries_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Failed", ("Failed", "Failed", "The job exited with an error code."))])
    event = await first_event(trigger())
    assert event["status"] == "failed" and "error code" in event["message"]


async def test_startup_timeout_uses_creation_time(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Pending", created="2020-01-01T00:00:00Z")])
    event = await first_event(trigger(limits={"startup_timeout": 60}))
    assert event["status"] == "timeout" and "startup_timeout" in event["message"]


async def test_execution_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Running")])
    started = time.monotonic()
    event = await first_event(trigger(limits={"execution_deadline": time.time() + 0.3}, poll_interval=5))
    assert event["status"] == "timeout"
    assert time.monotonic() - started < 3  # the sleep was shortened to the deadline


async def test_paused_limit_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Paused", ("Paused", "", "paused"))])
    event = await first_event(trigger(limits={"paused_timeout": 1}))
    assert event["status"] == "failed" and "paused_timeout" in event["message"]


async def test_deleted_job(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [api_error(404)])
    event = await first_event(trigger())
    assert event["status"] == "error" and "deleted" in event["message"]


async def test_replaced_job_is_not_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Succeeded", uid="other")])
    event = await first_event(trigger())
    assert event["status"] == "error" and "replaced" in event["message"]


async def test_logging_interval_hands_back_to_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Running")])
    event = await first_event(trigger(logging_interval=0.05))
    assert event["status"] == "running"


async def test_on_kill_deletes_only_with_delete_action(monkeypatch: pytest.MonkeyPatch) -> None:
    deletes = use_script(monkeypatch, [job("Running")])
    for action in ("delete", "keep"):
        t = trigger(on_kill_action=action)
        await cancelled(t)
        await t.on_kill()
        await t.cleanup()
    assert deletes == [("j", "uid-1")]
    assert FakeAsyncClient.leases == 0  # cleanup released the lease the kill used


@pytest.mark.parametrize("after", [0.0, 0.1], ids=["at-start", "while-waiting"])
async def test_kill_path_builds_nothing(monkeypatch: pytest.MonkeyPatch, after: float) -> None:
    """on_kill and cleanup delete through the lease run() took first, even when no client could be built
    any more (an exec plugin that fails now) and the kill comes before run() awaited anything."""
    deletes = use_script(monkeypatch, [job("Running")])
    monkeypatch.setattr("t9k_provider.triggers.job.TRIGGER_ON_KILL", True)
    t = trigger()
    await cancelled(t, after)
    FakeAsyncClient.unbuildable = True
    await t.on_kill()
    assert deletes == [("j", "uid-1")]
    await t.cleanup()
    assert FakeAsyncClient.leases == 0


async def test_an_event_releases_every_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer that stops at the first event (dag.test()) calls no cleanup: nothing may stay leased."""
    use_script(monkeypatch, [job("Succeeded")])
    async for _ in trigger().run():
        assert FakeAsyncClient.leases == 0
        break


def logged_lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the trigger logs, whatever handlers the Airflow version (and earlier tests) configured."""
    lines: list[str] = []

    class Log:
        def _add(self, msg: str, *args: Any, **_: Any) -> None:
            lines.append(msg % args if args else msg)

        debug = info = warning = error = exception = _add

    monkeypatch.setattr(T9kJobTrigger, "log", property(lambda self: Log()))
    return lines


@pytest.mark.parametrize("status", [404, 409])
async def test_on_kill_of_a_job_already_gone(monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    """404: deleted between the kill's read and its delete; 409: a precondition failed, and the fresh read
    shows that the name holds another job now."""
    script = [job("Running")]
    deletes = use_script(monkeypatch, script)
    t = trigger()
    await cancelled(t)

    async def refuse(*args: Any, **kwargs: Any) -> None:
        script[:] = [job("Running", uid="another")]
        raise api_error(status)

    monkeypatch.setattr(FakeAsyncClient, "delete", refuse)
    lines = logged_lines(monkeypatch)
    await t.on_kill()
    assert deletes == []
    assert any("task killed: job ns/j already gone" in line for line in lines)


async def test_on_kill_keeps_a_job_that_already_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop policy of the worker's kill path: an ended job is kept (a later try reports its result)."""
    script = [job("Running")]
    deletes = use_script(monkeypatch, script)
    t = trigger()
    await cancelled(t)
    script[:] = [job("Succeeded")]
    lines = logged_lines(monkeypatch)
    await t.on_kill()
    assert deletes == []
    assert any("task killed: job ns/j had already ended; kept" in line for line in lines)


async def test_on_kill_of_a_job_that_changed_reads_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """409 on the resourceVersion precondition (the controller updated the job): read again, then delete."""
    deletes = use_script(monkeypatch, [job("Running")])
    monkeypatch.setattr(FakeAsyncClient, "delete_error", api_error(409))
    t = trigger()
    await cancelled(t)
    gets = FakeAsyncClient.gets
    await t.on_kill()
    assert deletes == [("j", "uid-1")]
    assert FakeAsyncClient.gets - gets == 2


async def test_on_kill_that_the_api_refuses_is_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any other refusal is reported in the log, never raised: the triggerer would only log it too."""
    deletes = use_script(monkeypatch, [job("Running")])
    monkeypatch.setattr(FakeAsyncClient, "delete_error", api_error(403, "forbidden"))
    t = trigger()
    await cancelled(t)
    lines = logged_lines(monkeypatch)
    await t.on_kill()
    assert deletes == []
    assert any("could not delete job ns/j" in line and "forbidden" in line for line in lines)


async def test_triggerer_restart_never_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelling run() (what a triggerer shutdown does) and cleanup() leave the job alone."""
    deletes = use_script(monkeypatch, [job("Running")])
    t = trigger(poll_interval=0.01)
    task = asyncio.ensure_future(first_event(t))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await t.cleanup()
    assert deletes == []


@pytest.mark.parametrize(
    ("state", "deleted"), [("deferred", False), (None, False), ("failed", True), ("success", True)]
)
async def test_cleanup_before_airflow_3_3_deletes_only_after_a_user_kill(
    monkeypatch: pytest.MonkeyPatch, state: str | None, deleted: bool
) -> None:
    deletes = use_script(monkeypatch, [job("Running")])
    monkeypatch.setattr("t9k_provider.triggers.job.TRIGGER_ON_KILL", False)
    t = trigger()

    async def task_state() -> str | None:
        return state

    monkeypatch.setattr(t, "_task_state", task_state)
    await cancelled(t)
    FakeAsyncClient.unbuildable = True  # the cleanup needs no new client
    await t.cleanup()
    assert bool(deletes) is deleted
    assert FakeAsyncClient.leases == 0


async def test_cleanup_is_inert_on_airflow_3_3_and_after_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    deletes = use_script(monkeypatch, [job("Succeeded")])
    t = trigger()

    async def killed() -> str:
        return "failed"

    monkeypatch.setattr(t, "_task_state", killed)
    monkeypatch.setattr("t9k_provider.triggers.job.TRIGGER_ON_KILL", True)
    await t.cleanup()  # 3.3+: on_kill is the only path
    monkeypatch.setattr("t9k_provider.triggers.job.TRIGGER_ON_KILL", False)
    await first_event(t)
    await t.cleanup()  # the event already handed the job back to a worker
    await t.on_kill()
    assert deletes == []


@airflow3_only("the triggerer reads task states through the execution API (RuntimeTaskInstance)")
async def test_task_state_reads_the_mapped_key(mocker: Any) -> None:
    get_states = mocker.patch(
        "airflow.sdk.execution_time.task_runner.RuntimeTaskInstance.get_task_states",
        return_value={"run": {"job_3": "deferred"}},
    )
    t = trigger()
    t.task_instance = mocker.Mock(
        dag_id="d",
        task_id="job",
        run_id="run",
        map_index=3,
        spec=["dag_id", "task_id", "run_id", "map_index"],
    )
    assert await t._task_state() == "deferred"
    assert get_states.call_args.kwargs["map_index"] == 3


async def test_replica_that_cannot_start_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Pending")])
    stuck = waiting(replica_pod("j-worker-0", "worker", 0, "j"), "InvalidImageName")
    monkeypatch.setattr(FakeAsyncClient, "pods", [stuck])
    event = await first_event(
        trigger(limits={"pod_error_timeout": 0}, pod_selector="tensorstack.dev/owner-name=j")
    )
    assert event["status"] == "timeout" and "InvalidImageName" in event["message"]


@pytest.mark.parametrize(("state", "lists"), [("running", False), ("waiting", True)])
async def test_pods_are_listed_only_while_a_replica_has_not_started(
    monkeypatch: pytest.MonkeyPatch, state: str, lists: bool
) -> None:
    running = job("Running")
    running["status"]["tasks"] = [
        {
            "type": "worker",
            "replicas": [{"name": "j-worker-0", "containers": [{"name": "main", "state": state}]}],
        }
    ]
    use_script(monkeypatch, [running])
    monkeypatch.setattr(FakeAsyncClient, "pod_lists", 0)
    t = trigger(
        limits={"pod_error_timeout": 60}, pod_selector="tensorstack.dev/owner-name=j", poll_interval=0.05
    )
    task = asyncio.ensure_future(first_event(t))
    await asyncio.sleep(1.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (FakeAsyncClient.pod_lists > 3) is lists


async def test_trigger_logs_why_a_pending_job_waits(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    use_script(monkeypatch, [job("Pending"), job("Succeeded")])
    pending = unschedulable(replica_pod("j-worker-0", "worker", 0, "j"), "0/1 nodes")
    monkeypatch.setattr(FakeAsyncClient, "pods", [pending])
    monkeypatch.setattr("t9k_provider.waiting.notes.READ_INTERVAL", 0.0)
    with caplog.at_level(logging.INFO):
        event = await first_event(trigger(pod_selector="tensorstack.dev/owner-name=j"))
    assert event["status"] == "succeeded"
    logged = caplog.text + capsys.readouterr().out  # Airflow 3 triggers log through structlog to stdout
    assert "job waits: pod j-worker-0 is not scheduled: 0/1 nodes" in logged
