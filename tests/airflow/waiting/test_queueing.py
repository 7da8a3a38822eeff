"""Where a job waits in its T9k Queue (``waiting.queueing``), pure: the expected start the Queue's rule gives
(admitted in order once what each needs is free, the running jobs freeing theirs at their ETAs), the line the
task log says and when it says it again, and the record a task's waits keep (its JSON, its XCom)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from t9k_provider.kube.resources import GPU
from t9k_provider.waiting.queueing import (
    Estimate,
    Other,
    QueueRecord,
    QueueState,
    expected_start,
    line,
)

pytestmark = pytest.mark.airflow_independent

T0 = datetime(2026, 1, 1, 10, 0, 0, tzinfo=timezone.utc).timestamp()


def gpus(n: int) -> dict[str, Decimal]:
    return {GPU: Decimal(n)}


def state(**fields: object) -> QueueState:
    """Queue ``gpu`` of 2 GPUs, the job 1st in line needing 2, ``a`` running with 2 until T0+60."""
    base: dict[str, object] = {
        "queue": "gpu", "read_at": T0, "standing": "waiting", "position": 1, "reason": "QuotaExceeded",
        "quota": gpus(2), "used": gpus(2), "needs": gpus(2),
        "holders": (Other("a", gpus(2), running=True, ends_at=T0 + 60, progress="step 10/40, ETA 0:01:00"),),
    }  # fmt: skip
    return QueueState(**{**base, **fields})  # type: ignore[arg-type]


def test_the_job_a_running_job_holds_the_quota_for_starts_at_its_eta() -> None:
    assert expected_start(state()) == Estimate(T0 + 60, True)


def test_jobs_ahead_are_admitted_in_order_and_one_without_an_eta_holds_its_share() -> None:
    second = state(position=2, ahead=(Other("b", gpus(2)),))
    # b is admitted at a's end and runs for a time no one knows yet: this job starts after T0+60
    assert expected_start(second) == Estimate(T0 + 60, False)
    bigger = state(quota=gpus(4), used=gpus(2), position=2, ahead=(Other("b", gpus(2)),))
    assert expected_start(bigger) == Estimate(T0 + 60, True)  # b takes the free half now, a's half is ours
    two = state(
        quota=gpus(4), used=gpus(4), position=1,
        holders=(Other("a", gpus(2), True, T0 + 60), Other("c", gpus(2), True, T0 + 30)),
    )  # fmt: skip
    assert expected_start(two) == Estimate(T0 + 30, True)  # the first to end frees enough


def test_no_start_is_expected_from_a_queue_that_admits_nothing_or_has_no_quota() -> None:
    for standing in ("closed", "deleted", "refused"):
        assert expected_start(state(standing=standing)) == Estimate(None, False)
    assert expected_start(state(quota=None)) == Estimate(None, False)
    overdue = state(holders=(Other("a", gpus(2), True, T0 - 5),))
    assert expected_start(overdue) == Estimate(T0, True)  # its ETA passed: it ends any moment


def test_the_line_says_queue_place_quota_jobs_ahead_and_the_expected_start() -> None:
    said = line(state(position=2, ahead=(Other("b", gpus(2)),)), Estimate(T0 + 60, False), T0)
    assert said == (
        f"queue gpu: 2nd in line; quota {GPU} 2 of 2 used, 0 free; ahead: a (running, step 10/40, "
        f"ETA 0:01:00), b (waiting); this job needs {GPU} 2: expected to start after 10:01:00 UTC (in "
        "0:01:00) (a job it waits for has not reported its progress yet)"
    )
    assert line(state(), Estimate(T0 + 60, True), T0).endswith(
        "expected to start at 10:01:00 UTC (in 0:01:00)"
    )
    unknown = line(state(holders=(Other("a", gpus(2), True),)), Estimate(T0, False), T0)
    assert unknown.endswith("expected start unknown (a job it waits for has not reported its progress yet)")
    assert line(state(standing="closed"), Estimate(None, False), T0) == (
        "queue gpu is closed: it admits no new job, and this one waits until it opens"
    )
    assert line(state(standing="deleted"), Estimate(None, False), T0).startswith(
        "queue gpu does not exist any"
    )


def test_a_line_is_said_once_per_change_and_a_start_again_only_when_it_moved() -> None:
    record, said = QueueRecord("gpu").observe(state(), T0)
    assert said is not None and said.startswith("queue gpu: 1st in line")
    assert record.since == T0 and record.in_line
    again, said = record.observe(state(read_at=T0 + 10), T0 + 10)
    assert said is None  # the same place, quota, jobs ahead and start
    nudged = state(read_at=T0 + 20, holders=(Other("a", gpus(2), True, T0 + 65),))
    _, said = again.observe(nudged, T0 + 20)
    assert said is None  # 5 s later with 40 s to go: not a new estimate
    late = state(read_at=T0 + 20, holders=(Other("a", gpus(2), True, T0 + 90),))
    moved, said = again.observe(late, T0 + 20)
    assert said is not None and "10:01:30 UTC" in said
    closed, said = moved.observe(state(standing="closed", read_at=T0 + 30), T0 + 30)
    assert said is not None and "closed" in said and closed.in_line
    admitted, said = closed.observe(
        state(standing="admitted", position=None, admitted_at=T0 + 95, read_at=T0 + 96), T0 + 96
    )
    assert said == "queue gpu admitted the job after 0:01:35 in line"
    assert not admitted.in_line and admitted.admitted_at == T0 + 95
    assert [(p["position"], p["standing"]) for p in admitted.positions] == [
        (1, "waiting"), (1, "closed"), (None, "admitted")
    ]  # fmt: skip
    assert (
        admitted.observe(state(standing="admitted", position=None, admitted_at=T0 + 95), T0 + 99)[1] is None
    )


def test_the_record_travels_as_json_and_ends_in_the_xcom() -> None:
    record, _ = QueueRecord("gpu").observe(state(position=2), T0)
    record, _ = record.observe(state(read_at=T0 + 30), T0 + 30)
    record, _ = record.observe(
        state(standing="admitted", position=None, admitted_at=T0 + 61, read_at=T0 + 62), T0 + 62
    )
    assert QueueRecord.from_json(record.to_json()) == record
    assert record.xcom(created=T0 - 4, now=T0 + 100) == {
        "queue": "gpu",
        "waited_seconds": 65.0,
        "admitted_at": "2026-01-01T10:01:01Z",
        "positions": [
            {"time": "2026-01-01T10:00:00Z", "position": 2, "standing": "waiting"},
            {"time": "2026-01-01T10:00:30Z", "position": 1, "standing": "waiting"},
            {"time": "2026-01-01T10:01:02Z", "position": None, "standing": "admitted"},
        ],
    }
    never = replace(QueueRecord("gpu"), since=T0)
    assert never.waited(None, T0 + 7) == 7  # not admitted (yet): so far
