"""Pure helpers: status interpretation, wait limits, log cursors, identity, replica targets."""

from __future__ import annotations

import logging
import time

import pytest

from t9k_provider.jobclient import identity as ident
from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.operators.options import seconds
from t9k_provider.replicalogs.follower import LogFollower
from t9k_provider.replicalogs.targets import ReplicaTarget, default_targets, parse_targets, pod_selector
from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.limits import WaitLimits
from tests.airflow.fakes import FakeHook, generic_manifest, pod, with_status

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent


@pytest.mark.parametrize(
    ("phase", "conditions", "expected"),
    [
        ("Pending", (), "pending"),
        ("", (), "pending"),
        ("Initializing", (), "pending"),
        ("Running", (), "running"),
        ("Resuming", (), "running"),
        ("Paused", (), "paused"),
        ("Unknown", (), "unknown"),
        ("Succeeded", (), "succeeded"),
        ("Failed", (), "failed"),
        ("Running", (("Completed", "Succeeded", "done"),), "succeeded"),
        ("Running", (("Failed", "Failed", "boom"),), "failed"),
        ("Succeeded", (("Failed", "Failed", "boom"),), "failed"),
    ],
)
def test_outcome_from_phase_and_conditions(phase: str, conditions: tuple, expected: str) -> None:
    assert job_status.outcome(with_status(generic_manifest("j"), phase, *conditions)) == expected


@pytest.mark.parametrize("key", ["status", "replicaStatus", "replicas"])
def test_failure_reason_and_failed_replicas(key: str) -> None:
    """The replicas of a task are read under the key each kind's document gives (``status``; DeepSpeedJob
    ``replicaStatus``) and under ``replicas``, which controllers before 0.2 wrote."""
    job = with_status(
        generic_manifest("j"),
        "Failed",
        ("Failed", "Failed", "The job is failed with rule: worker 0"),
        tasks=[
            {
                "type": "worker",
                key: [
                    {
                        "name": "j-worker-0",
                        "phase": "Succeeded",
                        "containers": [{"name": "c", "exitCode": 0}],
                    },
                    {"name": "j-worker-1", "phase": "Failed", "containers": [{"name": "c", "exitCode": 3}]},
                ],
            }
        ],
    )
    assert job_status.failure_reason(job) == "Failed: The job is failed with rule: worker 0"
    assert job_status.failed_replicas(job) == ["j-worker-1"]
    summary = job_status.summary(job)
    assert summary["replicas"] == {"worker": 2}
    assert summary["phase"] == "Failed"
    assert summary["conditions"][0]["type"] == "Failed"


def test_replica_counts_fall_back_to_spec() -> None:
    assert job_status.replica_counts(generic_manifest("j")) == {"worker": 2}


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


def test_seconds_rejects_negative() -> None:
    with pytest.raises(ValueError, match="startup_timeout"):
        seconds(-1, "startup_timeout")


def test_timestamp_parsing_handles_trimmed_nanoseconds() -> None:
    a = pod_logs.parse_timestamp_ns("2026-01-02T03:04:05.1Z")
    b = pod_logs.parse_timestamp_ns("2026-01-02T03:04:05.100000001Z")
    assert a is not None and b is not None and b - a == 1
    assert pod_logs.parse_timestamp_ns("not-a-time") is None


def test_cursor_never_repeats_or_skips_lines() -> None:
    text = (
        "2026-01-02T03:04:05.000000001Z one\n"
        "2026-01-02T03:04:05.000000002Z two\n"
        "2026-01-02T03:04:05.000000002Z two-bis\n"
    )
    lines, cursor = pod_logs.advance(pod_logs.parse_lines(text), None)
    assert [line.text for line in lines] == ["one", "two", "two-bis"]
    assert cursor == [1767323045000000002, 2]
    # A re-read from sinceTime (whole seconds) returns everything again plus one new line.
    more = text + "2026-01-02T03:04:06Z three\n"
    lines, cursor = pod_logs.advance(pod_logs.parse_lines(more), cursor)
    assert [line.text for line in lines] == ["three"]
    # sinceSeconds reaches back to the cursor's whole second (03:04:06), seen from 03:04:10.5
    # back to the cursor's whole second (4.5 s -> 5) plus the clock-skew margin
    assert pod_logs.since_seconds(cursor, 1767323050.5) == 5 + pod_logs.SINCE_MARGIN_SECONDS
    assert pod_logs.advance(pod_logs.parse_lines(more), cursor) == ([], cursor)


def test_log_follower_prints_prefixed_lines_of_selected_replicas(caplog: pytest.LogCaptureFixture) -> None:
    hook = FakeHook()
    hook.pods = [pod("j-worker-0", "worker", 0, "j"), pod("j-worker-1", "worker", 1, "j")]
    hook.logs[("j-worker-0", "main")] = "2026-01-02T03:04:05Z hello from 0\n"
    hook.logs[("j-worker-1", "main")] = "2026-01-02T03:04:05Z hello from 1\n"
    target = ReplicaTarget("worker", 0)
    logger = logging.getLogger("t9k-test-follower")
    follower = LogFollower(hook, "ns", "tensorstack.dev/owner-name=j", target.matches, log=logger)
    with caplog.at_level(logging.INFO, logger="t9k-test-follower"):
        assert follower.poll() == 1
        assert follower.poll() == 0  # nothing new
    assert "[j-worker-0/main] hello from 0" in caplog.text
    assert "hello from 1" not in caplog.text
    hook.logs[("j-worker-0", "main")] += "2026-01-02T03:04:07Z again\n"
    with caplog.at_level(logging.INFO, logger="t9k-test-follower"):
        assert follower.poll() == 1
    assert follower.cursors["pod-j-worker-0/main"][0] == pod_logs.parse_timestamp_ns("2026-01-02T03:04:07Z")


def test_log_follower_survives_log_errors() -> None:
    hook = FakeHook()
    hook.pods = [pod("j-worker-0", "worker", 0, "j")]

    def broken(*args: object, **kwargs: object) -> str:
        raise ConnectionResetError("stream dropped")

    hook.read_pod_log = broken  # type: ignore[method-assign]
    assert LogFollower(hook, "ns", "tensorstack.dev/owner-name=j", lambda _: True).poll() == 0


def test_job_name_is_stable_and_unique_per_task_instance() -> None:
    base = {ident.DAG_ID: "d", ident.TASK_ID: "Train_Model", ident.RUN_ID: "r1", ident.MAP_INDEX: "-1"}
    name = ident.job_name(base)
    assert name == ident.job_name(dict(base))
    assert name.startswith("train-model-") and len(name) <= ident.MAX_GENERATED_NAME
    assert name != ident.job_name({**base, ident.MAP_INDEX: "0"})
    assert name != ident.job_name({**base, ident.RUN_ID: "r2"})
    assert ident.job_name({**base, ident.TASK_ID: "9" * 80})[0].isalpha()
    assert len(ident.job_name({**base, ident.TASK_ID: "x" * 80})) <= ident.MAX_GENERATED_NAME


def test_parse_targets_and_defaults() -> None:
    assert parse_targets("all") == [ReplicaTarget(None, None)]
    assert parse_targets(["worker/1", "ps"]) == [ReplicaTarget("worker", 1), ReplicaTarget("ps", None)]
    with pytest.raises(ValueError, match="log_replicas"):
        parse_targets("worker/x")
    pytorch = {"spec": {"replicaSpecs": [{"type": "worker"}, {"type": "master"}]}}
    assert default_targets("PyTorchTrainingJob", pytorch) == [ReplicaTarget("master", 0)]
    assert default_targets("TensorFlowTrainingJob", {"spec": {"replicaSpecs": [{"type": "worker"}]}}) == [
        ReplicaTarget("worker", 0)
    ]
    assert default_targets("MPIJob", {}) == [ReplicaTarget("launcher", None)]
    assert default_targets("GenericJob", generic_manifest()) == [ReplicaTarget("worker", 0)]


def test_time_is_not_frozen() -> None:
    # Guards the fakes above: limits compare against real epoch seconds.
    assert time.time() > 1_700_000_000


def test_pod_selector_per_kind() -> None:
    assert pod_selector("PyTorchTrainingJob", "j") == "tensorstack.dev/owner-name=j"
    assert pod_selector("BeamJob", "j") == "batch.kubernetes.io/job-name=j-batchjob"


def _pod_waiting(reason: str) -> dict:
    stuck = pod("j-worker-0", "worker", 0, "j")
    stuck["status"] = {
        "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": reason, "message": "m"}}}]
    }
    return stuck


def test_blocking_pod_problems_fail_after_their_grace() -> None:
    from t9k_provider.waiting.limits import blocking_pod_problem

    assert blocking_pod_problem([pod("j-worker-0", "worker", 0, "j")]) is None
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


def test_log_follower_reads_past_a_burst_of_already_seen_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_logs, "READ_LIMIT_BYTES", 64)
    monkeypatch.setattr(pod_logs, "MAX_READ_LIMIT_BYTES", 1024)
    hook = FakeHook()
    hook.pods = [pod("j-worker-0", "worker", 0, "j")]
    burst = "".join(f"2026-01-02T03:04:05.{i:09d}Z old line {i}\n" for i in range(1, 11))
    hook.logs[("j-worker-0", "main")] = burst + "2026-01-02T03:04:06Z new line\n"
    seen = pod_logs.parse_timestamp_ns("2026-01-02T03:04:05.000000010Z")
    follower = LogFollower(
        hook, "ns", "tensorstack.dev/owner-name=j", lambda _: True, {"pod-j-worker-0/main": [seen, 1]}
    )
    assert follower.poll() == 1
    assert follower.cursors["pod-j-worker-0/main"][0] == pod_logs.parse_timestamp_ns("2026-01-02T03:04:06Z")


def test_log_follower_skips_a_burst_it_cannot_read_past(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_logs, "READ_LIMIT_BYTES", 32)
    monkeypatch.setattr(pod_logs, "MAX_READ_LIMIT_BYTES", 32)
    hook = FakeHook()
    hook.pods = [pod("j-worker-0", "worker", 0, "j")]
    hook.logs[("j-worker-0", "main")] = "".join(f"2026-01-02T03:04:05.{i:09d}Z x\n" for i in range(1, 11))
    cursor = [pod_logs.parse_timestamp_ns("2026-01-02T03:04:05.000000010Z"), 1]
    follower = LogFollower(
        hook, "ns", "tensorstack.dev/owner-name=j", lambda _: True, {"pod-j-worker-0/main": cursor}
    )
    before = time.time()
    follower.poll()
    moved = follower.cursors["pod-j-worker-0/main"]
    assert moved[0] > cursor[0] and moved[0] <= time.time() * 1e9  # past the burst, never in the future
    assert moved[0] >= (before - pod_logs.SINCE_MARGIN_SECONDS - 1) * 1e9


def test_log_read_errors_are_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    from tests.airflow.fakes import api_error

    hook = FakeHook()
    hook.pods = [pod("j-worker-0", "worker", 0, "j")]
    failures = [api_error(403, "forbidden"), api_error(403, "forbidden")]

    def forbidden(*args: object, **kwargs: object) -> str:
        raise failures.pop(0)

    hook.read_pod_log = forbidden  # type: ignore[method-assign]
    logger = logging.getLogger("t9k-test-follower-errors")
    follower = LogFollower(hook, "ns", "tensorstack.dev/owner-name=j", lambda _: True, log=logger)
    with caplog.at_level(logging.WARNING, logger="t9k-test-follower-errors"):
        follower.poll()
        follower.poll()
    assert caplog.text.count("cannot read the log of j-worker-0/main") == 1
