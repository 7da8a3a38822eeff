"""The worker's batch reads of replica logs (``replicalogs.follower``): prefixed lines of the selected
replicas, from per-container cursors (``kube.podlogs``) that never repeat or skip a line, past bursts, log
errors reported once."""

from __future__ import annotations

import logging
import time

import pytest

from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.replicalogs.follower import LogFollower
from t9k_provider.replicalogs.targets import ReplicaTarget
from tests.airflow.fakes import FakeHook
from tests.support.builders import replica_pod

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent


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
    hook.pods = [replica_pod("j-worker-0", "worker", 0, "j"), replica_pod("j-worker-1", "worker", 1, "j")]
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
    hook.pods = [replica_pod("j-worker-0", "worker", 0, "j")]

    def broken(*args: object, **kwargs: object) -> str:
        raise ConnectionResetError("stream dropped")

    hook.read_pod_log = broken  # type: ignore[method-assign]
    assert LogFollower(hook, "ns", "tensorstack.dev/owner-name=j", lambda _: True).poll() == 0


def test_log_follower_reads_past_a_burst_of_already_seen_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_logs, "READ_LIMIT_BYTES", 64)
    monkeypatch.setattr(pod_logs, "MAX_READ_LIMIT_BYTES", 1024)
    hook = FakeHook()
    hook.pods = [replica_pod("j-worker-0", "worker", 0, "j")]
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
    hook.pods = [replica_pod("j-worker-0", "worker", 0, "j")]
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
    hook.pods = [replica_pod("j-worker-0", "worker", 0, "j")]
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
