"""What a wait makes of the leader's progress reports: the ``ReportedProgress`` state (history, rate, ETA, the
task log's line, JSON across deferrals), the stall verdict ``waiting.step`` gives for ``progress_timeout``,
and ``ReplicaLines``, which routes the followed lines (reports of the leader only, one progress line every
few seconds, never the report lines themselves)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

import pytest

from t9k_provider.kube.podlogs import LogLine
from t9k_provider.progress import Report
from t9k_provider.replicalogs import lines as lines_module
from t9k_provider.replicalogs.lines import ReplicaLines
from t9k_provider.replicalogs.targets import Followed, ReplicaTarget
from t9k_provider.waiting import reported as progress_module
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.reported import HISTORY_LIMIT, ReportedProgress
from t9k_provider.waiting.step import WaitMemory, next_look, step
from tests.airflow.fakes import generic_manifest, with_status

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


# -- ReportedProgress -------------------------------------------------------------------------------------


def test_rate_eta_and_the_task_log_line() -> None:
    state = reported((10, 1000.0), (20, 1005.0), (30, 1010.0))
    assert state.rate() == 2.0
    assert state.eta() == 35.0
    assert state.line() == "progress: step 30/100 (30.0%), 2 steps/s, ETA 0:00:35, loss=0.0322581"


def test_a_first_report_has_no_rate_and_no_total_no_eta() -> None:
    assert reported((5, 1000.0)).line() == "progress: step 5/100 (5.0%), loss=0.166667"
    no_total = reported((5, 1000.0), (6, 1001.0), total=None)
    assert no_total.line() == "progress: step 6, 1 steps/s, loss=0.142857"


def test_a_report_read_again_changes_nothing() -> None:
    state = reported((10, 1000.0), (20, 1005.0))
    assert state.add(Report(10, 100, {}), 1000.0) is False  # an older one
    assert state.add(Report(20, 100, {}), 1005.0) is False  # the latest one
    assert (state.step, state.at, len(state.history)) == (20, 1005.0, 2)


def test_history_stays_bounded_and_spans_the_run() -> None:
    state = reported(*((n, 1000.0 + n) for n in range(1, 1001)))
    assert len(state.history) <= HISTORY_LIMIT
    assert state.history[-1]["step"] == 1000
    assert state.history[0]["step"] == 1  # thinned out, not cut to the last hundred
    steps = [h["step"] for h in state.history]
    assert steps == sorted(steps)


def test_json_round_trip_keeps_everything_but_when_it_was_last_logged() -> None:
    state = reported((10, 1000.0), (20, 1005.0))
    state.logged_at = 1234.0
    data = state.to_json()
    assert data is not None and set(data) == {"step", "total", "metrics", "time", "history"}
    again = ReportedProgress.from_json(data)
    assert again == state and again.logged_at is None
    assert ReportedProgress().to_json() is None and ReportedProgress.from_json(None) == ReportedProgress()


def test_latest_names_step_time_and_age() -> None:
    state = reported((42, RUNNING_SINCE + 3))
    assert state.latest(RUNNING_SINCE + 68) == "step 42/100 at 2026-01-01 10:00:03 UTC (0:01:05 ago)"
    assert ReportedProgress().latest(0.0) == "no report"


# -- the stall verdict ------------------------------------------------------------------------------------


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
    assert 0.8 * 30 <= next_look(RUNNING_SINCE + 120, 30.0, limits, asked.memory) <= 1.2 * 30
    failed = step(job, limits, RUNNING_SINCE + 120, asked.memory, progress=state)  # the read failed
    assert failed.action == "read_progress"  # no verdict: the loop waits a poll interval and asks again
    fresh = reported((7, RUNNING_SINCE + 50), (8, RUNNING_SINCE + 118))  # the read found a newer report
    found = step(job, limits, RUNNING_SINCE + 120, asked.memory, progress=fresh, read_at=RUNNING_SINCE + 120)
    assert found.action == "wait" and found.memory.stalled_at == RUNNING_SINCE + 178
    assert found.memory.progress_read_at == RUNNING_SINCE + 120


def test_a_read_for_a_stall_reaches_back_to_the_latest_report_at_most_the_timeout() -> None:
    limits = WaitLimits(progress_timeout=60)
    job, first_seen = running_job(), {}
    recent = reported((7, RUNNING_SINCE + 50))
    assert limits.reports_since(job, recent, first_seen, RUNNING_SINCE + 100) == RUNNING_SINCE + 50
    assert (
        limits.reports_since(job, ReportedProgress(), first_seen, RUNNING_SINCE + 1000) == RUNNING_SINCE + 940
    )
    assert WaitLimits().reports_since(job, recent, first_seen, RUNNING_SINCE + 1000) == RUNNING_SINCE + 1000


def test_the_next_look_comes_at_the_stall_deadline() -> None:
    limits = WaitLimits(progress_timeout=60)
    memory = WaitMemory(RUNNING_SINCE)
    decided = step(running_job(), limits, RUNNING_SINCE + 58, memory, progress=reported((1, RUNNING_SINCE)))
    assert next_look(RUNNING_SINCE + 58, 30.0, limits, decided.memory) == pytest.approx(2.0)


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


def test_limits_of_an_operator_take_its_attributes() -> None:
    class Options:
        startup_timeout = 5.0
        progress_timeout = 60.0

    limits = WaitLimits.of(Options(), 123.0)
    assert (limits.startup_timeout, limits.progress_timeout, limits.execution_deadline) == (5.0, 60.0, 123.0)
    assert limits.running_timeout is None


# -- ReplicaLines -----------------------------------------------------------------------------------------

LEADER = {"batch.tensorstack.dev/replica-type": "worker", "batch.tensorstack.dev/replica-index": "0"}
OTHER = {"batch.tensorstack.dev/replica-type": "worker", "batch.tensorstack.dev/replica-index": "1"}


def stamped(seconds: float, text: str) -> LogLine:
    return LogLine(int(seconds * 1e9), text)


def route(caplog: pytest.LogCaptureFixture, lines: ReplicaLines, *taken: tuple[dict, LogLine]) -> list[str]:
    caplog.clear()
    for labels, line in taken:
        lines.take("j-worker-x", "main", labels, line)
    return [r.getMessage() for r in caplog.records]


def test_ordinary_lines_reach_the_task_log_and_reports_do_not(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    lines = ReplicaLines(logging.getLogger("t"), ReplicaTarget("worker", 0))
    written = route(
        caplog, lines,
        (LEADER, stamped(1000, "epoch 1 starts")),
        (LEADER, stamped(1001, 'T9K_PROGRESS {"step": 1, "total": 4, "metrics": {"loss": 0.5}}')),
        (OTHER, stamped(1001, 'T9K_PROGRESS {"step": 99, "total": 4}')),  # not the leader: not counted
    )  # fmt: skip
    assert written == ["[j-worker-x/main] epoch 1 starts", "progress: step 1/4 (25.0%), loss=0.5"]
    assert (lines.progress.step, lines.progress.at) == (1, 1001.0)


def test_one_progress_line_every_few_seconds_and_the_last_at_the_end(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)
    clock = [5000.0]
    monkeypatch.setattr(lines_module.time, "time", lambda: clock[0])
    lines = ReplicaLines(logging.getLogger("t"), ReplicaTarget("worker", 0))
    report = 'T9K_PROGRESS {{"step": {0}, "total": 10}}'
    assert len(route(caplog, lines, (LEADER, stamped(1000, report.format(1))))) == 1
    clock[0] += progress_module.LOG_EVERY_SECONDS / 2
    assert route(caplog, lines, (LEADER, stamped(1001, report.format(2)))) == []  # too soon
    clock[0] += progress_module.LOG_EVERY_SECONDS / 2
    assert route(caplog, lines, (LEADER, stamped(1002, report.format(3)))) == [
        "progress: step 3/10 (30.0%), 1 steps/s, ETA 0:00:07"
    ]
    caplog.clear()
    lines.flush()
    assert caplog.records == []  # nothing new since
    route(caplog, lines, (LEADER, stamped(1003, report.format(4))))
    lines.flush()
    assert [r.getMessage() for r in caplog.records] == ["progress: step 4/10 (40.0%), 1 steps/s, ETA 0:00:06"]


def test_reports_count_where_the_lines_cannot_be_shown(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    lines = ReplicaLines(logging.getLogger("t"), ReplicaTarget("worker", 0), show=False)
    taken = [(LEADER, stamped(1000, "hello")), (LEADER, stamped(1001, 'T9K_PROGRESS {"step": 2}'))]
    assert route(caplog, lines, *taken) == []
    assert lines.progress.step == 2


def test_without_a_leader_no_report_counts(caplog: pytest.LogCaptureFixture) -> None:
    lines = ReplicaLines(logging.getLogger("t"))
    route(caplog, lines, (LEADER, stamped(1000, 'T9K_PROGRESS {"step": 2}')))
    assert lines.progress.at is None


# -- Followed -----------------------------------------------------------------------------------------------


def pytorch() -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}
    replicas = [{"type": t, "replicas": 1, "template": template} for t in ("master", "worker")]
    return {"kind": "PyTorchTrainingJob", "spec": {"replicaSpecs": replicas}}


@pytest.mark.parametrize(
    ("log_replicas", "leader"),
    [
        (None, ReplicaTarget("master", 0)),
        ("all", ReplicaTarget("master", 0)),
        ("master", ReplicaTarget("master", 0)),
        ("worker", None),
    ],
)
def test_the_leaders_reports_count_while_its_log_is_followed(
    log_replicas: str | None, leader: ReplicaTarget | None
) -> None:
    followed = Followed.for_job("PyTorchTrainingJob", pytorch(), log_replicas, needs_leader=False)
    assert followed.leader == leader
    assert Followed.from_json(followed.to_json()) == followed


def test_progress_timeout_refuses_log_replicas_without_the_leader() -> None:
    with pytest.raises(ValueError, match=r"log_replicas: progress_timeout .* \(master/0\), which 'worker'"):
        Followed.for_job("PyTorchTrainingJob", pytorch(), "worker", needs_leader=True)
