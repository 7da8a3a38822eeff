"""Where the followed lines go (``replicalogs.lines``): into the task log, except the leader's progress
reports, which count and show as one progress line every few seconds."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from t9k_provider.kube.podlogs import LogLine
from t9k_provider.replicalogs import lines as lines_module
from t9k_provider.replicalogs.lines import ReplicaLines
from t9k_provider.replicalogs.targets import Followed, ReplicaTarget
from t9k_provider.waiting import reported as progress_module

pytestmark = pytest.mark.airflow_independent


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


def test_a_wait_taking_over_keeps_the_pace_of_the_one_before(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's first wait wrote a progress line and deferred: the trigger, built from what the worker
    handed over, writes its first line when the pace allows, not at its first report."""
    caplog.set_level(logging.INFO)
    clock = [5000.0]
    monkeypatch.setattr(lines_module.time, "time", lambda: clock[0])
    report = 'T9K_PROGRESS {{"step": {0}, "total": 10}}'
    worker = ReplicaLines(logging.getLogger("t"), ReplicaTarget("worker", 0))
    assert len(route(caplog, worker, (LEADER, stamped(1000, report.format(1))))) == 1
    handed = progress_module.ReportedProgress.from_json(worker.progress.to_json())
    trigger = ReplicaLines(logging.getLogger("t"), ReplicaTarget("worker", 0), handed)
    clock[0] += 1.0
    assert route(caplog, trigger, (LEADER, stamped(1001, report.format(2)))) == []  # 1 s after the worker's
    clock[0] += progress_module.LOG_EVERY_SECONDS
    assert route(caplog, trigger, (LEADER, stamped(1006, report.format(7)))) == [
        "progress: step 7/10 (70.0%), 1 steps/s, ETA 0:00:03"
    ]


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
