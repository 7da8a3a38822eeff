"""The figures' arithmetic and the sanity check that turns a broken measurement into a failed run."""

from __future__ import annotations

import math

import pytest

from benchmarks.report import render, verdict
from benchmarks.stats import Figure, MeasurementError, check, percentile


def figure(samples: list[float], **options: object) -> Figure:
    return Figure("1. S", "requests per job", "requests", samples, **options)  # type: ignore[arg-type]


def test_percentile_is_nearest_rank() -> None:
    samples = [float(i) for i in range(100, -1, -1)]  # 0..100, unsorted
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile(samples, 100) == 100.0
    assert percentile([3.0], 99) == 3.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_median_spread_and_targets() -> None:
    f = figure([3.0, 1.0, 2.0], target=("<", 2.5))
    assert (f.median, f.low, f.high) == (2.0, 1.0, 3.0)
    assert f.met is True
    assert verdict(f) == "< 2.5: met"
    missed = figure([4.0, 5.0, 6.0], target=("<", 2.5))
    assert missed.met is False
    assert "missed" in verdict(missed) and "2.0x" in verdict(missed)
    ratio = figure([1.0, 1.0, 1.0], target=(">=", 10.0))
    assert ratio.met is False and "10.0x" in verdict(ratio)


def test_a_counter_that_reads_zero_fails_the_check() -> None:
    with pytest.raises(MeasurementError, match="requests per job"):
        check([figure([5.0, 0.0, 5.0])], runs=3)


def test_missing_runs_and_nan_fail_the_check() -> None:
    with pytest.raises(MeasurementError, match="2 samples for 3 runs"):
        check([figure([1.0, 2.0])], runs=3)
    with pytest.raises(MeasurementError, match="non-finite"):
        check([figure([1.0, math.nan, 2.0])], runs=3)


def test_zero_is_accepted_where_it_is_the_expected_result() -> None:
    check([figure([0.0, 0.0, 0.0], zero_ok=True), figure([1.0, 2.0, 3.0])], runs=3)


def test_report_lists_every_figure_and_the_targets() -> None:
    figures = [
        figure([1.0, 2.0, 3.0], target=("<", 1.0)),
        Figure("2. T", "latency p99", "s", [0.5, 0.6, 0.7]),
    ]
    timeline = [("start", 0.0, "1.00 / 1.00 / 1.00"), ("controller", 90.0, "2.00 / 1.50 / 1.20")]
    text = render(figures, {"CPU": "test"}, 3, 60.0, timeline, "make bench")
    assert "## 1. S" in text and "## 2. T" in text
    assert "| requests per job | 2.0 | 1.0-3.0 | requests | < 1.0: **missed** (2.0x off) |" in text
    assert "| latency p99 | 0.6 | 0.5-0.7 | s |  |" in text
    assert "| start | 0.0 | 1.00 / 1.00 / 1.00 |" in text
    assert "| controller | 1.5 | 2.00 / 1.50 / 1.20 |" in text


def test_sections_not_measured_keep_their_last_figures_and_targets() -> None:
    """A heavy section run alone (or left out) replaces only its own block; the others stay as they were."""
    timeline = [("start", 0.0, "1.00 / 1.00 / 1.00")]
    old = render(
        [
            figure([5.0] * 3, target=("<", 1.0)),
            Figure("6. Heavy", "overhead", "s", [0.7] * 3, ("<=", 1.0)),
            Figure("10. Tenth", "duplicates", "pods", [0.0] * 3, ("<=", 0), zero_ok=True),
        ],
        {"date": "2026-01-01 00:00 UTC", "commit": "abc1234"}, 3, 60.0, timeline, "make bench",
        {"6. Heavy": "Measured 2026-01-01 00:00 UTC at commit abc1234 (...); load average 9 at its start."},
    )  # fmt: skip
    new = render(
        [figure([2.0, 2.0, 2.0], target=("<", 1.0))], {"date": "2026-02-02 00:00 UTC", "commit": "def5678"},
        3, 60.0, timeline, "make bench", {}, old,
    )  # fmt: skip
    assert "| 1. requests per job | 2.0 requests | < 1.0: **missed** (2.0x off) |" in new
    assert "5.0 requests" not in new
    assert "| 6. overhead | 0.7 s | <= 1.0: met |" in new  # its target row is kept too
    assert "| 10. duplicates | 0.0 pods | <= 0.0: met |" in new  # two-digit sections too
    assert "## 6. Heavy\n\nMeasured 2026-01-01 00:00 UTC at commit abc1234" in new
    assert new.index("## 1. S") < new.index("## 6. Heavy") < new.index("## 10. Tenth")
    assert "Sections 6, 10 were not run this time" in new


def test_a_kept_block_without_its_own_stamp_gets_the_old_reports_date_and_commit() -> None:
    old = (
        "# Benchmarks\n\n## Machine\n\n| | |\n|---|---|\n"
        "| date | 2026-01-01 00:00 UTC |\n| commit | abc1234 |\n\n"
        "## Targets\n\n| figure | median | target |\n|---|---:|---|\n| 3. x | 1 s | < 2: met |\n\n"
        "## 3. Old\n\nHow it was measured.\n\n| measure | median |\n|---|---:|\n| x | 1 |\n"
    )
    new = render([figure([1.0])], {"date": "now", "commit": "new"}, 1, 1.0, [], "make bench", {}, old)
    assert "## 3. Old\n\nMeasured 2026-01-01 00:00 UTC at commit abc1234; kept from an earlier report." in new
    assert "| 3. x | 1 s | < 2: met |" in new
