"""What a try does with the job an earlier try left: one test per row of the policy table (docs/airflow.md,
"Retries and reattach"), with the default ``reattach_policy="if_unchecked"``."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException

from t9k_provider.jobclient import identity as ident
from t9k_provider.jobclient.reattach import starts_a_run
from t9k_provider.operators import T9kJobFailed
from tests.airflow.fakes import FakeHook, FakeTI, make
from tests.support.builders import FAILED, RUNNING, SUCCEEDED, our_job, replica_pod

pytestmark = pytest.mark.timeout(60)

#: The second try of a task with one retry, as Airflow numbers it: after the first try failed (an automatic
#: retry), or after a user cleared the finished first try (max_tries then grows by try_number).
RETRY = {"try_number": 2, "max_tries": 1}
AFTER_CLEAR = {"try_number": 2, "max_tries": 2}


@pytest.mark.parametrize(
    ("try_number", "max_tries", "retries", "starts"),
    [
        (1, 0, 0, True),  # the first try
        (1, 3, 3, True),
        (2, 3, 3, False),  # retries
        (4, 3, 3, False),
        (2, 1, 0, True),  # cleared after try 1, no retries
        (2, 4, 3, True),  # cleared after try 1, 3 retries
        (3, 4, 3, False),  # a retry after that
        (5, 4, 3, False),
    ],
)
def test_starts_a_run(try_number: int, max_tries: int, retries: int, starts: bool) -> None:
    assert starts_a_run(FakeTI(try_number=try_number, max_tries=max_tries), retries) is starts


def _second_try(ti: FakeTI, hook: FakeHook, job: dict[str, Any], numbers: dict[str, int]) -> None:
    hook.put(job)
    ti.__dict__.update(numbers)


def _creates(hook: FakeHook) -> int:
    return [call for call, _ in hook.calls].count("create")


def test_running_job_is_adopted(fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI) -> None:
    _second_try(ti, fake_hook, our_job(ti, RUNNING), RETRY)
    fake_hook.script = [RUNNING, SUCCEEDED]
    result = make(fake_hook, retries=1).execute(context)
    assert result["uid"] == "uid-1" and fake_hook.deletes() == []


@pytest.mark.parametrize("numbers", [RETRY, AFTER_CLEAR], ids=["retry", "after-clear"])
def test_succeeded_unreported_job_is_adopted_and_reported_without_deferring(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, numbers: dict[str, int]
) -> None:
    """The earlier try never concluded (lost worker, killed before it reported): this try reports the result
    and the logs, in the worker, even when deferrable."""
    job = our_job(ti, SUCCEEDED)
    _second_try(ti, fake_hook, job, numbers)
    name = job["metadata"]["name"]
    fake_hook.pods = [replica_pod(f"{name}-worker-0", "worker", 0, name)]
    fake_hook.logs[(f"{name}-worker-0", "main")] = "2026-01-01T00:00:01Z epoch 1 loss=0.5\n"
    fake_hook.script = [SUCCEEDED]
    result = make(fake_hook, retries=1, deferrable=True).execute(context)  # no TaskDeferred
    assert result["uid"] == "uid-1" and result["phase"] == "Succeeded"
    assert fake_hook.deletes() == [] and _creates(fake_hook) == 1  # the create that met the earlier job
    assert {args[0] for call, args in fake_hook.calls if call == "log"} == {f"{name}-worker-0"}
    assert fake_hook.jobs[("conn-ns", name)]["metadata"]["annotations"][ident.CHECKED] == "true"


def test_succeeded_reported_job_is_adopted_on_an_automatic_retry(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    """The earlier try reported success but Airflow failed it anyway (apache/airflow#72716): not run again."""
    _second_try(ti, fake_hook, our_job(ti, SUCCEEDED, checked=True), RETRY)
    fake_hook.script = [SUCCEEDED]
    result = make(fake_hook, retries=1, deferrable=True).execute(context)
    assert result["uid"] == "uid-1" and result["phase"] == "Succeeded"
    assert fake_hook.deletes() == [] and len(fake_hook.jobs) == 1


def test_succeeded_reported_job_is_run_again_after_a_clear(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    _second_try(ti, fake_hook, our_job(ti, SUCCEEDED, checked=True), AFTER_CLEAR)
    fake_hook.script = [SUCCEEDED]
    result = make(fake_hook, retries=1).execute(context)
    assert result["uid"] == "uid-2"  # a new job
    assert len(fake_hook.deletes()) == 1 and len(fake_hook.jobs) == 1
    annotations = fake_hook.jobs[("conn-ns", result["name"])]["metadata"]["annotations"]
    assert annotations[ident.TRY_NUMBER] == "2"


@pytest.mark.parametrize(
    ("reported", "numbers", "retry_on_job_failure", "adopted"),
    [
        (False, RETRY, False, True),  # nobody reported the failure: this try does
        (False, RETRY, True, True),
        (True, RETRY, False, True),  # a final failure whose report Airflow lost: reported again
        (True, RETRY, True, False),  # the retry a reported, retryable failure asked for
        (True, AFTER_CLEAR, False, False),  # cleared: run again
    ],
)
def test_failed_job(
    fake_hook: FakeHook,
    context: dict[str, Any],
    ti: FakeTI,
    reported: bool,
    numbers: dict[str, int],
    retry_on_job_failure: bool,
    adopted: bool,
) -> None:
    _second_try(ti, fake_hook, our_job(ti, FAILED, checked=reported), numbers)
    op = make(fake_hook, retries=1, retry_on_job_failure=retry_on_job_failure)
    if adopted:
        fake_hook.script = [FAILED]
        with pytest.raises(AirflowException) as failure:
            op.execute(context)
        assert isinstance(failure.value, T9kJobFailed) is not retry_on_job_failure
        assert fake_hook.deletes() == [] and _creates(fake_hook) == 1
    else:
        fake_hook.script = [FAILED, SUCCEEDED]  # what the conflict's read shows, then the new job
        assert op.execute(context)["uid"] == "uid-2"
        assert len(fake_hook.deletes()) == 1 and len(fake_hook.jobs) == 1


def test_job_being_deleted_is_awaited_then_replaced(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    """Never two jobs at once: the new job is created only once the old one is gone."""
    job = our_job(ti, SUCCEEDED, checked=True)
    job["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    _second_try(ti, fake_hook, job, RETRY)
    original = fake_hook.get_job
    reads: list[str] = []

    def finishing_deletion(*args: Any) -> dict[str, Any]:
        reads.append(args[2])
        if len(reads) == 3:  # the finalizers ran
            fake_hook.jobs.clear()
        return original(*args)

    fake_hook.get_job = finishing_deletion  # type: ignore[method-assign]
    fake_hook.script = [SUCCEEDED]
    result = make(fake_hook, retries=1).execute(context)
    assert result["uid"] == "uid-2"
    calls = [call for call, _ in fake_hook.calls]
    assert calls.count("create") == 2 and calls.index("create", 1) > calls.index("get", 2)
    assert fake_hook.deletes() == []  # already being deleted: nothing more to ask
