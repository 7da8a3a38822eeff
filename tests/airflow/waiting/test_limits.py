"""The wait's limits (``waiting.limits``): each anchored to an absolute instant or to when a stage was first
seen, which ``stages_seen``/``pods_seen`` return anew and the checks only read."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest

from t9k_provider.progress import Report
from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.reported import ReportedProgress
from tests.support.builders import generic_manifest, replica_pod, waiting, with_status

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent


def test_wait_limits_startup_from_creation_time() -> None:
    job = with_status(generic_manifest("j"), "Pending")
    job["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    created = job_status.created_at(job).timestamp()
    limits = WaitLimits(startup_timeout=60)
    assert limits.check(job, created + 59, {}) is None
    verdict = limits.check(job, created + 60, {})
    assert verdict is not None and verdict.status == "timeout" and "startup_timeout=60s" in verdict.message


def test_wait_limits_running_from_running_condition() -> None:
    job = with_status(generic_manifest("j"), "Running", ("Running", "", "all running"))
    since = job_status.running_since(job).timestamp()
    limits = WaitLimits(running_timeout=10)
    assert limits.check(job, since + 9, {}) is None
    assert limits.check(job, since + 10, {}).status == "timeout"


def test_wait_limits_execution_deadline_first() -> None:
    job = with_status(generic_manifest("j"), "Running")
    assert WaitLimits(execution_deadline=100).check(job, 100, {}).status == "timeout"
    assert WaitLimits(execution_deadline=100).check(job, 99, {}) is None


def test_wait_limits_unknown_tracked_locally_and_reset() -> None:
    limits = WaitLimits(unknown_timeout=5)
    unknown, running = (
        with_status(generic_manifest("j"), "Unknown"),
        with_status(generic_manifest("j"), "Running"),
    )
    seen: dict[str, float] = {}
    for job, now, ends in [(unknown, 1000, False), (unknown, 1004, False), (running, 1004.5, False),
                           (unknown, 1006, False), (unknown, 1011, True)]:  # fmt: skip
        before = dict(seen)
        after = limits.stages_seen(job, now, seen)
        assert seen == before  # it returns the stages, it changes nothing
        seen = after
        verdict = limits.check(job, now, seen)
        assert (verdict is not None and verdict.status == "failed") is ends  # restarted when it left Unknown


def test_wait_limits_paused_uses_condition_time() -> None:
    job = with_status(generic_manifest("j"), "Paused", ("Paused", "", "paused"))
    since = job_status.paused_since(job).timestamp()
    assert WaitLimits(paused_timeout=30).check(job, since + 31, {}).status == "failed"
    assert WaitLimits().check(job, since + 10**6, {}) is None


def test_time_is_not_frozen() -> None:
    # Guards the fakes above: limits compare against real epoch seconds.
    assert time.time() > 1_700_000_000


def _pod_waiting(reason: str) -> dict:
    return waiting(replica_pod("j-worker-0", "worker", 0, "j"), reason, "m")


def test_blocking_pod_problems_fail_after_their_grace() -> None:
    from t9k_provider.waiting.limits import blocking_pod_problem

    assert blocking_pod_problem([replica_pod("j-worker-0", "worker", 0, "j")]) is None
    assert blocking_pod_problem([_pod_waiting("ContainerCreating")]) is None
    assert blocking_pod_problem([_pod_waiting("ImagePullBackOff")]) == (
        "pod j-worker-0 container main: ImagePullBackOff: m"
    )
    limits = WaitLimits(pod_error_timeout=30)
    seen: dict[str, float] = {}
    verdicts = []
    for pods, now in [([_pod_waiting("ErrImagePull")], 100), ([], 120), ([_pod_waiting("ErrImagePull")], 125),
                      ([_pod_waiting("ImagePullBackOff")], 155)]:  # fmt: skip
        seen = limits.pods_seen(pods, now, seen)  # recovered at 120: the clock restarts
        verdicts.append(limits.check_pods(pods, now, seen))
    *early, verdict = verdicts
    assert early == [None, None, None]
    assert verdict is not None and verdict.status == "timeout" and "pod_error_timeout=30s" in verdict.message


def test_pods_are_read_only_while_a_replica_may_not_have_started() -> None:
    def running(*states: str) -> dict:
        replicas = [{"name": f"j-worker-{i}", "containers": [{"name": "main", "state": s}]}
                    for i, s in enumerate(states)]  # fmt: skip
        return with_status(generic_manifest("j"), "Running", tasks=[{"type": "worker", "replicas": replicas}])

    limits = WaitLimits(pod_error_timeout=30)
    seen = {"pod_error": 100.0}
    assert not WaitLimits().pods_needed(running("waiting"))  # no fail-fast check: never
    assert limits.pods_needed(with_status(generic_manifest("j"), "Pending"))
    assert limits.pods_needed(with_status(generic_manifest("j"), "Running"))  # no replicas listed
    assert limits.pods_needed(running("running", "waiting"))
    assert limits.stages_seen(running("running", "waiting"), 120, seen)["pod_error"] == 100.0
    assert not limits.pods_needed(running("running", "terminated"))
    assert "pod_error" not in limits.stages_seen(running("running", "terminated"), 120, seen)  # it is over


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


def test_a_read_for_a_stall_reaches_back_to_the_latest_report_at_most_the_timeout() -> None:
    limits = WaitLimits(progress_timeout=60)
    job, first_seen = running_job(), {}
    recent = reported((7, RUNNING_SINCE + 50))
    assert limits.reports_since(job, recent, first_seen, RUNNING_SINCE + 100) == RUNNING_SINCE + 50
    assert (
        limits.reports_since(job, ReportedProgress(), first_seen, RUNNING_SINCE + 1000) == RUNNING_SINCE + 940
    )
    assert WaitLimits().reports_since(job, recent, first_seen, RUNNING_SINCE + 1000) == RUNNING_SINCE + 1000


def test_limits_of_an_operator_take_its_attributes() -> None:
    class Options:
        startup_timeout = 5.0
        progress_timeout = 60.0

    limits = WaitLimits.of(Options(), 123.0)
    assert (limits.startup_timeout, limits.progress_timeout, limits.execution_deadline) == (5.0, 60.0, 123.0)
    assert limits.running_timeout is None
