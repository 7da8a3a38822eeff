"""One look at a waited-for job (``waiting.step``): the stall verdict for ``progress_timeout`` and its read to
the present, and what a look returns: the decision and the wait's memory after it."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from t9k_provider.progress import Report
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.notes import READ_INTERVAL
from t9k_provider.waiting.reported import ReportedProgress
from t9k_provider.waiting.step import QUIET_LOOK_SECONDS, WaitMemory, next_look, quiet, step
from tests.support.builders import generic_manifest, replica_pod, unschedulable, waiting, with_status

pytestmark = pytest.mark.airflow_independent


RUNNING_SINCE = datetime(2026, 1, 1, 10, 0, 0, tzinfo=timezone.utc).timestamp()


def running_job() -> dict[str, Any]:
    job = with_status(generic_manifest("j", namespace="ns"), "Running", ("Running", "", "running"))
    for condition in job["status"]["conditions"]:
        condition["lastTransitionTime"] = "2026-01-01T10:00:00Z"
    return job


def reported(*steps: tuple[float, float], total: float | None = 100) -> ReportedProgress:
    """A progress with a report at each ``(step, time)``."""
    state = ReportedProgress()
    for number, at in steps:
        state.add(Report(number, total, {"loss": 1.0 / (number + 1)}), at)
    return state


def test_no_report_at_all_counts_from_the_jobs_running() -> None:
    limits = WaitLimits(progress_timeout=60)
    job = running_job()
    waiting = step(job, limits, RUNNING_SINCE + 59, WaitMemory(RUNNING_SINCE), progress=ReportedProgress())
    assert waiting.action == "wait" and waiting.memory.stalled_at == RUNNING_SINCE + 60
    asked = step(job, limits, RUNNING_SINCE + 60, waiting.memory, progress=ReportedProgress())
    assert asked.action == "read_progress" and asked.since == RUNNING_SINCE
    # the leader's log, read to the present from RUNNING_SINCE + 60, held no report
    stalled = step(
        job, limits, RUNNING_SINCE + 60, asked.memory, progress=ReportedProgress(), read_at=RUNNING_SINCE + 60
    )
    assert (stalled.action, stalled.status) == ("end", "timeout")
    assert stalled.message == "no progress report since the job started running (progress_timeout=60s)"


def test_a_report_moves_the_deadline_and_the_message_names_it() -> None:
    limits = WaitLimits(progress_timeout=60)
    job, memory = running_job(), WaitMemory(RUNNING_SINCE)
    state = reported((7, RUNNING_SINCE + 50))
    waiting = step(job, limits, RUNNING_SINCE + 100, memory, progress=state)
    assert waiting.action == "wait" and waiting.memory.stalled_at == RUNNING_SINCE + 110
    stalled = step(
        job, limits, RUNNING_SINCE + 111, waiting.memory, progress=state, read_at=RUNNING_SINCE + 111
    )
    assert stalled.status == "timeout"
    assert stalled.message == (
        "no progress report for progress_timeout=60s; the last: step 7/100 at 2026-01-01 10:00:50 UTC "
        "(0:01:01 ago)"
    )


def test_a_stall_is_called_only_on_a_read_of_the_leaders_log_that_started_after_its_deadline() -> None:
    """What the streams delivered may lag (a trigger that has just started has nothing yet): at the deadline
    the wait asks for a read to the present; a read from before the deadline does not count, and a failed
    read is tried again after a poll interval, not at once."""
    limits = WaitLimits(progress_timeout=60)
    job = running_job()
    state = reported((7, RUNNING_SINCE + 50))
    early = WaitMemory(RUNNING_SINCE, progress_read_at=RUNNING_SINCE + 109)  # before the deadline (+110)
    asked = step(job, limits, RUNNING_SINCE + 120, early, progress=state)
    assert asked.action == "read_progress" and asked.memory.stalled_at is None
    assert asked.since == RUNNING_SINCE + 60  # after the latest report known, at most the timeout back
    assert 0.8 * 30 <= next_look(RUNNING_SINCE + 120, 30.0, limits, asked.memory, job) <= 1.2 * 30
    failed = step(job, limits, RUNNING_SINCE + 120, asked.memory, progress=state)  # the read failed
    assert failed.action == "read_progress"  # no verdict: the loop waits a poll interval and asks again
    fresh = reported((7, RUNNING_SINCE + 50), (8, RUNNING_SINCE + 118))  # the read found a newer report
    found = step(job, limits, RUNNING_SINCE + 120, asked.memory, progress=fresh, read_at=RUNNING_SINCE + 120)
    assert found.action == "wait" and found.memory.stalled_at == RUNNING_SINCE + 178
    assert found.memory.progress_read_at == RUNNING_SINCE + 120


def test_the_next_look_comes_at_the_stall_deadline() -> None:
    limits = WaitLimits(progress_timeout=60)
    memory = WaitMemory(RUNNING_SINCE)
    decided = step(running_job(), limits, RUNNING_SINCE + 58, memory, progress=reported((1, RUNNING_SINCE)))
    assert next_look(RUNNING_SINCE + 58, 30.0, limits, decided.memory, running_job()) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("limits", "phase", "progress"),
    [
        (WaitLimits(), "Running", ReportedProgress()),  # no progress_timeout
        (WaitLimits(progress_timeout=1), "Pending", ReportedProgress()),  # not running yet
        (WaitLimits(progress_timeout=1), "Paused", ReportedProgress()),  # paused: nothing to report
    ],
)
def test_no_stall_verdict_outside_a_running_job_with_a_limit(
    limits: WaitLimits, phase: str, progress: ReportedProgress
) -> None:
    job = with_status(generic_manifest("j", namespace="ns"), phase)
    decided = step(job, limits, RUNNING_SINCE + 10_000, WaitMemory(RUNNING_SINCE), progress=progress)
    assert decided.action in ("wait", "read_pods")
    assert decided.memory.stalled_at is None


def test_a_job_that_ended_concludes_with_its_outcome_not_a_stall() -> None:
    job = with_status(generic_manifest("j", namespace="ns"), "Succeeded", ("Completed", "Succeeded", "done"))
    decided = step(job, WaitLimits(progress_timeout=1), RUNNING_SINCE + 10_000, WaitMemory(0), progress=None)
    assert (decided.action, decided.status) == ("end", "succeeded")


# -- what one look decides, and the memory it returns -------------------------------------------------------


def test_the_outcome_of_an_ended_job_ends_the_wait_whatever_the_limits() -> None:
    limits = WaitLimits(running_timeout=0, execution_deadline=0)
    failed = with_status(generic_manifest("j", namespace="ns"), "Failed", ("Failed", "Failed", "rule"))
    assert step(failed, limits, RUNNING_SINCE, WaitMemory(0))[:4] == (
        "end", WaitMemory(0), "failed", "Failed: rule",
    )  # fmt: skip


def test_another_object_under_the_name_ends_the_wait_as_replaced() -> None:
    job = running_job()
    job["metadata"]["uid"] = "other"
    decided = step(job, WaitLimits(), RUNNING_SINCE, WaitMemory(0), uid="mine")
    assert (decided.action, decided.status, decided.retryable) == ("end", "error", True)
    assert decided.message == "job ns/j was replaced by another object (uid other)"
    assert step(job, WaitLimits(), RUNNING_SINCE, WaitMemory(0)).action == "wait"  # no uid: any object


def test_a_look_changes_no_memory_it_was_given_and_returns_the_next() -> None:
    """The memory is a value: asking twice at one instant answers alike; the loop keeps what a look
    returns (here: when an Unknown phase was first seen, which its limit counts from)."""
    unknown = with_status(generic_manifest("j", namespace="ns"), "Unknown")
    limits = WaitLimits(unknown_timeout=10)
    memory = WaitMemory(RUNNING_SINCE)
    first = step(unknown, limits, RUNNING_SINCE + 1, memory)
    assert first == step(unknown, limits, RUNNING_SINCE + 1, memory)
    assert memory.first_seen == {} and first.memory.first_seen == {"unknown": RUNNING_SINCE + 1}
    assert step(unknown, limits, RUNNING_SINCE + 11, memory).action == "wait"  # the old memory: it starts now
    assert step(unknown, limits, RUNNING_SINCE + 11, first.memory).status == "failed"


def test_pods_are_asked_for_and_looked_at_again_at_the_same_instant() -> None:
    pending = with_status(generic_manifest("j", namespace="ns"), "Pending")
    limits = WaitLimits(pod_error_timeout=0)
    asked = step(pending, limits, RUNNING_SINCE, WaitMemory(0))
    assert asked.action == "read_pods"
    stuck = waiting(replica_pod("j-worker-0", "worker", 0, "j"), "ErrImagePull", "no such image")
    decided = step(pending, limits, RUNNING_SINCE, asked.memory, pods=[stuck], largest={})
    assert (decided.action, decided.status) == ("end", "timeout")
    assert "ErrImagePull: no such image" in decided.message
    assert step(pending, limits, RUNNING_SINCE, asked.memory, pods=[], largest={}).action == "wait"


def test_a_pending_jobs_pods_are_read_for_a_note_every_read_interval() -> None:
    pending = with_status(generic_manifest("j", namespace="ns"), "Pending")
    memory = WaitMemory(0.0)
    assert step(pending, WaitLimits(), READ_INTERVAL - 1, memory).action == "wait"  # not due yet
    asked = step(pending, WaitLimits(), READ_INTERVAL, memory)
    assert asked.action == "read_pods" and asked.memory.notes.read_at == READ_INTERVAL
    scheduler = unschedulable(replica_pod("j-worker-0", "worker", 0, "j"), "0/1 nodes")
    said = step(pending, WaitLimits(), READ_INTERVAL, asked.memory, pods=[scheduler])
    assert said.note == "job waits: pod j-worker-0 is not scheduled: 0/1 nodes"
    again = step(pending, WaitLimits(), READ_INTERVAL + 1, said.memory)
    assert again.action == "wait" and again.note is None  # read, and said: nothing to do for a while


def test_the_wait_is_handed_back_at_its_time_with_the_looks_note() -> None:
    memory = WaitMemory(0.0, hand_back_at=100.0)
    assert step(running_job(), WaitLimits(), 99.0, memory).action == "wait"
    assert step(running_job(), WaitLimits(), 100.0, memory).action == "hand_back"


def started_job(*states: str) -> dict[str, Any]:
    """``running_job`` whose status lists one worker replica per container state."""
    job = running_job()
    replicas = [
        {"name": f"j-worker-{i}", "containers": [{"name": "main", "state": state}]}
        for i, state in enumerate(states)
    ]
    job["status"]["tasks"] = [{"type": "worker", "replicas": replicas}]
    return job


def test_a_running_job_with_nothing_timed_is_looked_at_only_at_its_deadlines() -> None:
    """Every change comes through the watch: a running job whose replicas all started, with no running or
    progress limit, is looked at every QUIET_LOOK_SECONDS, or at the execution deadline or hand-back."""
    now, job = RUNNING_SINCE + 30, started_job("running", "terminated")
    limits = WaitLimits(pod_error_timeout=120)  # the operators' default: no pods to read once all started
    memory = step(job, limits, now, WaitMemory(RUNNING_SINCE)).memory
    assert quiet(job, limits, memory, now)
    assert 0.8 * QUIET_LOOK_SECONDS <= next_look(now, 10.0, limits, memory, job) <= 1.2 * QUIET_LOOK_SECONDS
    deadline = WaitLimits(pod_error_timeout=120, execution_deadline=now + 40)
    assert next_look(now, 10.0, deadline, memory, job) == pytest.approx(40.0)
    handing_back = WaitMemory(RUNNING_SINCE, hand_back_at=now + 25)
    assert next_look(now, 10.0, limits, handing_back, job) == pytest.approx(25.0)


@pytest.mark.parametrize(
    ("why", "job", "limits"),
    [
        ("pending: startup_timeout, notes", with_status(generic_manifest("j"), "Pending"), WaitLimits()),
        ("a replica not started", started_job("running", "waiting"), WaitLimits(pod_error_timeout=120)),
        ("no replica listed yet", running_job(), WaitLimits(pod_error_timeout=120)),
        ("running_timeout counts", started_job("running"), WaitLimits(running_timeout=3600)),
        ("progress_timeout counts", started_job("running"), WaitLimits(progress_timeout=600)),
        ("paused", with_status(generic_manifest("j"), "Paused"), WaitLimits()),
    ],
)
def test_a_wait_that_time_can_end_looks_every_poll_interval(
    why: str, job: dict[str, Any], limits: WaitLimits
) -> None:
    now = RUNNING_SINCE + 30
    assert not quiet(job, limits, WaitMemory(RUNNING_SINCE), now), why
    assert 8.0 <= next_look(now, 10.0, limits, WaitMemory(RUNNING_SINCE), job) <= 12.0, why


def test_a_job_in_a_queue_is_quiet_once_its_admission_was_read() -> None:
    now, job = RUNNING_SINCE + 30, started_job("running")
    job["spec"]["scheduler"] = {"t9kScheduler": {"queue": "gpu"}}
    limits = WaitLimits()
    first = step(job, limits, now, WaitMemory(RUNNING_SINCE))
    assert first.action == "read_queue" and not quiet(job, limits, first.memory, now)
    read = step(job, limits, now, first.memory, queue=None, queue_read=True)  # the read failed: settled
    assert quiet(job, limits, read.memory, now)
