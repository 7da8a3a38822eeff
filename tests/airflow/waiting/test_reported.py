"""What a wait makes of the leader's progress reports (``waiting.reported``): the latest, a bounded history,
the rate and ETA, the task log's line, JSON across deferrals."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from t9k_provider.progress import Report
from t9k_provider.waiting.reported import HISTORY_LIMIT, LOG_EVERY_SECONDS, ReportedProgress

pytestmark = pytest.mark.airflow_independent

RUNNING_SINCE = datetime(2026, 1, 1, 10, 0, 0, tzinfo=timezone.utc).timestamp()


def reported(*steps: tuple[float, float], total: float | None = 100) -> ReportedProgress:
    """A progress with a report at each ``(step, time)``."""
    state = ReportedProgress()
    for number, at in steps:
        state.add(Report(number, total, {"loss": 1.0 / (number + 1)}), at)
    return state


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
    assert state.add(Report(10, 100, {}), 1000.0) is None  # an older one
    assert state.add(Report(20, 100, {}), 1005.0) is None  # the latest one
    assert (state.step, state.at, len(state.history)) == (20, 1005.0, 2)


def test_history_stays_bounded_and_spans_the_run() -> None:
    state = reported(*((n, 1000.0 + n) for n in range(1, 1001)))
    assert len(state.history) <= HISTORY_LIMIT
    assert state.history[-1]["step"] == 1000
    assert state.history[0]["step"] == 1  # thinned out, not cut to the last hundred
    steps = [h["step"] for h in state.history]
    assert steps == sorted(steps)


def test_json_round_trip_keeps_everything_with_when_it_was_last_logged() -> None:
    state = reported((10, 1000.0), (20, 1005.0))
    state.logged_at = 1234.0
    data = state.to_json()
    keys = {"step", "total", "metrics", "time", "history", "resumptions", "logged"}
    assert data is not None and set(data) == keys
    again = ReportedProgress.from_json(data)
    assert again == state and again.logged_at == 1234.0
    assert not again.due(1234.0 + LOG_EVERY_SECONDS - 0.1) and again.due(1234.0 + LOG_EVERY_SECONDS)
    assert ReportedProgress().to_json() is None and ReportedProgress.from_json(None) == ReportedProgress()


def test_latest_names_step_time_and_age() -> None:
    state = reported((42, RUNNING_SINCE + 3))
    assert state.latest(RUNNING_SINCE + 68) == "step 42/100 at 2026-01-01 10:00:03 UTC (0:01:05 ago)"
    assert ReportedProgress().latest(0.0) == "no report"


def test_a_step_below_the_latest_is_a_resumption_and_the_rate_counts_from_it() -> None:
    """The job restarted and the training went back to its checkpoint: said once, with the steps lost, and the
    rate and ETA are measured on the resumed run only."""
    state = reported(*((n, 1000.0 + n) for n in range(1, 38)))
    assert state.add(Report(31, 100, {}), 1100.0) == "resumed"
    assert state.resumed_line() == "progress: resumed at step 31 after reaching step 37 (6 steps lost)"
    assert state.rate() is None  # one report since it resumed
    assert state.add(Report(33, 100, {}), 1104.0) == "new"
    assert state.rate() == 0.5  # 2 steps in 4 s, not counting the steps before it went back
    assert ReportedProgress.from_json(state.to_json()).resumptions == [
        {"reached": 37, "resumed": 31, "time": 1100.0}
    ]
