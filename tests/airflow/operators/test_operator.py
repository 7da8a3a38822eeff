"""T9kJobOperator against an in-memory hook: every submit/adopt/wait/conclude/kill path."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, TaskDeferred

from t9k_provider.jobclient import identity as ident
from t9k_provider.jobs import KINDS
from t9k_provider.operators import (
    GenericJobOperator,
    PyTorchTrainingJobOperator,
    T9kJobFailed,
    T9kJobOperator,
    T9kJobTimeout,
)
from t9k_provider.operators.failures import T9kConfigurationError, T9kInfrastructureError
from t9k_provider.triggers.job import T9kJobTrigger
from tests.airflow.fakes import FakeHook, FakeTI, api_error, make
from tests.support.builders import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    generic_manifest,
    our_job,
    replica_pod,
    terminated,
    unschedulable,
    waiting,
)

pytestmark = pytest.mark.timeout(60)


def test_constructor_does_not_touch_the_cluster() -> None:
    op = T9kJobOperator(task_id="t", manifest=generic_manifest())
    assert "hook" not in op.__dict__


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"reattach_policy": "sometimes"}, "reattach_policy"),
        ({"on_finish_action": "explode"}, "on_finish_action"),
        ({"on_kill_action": "ignore"}, "on_kill_action"),
        ({"poll_interval": 0}, "poll_interval"),
        ({"startup_timeout": -5}, "startup_timeout"),
        ({"log_replicas": "worker/abc"}, "log_replicas"),
    ],
)
def test_bad_parameters_fail_at_parse_time(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        T9kJobOperator(task_id="t", manifest=generic_manifest(), **kwargs)


def test_submit_and_succeed(fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI) -> None:
    fake_hook.script = [PENDING, RUNNING, SUCCEEDED]
    result = make(fake_hook).execute(context)
    created = fake_hook.calls[0][1]
    name = created["metadata"]["name"]
    assert name == ident.job_name(ident.task_identity(ti))
    assert created["metadata"]["namespace"] == "conn-ns"
    annotations = created["metadata"]["annotations"]
    assert annotations[ident.DAG_ID] == "dag" and annotations[ident.RUN_ID] == ti.run_id
    assert annotations[ident.TRY_NUMBER] == "1"
    assert ti.xcoms["t9k_job"] == {
        "kind": "GenericJob",
        "plural": "genericjobs",
        "name": name,
        "namespace": "conn-ns",
        "uid": "uid-1",
    }
    assert result["phase"] == "Succeeded" and result["name"] == name and result["uid"] == "uid-1"
    assert result["replicas"] == {"worker": 2}
    assert fake_hook.jobs[("conn-ns", name)]["metadata"]["annotations"][ident.CHECKED] == "true"
    assert fake_hook.deletes() == []  # on_finish_action=keep


def test_manifest_name_and_namespace_are_respected(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    fake_hook.script = [SUCCEEDED]
    make(fake_hook, manifest=generic_manifest("mine", namespace="team"), exact_name=True).execute(context)
    assert ("team", "mine") in fake_hook.jobs


def test_explicit_name_is_a_prefix_unique_to_the_task_instance(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    """As KubernetesPodOperator's ``random_name_suffix``, but stable across tries so a retry finds its job."""
    fake_hook.script = [SUCCEEDED]
    manifest = generic_manifest("sweep", namespace="team", generateName="ignored-")
    result = make(fake_hook, manifest=manifest).execute(context)
    assert result["name"] == ident.job_name(ident.task_identity(ti), prefix="sweep")
    assert result["name"].startswith("sweep-") and len(result["name"]) <= ident.MAX_GENERATED_NAME
    (created,) = [body for call, body in fake_hook.calls if call == "create"]
    assert "generateName" not in created["metadata"]
    other = FakeTI(map_index=1)
    make(fake_hook, manifest=manifest).execute({"ti": other, "run_id": other.run_id})
    assert len(fake_hook.jobs) == 2  # another mapped instance: another job, no conflict


def test_operator_namespace_must_agree_with_manifest(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    op = make(fake_hook, manifest=generic_manifest("mine", namespace="team"), namespace="other")
    with pytest.raises(AirflowFailException, match=r"metadata\.namespace"):
        op.execute(context)
    assert fake_hook.calls == []


def test_invalid_manifest_fails_before_any_api_call(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    bad = generic_manifest()
    bad["spec"]["replicaSpecs"][0]["replica"] = 3
    with pytest.raises(AirflowFailException, match=r"spec\.replicaSpecs\[0\]\.replica"):
        make(fake_hook, manifest=bad).execute(context)
    assert fake_hook.calls == []


def test_kind_operator_rejects_other_kinds(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    with pytest.raises(AirflowFailException, match="PyTorchTrainingJob"):
        make(fake_hook, cls=PyTorchTrainingJobOperator).execute(context)
    assert fake_hook.calls == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_its_operator(kind: str) -> None:
    import t9k_provider.operators
    from t9k_provider.operators import kinds

    name = f"{kind}Operator"
    cls = getattr(t9k_provider.operators, name)
    assert name in t9k_provider.operators.__all__ and getattr(kinds, name) is cls
    assert issubclass(cls, T9kJobOperator) and cls.job_kind == kind
    # Airflow names the task's logger and the serialized task type after these.
    assert (cls.__module__, cls.__qualname__) == ("t9k_provider.operators.kinds", name)


def test_yaml_text_and_typed_model_are_accepted(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    import yaml

    from t9k_provider.jobs import load

    fake_hook.script = [SUCCEEDED]
    text = yaml.safe_dump(generic_manifest("a"))
    make(fake_hook, cls=GenericJobOperator, manifest=text, exact_name=True).execute(context)
    op = make(fake_hook, cls=GenericJobOperator, manifest=load(generic_manifest("b")), exact_name=True)
    assert isinstance(op.manifest, dict)
    op.execute(context)
    assert {("conn-ns", "a"), ("conn-ns", "b")} <= set(fake_hook.jobs)


def test_adopts_running_job_of_an_earlier_try(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    fake_hook.put(our_job(ti, RUNNING))
    fake_hook.script = [RUNNING, SUCCEEDED]
    ti.try_number = 2
    result = make(fake_hook).execute(context)
    assert result["uid"] == "uid-1"
    assert [c for c, _ in fake_hook.calls].count("create") == 1  # the attempt that hit 409
    assert fake_hook.deletes() == []
    assert len(fake_hook.jobs) == 1


def test_conflict_with_a_job_that_is_not_ours_fails(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    fake_hook.put(generic_manifest("taken", namespace="conn-ns"))
    with pytest.raises(AirflowFailException, match="not created by this task instance"):
        make(fake_hook, manifest=generic_manifest("taken"), exact_name=True).execute(context)
    assert fake_hook.deletes() == []


@pytest.mark.parametrize(
    ("policy", "phase", "checked", "adopted"),
    [
        ("if_unchecked", SUCCEEDED, False, True),
        ("if_unchecked", FAILED, True, False),
        ("if_unchecked", RUNNING, True, False),
        ("if_running", SUCCEEDED, False, False),
        ("if_running", RUNNING, False, True),
        ("never", RUNNING, False, False),
    ],
)
def test_reattach_policy(
    fake_hook: FakeHook,
    context: dict[str, Any],
    ti: FakeTI,
    policy: str,
    phase: tuple,
    checked: bool,
    adopted: bool,
) -> None:
    fake_hook.put(our_job(ti, phase, checked=checked))
    fake_hook.script = [phase, SUCCEEDED]
    result = make(fake_hook, reattach_policy=policy).execute(context)
    assert (result["uid"] == "uid-1") is adopted
    assert (fake_hook.deletes() == []) is adopted
    assert len(fake_hook.jobs) == 1


def test_reattach_policy_callable(fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI) -> None:
    fake_hook.put(our_job(ti, RUNNING))
    fake_hook.script = [SUCCEEDED]
    seen: list[str] = []
    result = make(
        fake_hook, reattach_policy=lambda job: seen.append(job["metadata"]["uid"]) or False
    ).execute(context)
    assert seen == ["uid-1"] and result["uid"] == "uid-2"


def test_failed_job_fails_without_retry_and_explains(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    op = make(fake_hook)
    name = ident.job_name(ident.task_identity(context["ti"]))
    fake_hook.script = [
        RUNNING,
        (
            "Failed",
            (("Failed", "Failed", "The job is failed with rule: { worker: [1] }"),),
        ),
    ]
    fake_hook.pods = [replica_pod(f"{name}-worker-1", "worker", 1, name)]
    fake_hook.logs[(f"{name}-worker-1", "main")] = "2026-01-01T00:00:01Z Traceback: ZeroDivisionError\n"
    fake_hook.events[f"{name}-worker-1"] = [{"type": "Warning", "reason": "BackOff", "message": "crashed"}]
    original_get = fake_hook.get_job

    def get_with_tasks(*args: Any) -> dict[str, Any]:
        job = original_get(*args)
        job.setdefault("status", {})["tasks"] = [
            {
                "type": "worker",
                "replicas": [{"name": f"{name}-worker-1", "phase": "Failed", "containers": []}],
            }
        ]
        return job

    fake_hook.get_job = get_with_tasks  # type: ignore[method-assign]
    with pytest.raises(T9kJobFailed) as failure:
        op.execute(context)
    message = str(failure.value)
    assert "The job is failed with rule" in message
    assert "ZeroDivisionError" in message
    assert "BackOff: crashed" in message
    assert isinstance(failure.value, AirflowFailException)
    assert fake_hook.jobs[("conn-ns", name)]["metadata"]["annotations"][ident.CHECKED] == "true"


def test_failed_job_can_be_made_retryable(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    fake_hook.script = [FAILED]
    with pytest.raises(AirflowException) as failure:
        make(fake_hook, retry_on_job_failure=True).execute(context)
    assert not isinstance(failure.value, AirflowFailException)


RANK_1_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered (shard 7)"


def rank_1_fails_first(hook: FakeHook, name: str) -> None:
    """Rank 1 fails at second 1 with a distinctive error, rank 0 two seconds later with a connection error;
    the job's status lists worker-0 first, as a controller may."""
    hook.pods = [
        terminated(replica_pod(f"{name}-worker-0", "worker", 0, name), 0, 3, 1),
        terminated(replica_pod(f"{name}-worker-1", "worker", 1, name), 0, 1, 3),
    ]
    hook.logs[(f"{name}-worker-0", "main")] = (
        "2026-01-01T00:00:00Z step 1\n2026-01-01T00:00:03Z RuntimeError: connection reset by peer\n"
    )
    hook.logs[(f"{name}-worker-1", "main")] = (
        f"2026-01-01T00:00:00Z step 1\n2026-01-01T00:00:01Z {RANK_1_ERROR}\n"
    )
    original_get = hook.get_job

    def get_with_tasks(*args: Any) -> dict[str, Any]:
        job = original_get(*args)
        replicas = [{"name": f"{name}-worker-{i}", "phase": "Failed", "containers": []} for i in range(2)]
        job.setdefault("status", {})["tasks"] = [{"type": "worker", "replicas": replicas}]
        return job

    hook.get_job = get_with_tasks  # type: ignore[method-assign]


@pytest.mark.parametrize("deferrable", [False, True])
def test_a_distributed_failure_leads_with_the_replica_that_failed_first(
    fake_hook: FakeHook, context: dict[str, Any], deferrable: bool
) -> None:
    name = ident.job_name(ident.task_identity(context["ti"]))
    rank_1_fails_first(fake_hook, name)
    with pytest.raises(T9kJobFailed) as failure:
        if deferrable:
            fake_hook.script = [RUNNING]
            op, resume = _deferred(fake_hook, context)
            fake_hook.script = [FAILED]
            op.execute_complete(context, {"status": "failed", "message": "", "resume": resume})
        else:
            fake_hook.script = [RUNNING, FAILED]
            make(fake_hook).execute(context)
    message = str(failure.value)
    assert message.splitlines()[0] == (
        f"job conn-ns/{name} failed: {name}-worker-1 failed first, at 2026-01-01T00:00:01Z: exit code 3"
    )
    assert f"last 50 log lines of {name}-worker-1:\n[{name}-worker-1/main] step 1" in message
    assert message.index(RANK_1_ERROR) < message.index("connection reset by peer")
    after = f"  {name}-worker-0, 2 s later: exit code 1; last line: RuntimeError: connection reset by peer"
    assert f"then, after it:\n{after}\nphase: Failed\ncondition Failed=True: Failed The job" in message


@pytest.mark.parametrize(
    ("action", "deleted_on_success", "deleted_on_failure"),
    [("keep", False, False), ("delete", True, True), ("delete_on_success", True, False)],
)
def test_on_finish_action(
    fake_hook: FakeHook,
    context: dict[str, Any],
    action: str,
    deleted_on_success: bool,
    deleted_on_failure: bool,
) -> None:
    fake_hook.script = [SUCCEEDED]
    make(fake_hook, on_finish_action=action, manifest=generic_manifest("ok")).execute(context)
    assert bool(fake_hook.deletes()) is deleted_on_success
    fake_hook.calls.clear()
    fake_hook.script = [FAILED]
    with pytest.raises(T9kJobFailed):
        make(fake_hook, on_finish_action=action, manifest=generic_manifest("bad")).execute(context)
    assert bool(fake_hook.deletes()) is deleted_on_failure


@pytest.mark.parametrize("kill_action", ["delete", "keep"])
def test_startup_timeout_stops_the_job(
    fake_hook: FakeHook, context: dict[str, Any], kill_action: str
) -> None:
    fake_hook.script = [PENDING]
    # the cluster did not place the job in time: an infrastructure ending, retried
    with pytest.raises(T9kInfrastructureError, match=r"startup_timeout=0\.05s"):
        make(fake_hook, startup_timeout=0.05, on_kill_action=kill_action).execute(context)
    assert bool(fake_hook.deletes()) is (kill_action == "delete")


def test_running_timeout(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    fake_hook.script = [("Running", ())]  # no Running condition: measured from first observation
    with pytest.raises(T9kJobTimeout, match="running_timeout"):
        make(fake_hook, running_timeout=0.05).execute(context)
    assert fake_hook.deletes()


def test_execution_timeout_is_an_absolute_deadline(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    from datetime import datetime, timezone

    ti.start_date = datetime.now(timezone.utc) - timedelta(seconds=30)
    fake_hook.script = [RUNNING]
    with pytest.raises(T9kJobTimeout, match="execution_timeout"):
        make(fake_hook, execution_timeout=timedelta(seconds=10)).execute(context)


def test_paused_too_long_fails(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    fake_hook.script = [("Paused", (("Paused", "", "paused by user"),))]
    with pytest.raises(AirflowFailException, match="paused_timeout"):
        make(fake_hook, paused_timeout=1).execute(context)


def test_success_is_decided_on_a_fresh_read(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    # The waiting loop saw a deadline (the job as created: Pending), but by the time we re-read the job it had
    # succeeded: success wins.
    fake_hook.script = [SUCCEEDED]
    result = make(fake_hook, startup_timeout=0).execute(context)
    assert result["phase"] == "Succeeded"
    assert fake_hook.deletes() == []


def test_transient_read_errors_surface_as_retryable(
    fake_hook: FakeHook, context: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("t9k_provider.jobclient.feed.MAX_CONSECUTIVE_ERRORS", 2)
    monkeypatch.setattr("t9k_provider.hooks.errors.BACKOFF_BASE_SECONDS", 0.001)
    fake_hook.script = [RUNNING]
    fake_hook.failures["get_job"] = [api_error(503)] * 4  # the wait's reads, then the conclusion's, fail
    with pytest.raises(AirflowException) as failure:
        make(fake_hook).execute(context)
    assert not isinstance(failure.value, AirflowFailException)
    assert "503" in str(failure.value)


def test_job_deleted_while_waiting(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    op = make(fake_hook)
    original = fake_hook.get_job
    reads = []

    def vanish(plural: str, namespace: str, name: str) -> dict[str, Any]:
        reads.append(name)
        if len(reads) == 2:
            fake_hook.jobs.clear()
        return original(plural, namespace, name)

    fake_hook.script = [RUNNING]
    fake_hook.get_job = vanish  # type: ignore[method-assign]
    with pytest.raises(AirflowException, match="deleted while the task waited"):
        op.execute(context)


def test_kill_while_running_deletes_and_never_succeeds(
    fake_hook: FakeHook, context: dict[str, Any], mocker: Any
) -> None:
    mocker.patch("t9k_provider.hooks.t9k.T9kHook", return_value=fake_hook)
    op = make(fake_hook)
    original = fake_hook.get_job
    reads = []

    def kill_on_second_read(*args: Any) -> dict[str, Any]:
        reads.append(1)
        if len(reads) == 2:
            op.on_kill()  # what the task runner does on SIGTERM, between two polls
        return original(*args)

    fake_hook.script = [RUNNING]
    fake_hook.get_job = kill_on_second_read  # type: ignore[method-assign]
    with pytest.raises(AirflowException, match="killed"):
        op.execute(context)
    assert len(fake_hook.deletes()) == 1 and fake_hook.jobs == {}


def test_kill_with_keep_leaves_the_job(fake_hook: FakeHook, context: dict[str, Any], mocker: Any) -> None:
    factory = mocker.patch("t9k_provider.hooks.t9k.T9kHook", return_value=fake_hook)
    op = make(fake_hook, on_kill_action="keep", wait_for_completion=False)
    op.execute(context)
    op.on_kill()
    factory.assert_not_called()
    assert len(fake_hook.jobs) == 1


def test_no_wait_returns_after_submission(fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI) -> None:
    result = make(fake_hook, wait_for_completion=False).execute(context)
    assert result["name"] == ti.xcoms["t9k_job"]["name"] and result["phase"] is None


def test_extra_link_is_persisted_before_waiting(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    from t9k_provider.links.job import T9kJobLink

    make(
        fake_hook, wait_for_completion=False, job_url_template="https://t9k.example/{namespace}/{kind}/{name}"
    ).execute(context)
    url = ti.xcoms[T9kJobLink().xcom_key]
    assert url == f"https://t9k.example/conn-ns/GenericJob/{ti.xcoms['t9k_job']['name']}"


def test_leader_logs_are_copied_while_waiting(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    name = ident.job_name(ident.task_identity(context["ti"]))
    fake_hook.pods = [
        replica_pod(f"{name}-worker-0", "worker", 0, name),
        replica_pod(f"{name}-worker-1", "worker", 1, name),
    ]
    fake_hook.logs[(f"{name}-worker-0", "main")] = "2026-01-01T00:00:01Z epoch 1 loss 0.5\n"
    fake_hook.script = [RUNNING, SUCCEEDED]
    make(fake_hook).execute(context)
    read = {args[0] for call, args in fake_hook.calls if call == "log"}
    assert read == {f"{name}-worker-0"}


def test_get_logs_false_reads_no_logs(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    name = ident.job_name(ident.task_identity(context["ti"]))
    fake_hook.pods = [replica_pod(f"{name}-worker-0", "worker", 0, name)]
    fake_hook.script = [SUCCEEDED]
    make(fake_hook, get_logs=False).execute(context)
    assert not [c for c, _ in fake_hook.calls if c == "log"]


# -- deferrable ----------------------------------------------------------------------------------------


def test_deferrable_defers_with_identity_and_deadline(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    op = make(fake_hook, deferrable=True, execution_timeout=timedelta(minutes=5), startup_timeout=60)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    trigger = deferred.value.trigger
    assert isinstance(trigger, T9kJobTrigger)
    assert trigger.name == ti.xcoms["t9k_job"]["name"] and trigger.uid == "uid-1"
    assert trigger.credentials == fake_hook.credentials
    assert trigger.limits["startup_timeout"] == 60 and trigger.limits["pod_error_timeout"] == 120
    assert trigger.pod_selector == f"tensorstack.dev/owner-name={trigger.name}"
    assert trigger.limits["execution_deadline"] == pytest.approx(ti.start_date.timestamp() + 300)
    assert deferred.value.method_name == "execute_complete"
    # The framework's own timeout trails the trigger's deadline, so the trigger reports the timeout itself.
    assert deferred.value.timeout > timedelta(minutes=5)
    assert trigger.resume["job"] == ti.xcoms["t9k_job"]
    assert not deferred.value.kwargs  # nothing outside the event: dag.test() and triggerers may drop kwargs


def test_job_that_ends_within_the_wait_before_defer_concludes_without_deferring(
    fake_hook: FakeHook, context: dict[str, Any]
) -> None:
    fake_hook.script = [PENDING, RUNNING, SUCCEEDED]
    started = time.monotonic()
    result = make(fake_hook, deferrable=True, wait_before_defer=30).execute(context)  # no TaskDeferred
    assert result["phase"] == "Succeeded"
    assert time.monotonic() - started < 10  # it followed the changes: no waiting out the 30 s


def test_job_still_running_after_the_wait_defers_with_the_log_cursors(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    name = ident.job_name(ident.task_identity(ti))
    fake_hook.pods = [replica_pod(f"{name}-worker-0", "worker", 0, name)]
    fake_hook.logs[(f"{name}-worker-0", "main")] = "2026-01-01T00:00:01Z epoch 1 loss=0.5\n"
    fake_hook.script = [RUNNING]
    started = time.monotonic()
    with pytest.raises(TaskDeferred) as deferred:
        make(fake_hook, deferrable=True, wait_before_defer=0.3).execute(context)
    assert time.monotonic() - started >= 0.3
    # what the worker printed while it waited is not printed again after the deferral
    assert list(deferred.value.trigger.log_cursors) == [f"pod-{name}-worker-0/main"]


@pytest.mark.parametrize("phase", [SUCCEEDED, FAILED], ids=["succeeded", "failed"])
def test_adopted_job_that_already_ended_is_never_deferred(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, phase: tuple
) -> None:
    fake_hook.put(our_job(ti, phase))
    fake_hook.script = [phase]
    op = make(fake_hook, deferrable=True)  # wait_before_defer=0
    if phase is SUCCEEDED:
        assert op.execute(context)["phase"] == "Succeeded"
    else:
        with pytest.raises(T9kJobFailed):
            op.execute(context)


def test_wait_before_defer_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="wait_before_defer"):
        T9kJobOperator(task_id="t", manifest=generic_manifest(), wait_before_defer=-1)


def _deferred(
    fake_hook: FakeHook, context: dict[str, Any], **kwargs: Any
) -> tuple[T9kJobOperator, dict[str, Any]]:
    op = make(fake_hook, deferrable=True, **kwargs)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    return op, deferred.value.trigger.resume


def test_execute_complete_success_rereads(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    op, resume = _deferred(fake_hook, context)
    fake_hook.script = [SUCCEEDED]
    result = op.execute_complete(context, {"status": "succeeded", "message": "", "resume": resume})
    assert result["phase"] == "Succeeded"


def test_execute_complete_failed(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    op, resume = _deferred(fake_hook, context)
    fake_hook.script = [FAILED]
    with pytest.raises(T9kJobFailed, match="failed with rule"):
        op.execute_complete(context, {"status": "failed", "message": "x", "resume": resume})


def test_execute_complete_timeout_deletes(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    op, resume = _deferred(fake_hook, context)
    fake_hook.script = [PENDING]
    with pytest.raises(T9kJobTimeout, match="startup_timeout"):
        op.execute_complete(
            context,
            {"status": "timeout", "message": "job still Pending after startup_timeout", "resume": resume},
        )
    assert fake_hook.deletes()


def test_execute_complete_timeout_but_succeeded_meanwhile(
    fake_hook: FakeHook, context: dict[str, Any]
) -> None:
    op, resume = _deferred(fake_hook, context)
    fake_hook.script = [SUCCEEDED]
    assert (
        op.execute_complete(context, {"status": "timeout", "message": "late", "resume": resume})["phase"]
        == "Succeeded"
    )
    assert fake_hook.deletes() == []


@pytest.mark.parametrize(("retryable", "fatal"), [(True, False), (False, True)])
def test_execute_complete_error(
    fake_hook: FakeHook, context: dict[str, Any], retryable: bool, fatal: bool
) -> None:
    op, resume = _deferred(fake_hook, context)
    fake_hook.script = [RUNNING]
    with pytest.raises(AirflowException) as failure:
        op.execute_complete(
            context, {"status": "error", "message": "api down", "retryable": retryable, "resume": resume}
        )
    assert isinstance(failure.value, AirflowFailException) is fatal
    assert fake_hook.deletes() == []


def test_log_hand_back_concludes_a_job_that_ended_meanwhile(
    fake_hook: FakeHook, context: dict[str, Any]
) -> None:
    op, resume = _deferred(fake_hook, context, logging_interval=30)
    fake_hook.script = [SUCCEEDED]
    assert op.execute_complete(context, {"status": "running", "resume": resume})["phase"] == "Succeeded"


def test_execute_complete_running_prints_logs_and_defers_again(
    fake_hook: FakeHook, context: dict[str, Any]
) -> None:
    op, resume = _deferred(fake_hook, context, logging_interval=30)
    name = resume["job"]["name"]
    fake_hook.pods = [replica_pod(f"{name}-worker-0", "worker", 0, name)]
    fake_hook.logs[(f"{name}-worker-0", "main")] = "2026-01-01T00:00:01Z step 1\n"
    fake_hook.script = [RUNNING]
    with pytest.raises(TaskDeferred) as again:
        op.execute_complete(context, {"status": "running", "message": "", "resume": resume})
    cursors = again.value.trigger.log_cursors
    assert list(cursors) == [f"pod-{name}-worker-0/main"]
    assert again.value.trigger.logging_interval == 30
    # The next re-entry continues after the cursor: nothing is printed twice.
    fake_hook.calls.clear()
    fake_hook.logs[(f"{name}-worker-0", "main")] += "2026-01-01T00:00:02Z step 2\n"
    with pytest.raises(TaskDeferred) as third:
        op.execute_complete(
            context,
            {
                "status": "running",
                "message": "",
                "resume": again.value.trigger.resume,
                "log_cursors": again.value.trigger.log_cursors,
            },
        )
    assert (
        third.value.trigger.log_cursors[f"pod-{name}-worker-0/main"][0]
        > cursors[f"pod-{name}-worker-0/main"][0]
    )


# -- templating and dry run ----------------------------------------------------------------------------


def _render(op: T9kJobOperator, context: dict[str, Any]) -> None:
    op.render_template_fields(context)


def test_manifest_file_is_rendered_once_with_jinja(tmp_path: Path, fake_hook: FakeHook, ti: FakeTI) -> None:
    import yaml
    from airflow.providers.common.compat.sdk import DAG

    manifest = generic_manifest("job-{{ params.size }}")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(manifest))
    with DAG("d", template_searchpath=[str(tmp_path)], schedule=None, params={"size": "large"}):
        op = make(fake_hook, manifest="job.yaml", exact_name=True)
    context = {"ti": ti, "params": {"size": "large"}}
    _render(op, context)
    assert "job-large" in op.manifest
    fake_hook.script = [SUCCEEDED]
    op.execute(context)
    assert ("conn-ns", "job-large") in fake_hook.jobs


def test_absolute_manifest_path_is_rendered(tmp_path: Path, fake_hook: FakeHook, ti: FakeTI) -> None:
    import yaml
    from airflow.providers.common.compat.sdk import DAG

    path = tmp_path / "abs.yml"
    path.write_text(yaml.safe_dump(generic_manifest("abs-{{ params.n }}")))
    with DAG("d2", schedule=None, params={"n": "7"}):
        op = make(fake_hook, manifest=str(path))
    _render(op, {"ti": ti, "params": {"n": "7"}})
    assert "abs-7" in op.manifest


def test_dry_run_needs_no_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    op = T9kJobOperator(task_id="t", manifest=generic_manifest(), namespace="ns1")
    op.dry_run()
    out = capsys.readouterr().out
    assert "kind: GenericJob" in out and "namespace: ns1" in out and "name: t-" in out
    assert "hook" not in op.__dict__


def test_template_fields_render_the_manifest_dict(fake_hook: FakeHook, ti: FakeTI) -> None:
    manifest = generic_manifest("{{ params.job }}")
    op = make(fake_hook, manifest=manifest)
    from airflow.providers.common.compat.sdk import DAG

    with DAG("d3", schedule=None):
        pass
    op.dag = None
    op.render_template_fields({"ti": ti, "params": {"job": "from-param"}})
    assert op.manifest["metadata"]["name"] == "from-param"


def test_strings_in_a_manifest_dict_are_rendered_never_loaded_as_files(
    tmp_path: Path, fake_hook: FakeHook, ti: FakeTI
) -> None:
    """Only a ``manifest`` string names a template file: paths ending in .yaml/.yml/.json inside a dict
    manifest (args, env) are strings to render, even where a file of that name exists."""
    from airflow.providers.common.compat.sdk import DAG

    (tmp_path / "config.yaml").write_text("not: this")
    manifest = generic_manifest("{{ params.job }}")
    container = manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container["args"] = ["--config", "config.yaml", "--out", "{{ params.job }}/metrics.json"]
    container["env"] = [{"name": "SETTINGS", "value": "/etc/app/settings.yml"}]
    with DAG("d4", template_searchpath=[str(tmp_path)], schedule=None):
        op = make(fake_hook, manifest=manifest, config_file="kube.yaml")
    op.render_template_fields({"ti": ti, "params": {"job": "run-1"}})
    container = op.manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    assert container["args"] == ["--config", "config.yaml", "--out", "run-1/metrics.json"]
    assert container["env"] == [{"name": "SETTINGS", "value": "/etc/app/settings.yml"}]
    assert op.manifest["metadata"]["name"] == "run-1"
    assert op.config_file == "kube.yaml"


def test_create_conflict_then_vanished_job_is_recreated(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    fake_hook.failures["create_job"] = [api_error(409, "exists")]
    fake_hook.script = [SUCCEEDED]
    result = make(fake_hook).execute(context)
    assert result["phase"] == "Succeeded"
    assert [c for c, _ in fake_hook.calls].count("create") == 2


def test_startup_timeout_report_explains_pending_pods(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    name = ident.job_name(ident.task_identity(context["ti"]))
    stuck = waiting(replica_pod(f"{name}-worker-0", "worker", 0, name), "ImagePullBackOff", "no")
    fake_hook.pods = [unschedulable(stuck, "0/1 nodes")]
    fake_hook.events[f"{name}-worker-0"] = [
        {"type": "Warning", "reason": "FailedScheduling", "message": "0/1 nodes"}
    ]
    fake_hook.script = [PENDING]
    with pytest.raises(T9kInfrastructureError) as failure:
        make(fake_hook, startup_timeout=0.05).execute(context)
    message = str(failure.value)
    assert "Unschedulable: 0/1 nodes" in message
    assert "container main: ImagePullBackOff" in message
    assert "Warning FailedScheduling" in message


def test_replica_that_cannot_start_fails_fast(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    name = ident.job_name(ident.task_identity(context["ti"]))
    stuck = replica_pod(f"{name}-worker-0", "worker", 0, name)
    fake_hook.pods = [waiting(stuck, "ImagePullBackOff", "no such image")]
    fake_hook.script = [PENDING]
    # a replica that cannot start: its configuration, not retried
    with pytest.raises(T9kConfigurationError, match="ImagePullBackOff: no such image") as failure:
        make(fake_hook, pod_error_timeout=0, get_logs=False).execute(context)
    assert "pod_error_timeout=0s" in str(failure.value)
    assert fake_hook.deletes()


def test_pod_checks_can_be_disabled(fake_hook: FakeHook, context: dict[str, Any]) -> None:
    fake_hook.script = [RUNNING, RUNNING, SUCCEEDED]
    make(fake_hook, pod_error_timeout=None, get_logs=False).execute(context)
    calls = [c for c, _ in fake_hook.calls]
    last_read = max(i for i, c in enumerate(calls) if c in ("get", "watch"))
    assert calls.count("list_pods") == 1 and calls.index("list_pods") > last_read  # the conclusion's


def test_waiting_task_logs_why_its_pods_are_not_scheduled(
    fake_hook: FakeHook,
    context: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = ident.job_name(ident.task_identity(context["ti"]))
    fake_hook.pods = [unschedulable(replica_pod(f"{name}-worker-0", "worker", 0, name), "0/1 nodes")]
    fake_hook.script = [PENDING, PENDING, PENDING, SUCCEEDED]
    monkeypatch.setattr("t9k_provider.waiting.notes.READ_INTERVAL", 0.0)
    with caplog.at_level(logging.INFO):
        make(fake_hook, get_logs=False).execute(context)
    note = f"job waits: pod {name}-worker-0 is not scheduled: 0/1 nodes"
    # Airflow 3 task loggers write through structlog to stdout, Airflow 2's to log records (and stdout)
    out = capsys.readouterr().out
    assert max(caplog.text.count(note), out.count(note)) == 1  # said once, not repeated
    assert len([c for c, _ in fake_hook.calls if c == "list_pods"]) >= 2  # read again, said once
