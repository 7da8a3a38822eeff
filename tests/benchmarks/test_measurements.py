"""Pieces of the measurements that need no cluster: status states, manifests, /proc readings, section 6's
progress lines."""

from __future__ import annotations

import os

import pytest

from benchmarks import live_logs, manifests, procstat
from benchmarks.controller_efficiency import StatusTrail, semantic
from t9k_provider.jobs import KINDS
from t9k_provider.progress import parse, report


def test_semantic_status_ignores_timestamps_only() -> None:
    status = {
        "phase": "Running",
        "startTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "Running", "status": "True", "lastTransitionTime": "x"}],
        "tasks": [
            {"replicas": [{"phase": "Running", "containers": [{"state": "running", "startedAt": "y"}]}]}
        ],
    }
    assert semantic(status) == {
        "phase": "Running",
        "conditions": [{"type": "Running", "status": "True"}],
        "tasks": [{"replicas": [{"phase": "Running", "containers": [{"state": "running"}]}]}],
    }


def test_status_trail_counts_distinct_consecutive_states_of_its_job() -> None:
    trail = StatusTrail("a")

    def job(name: str, phase: str, stamp: str) -> dict:
        return {"metadata": {"name": name}, "status": {"phase": phase, "startTime": stamp}}

    trail.on_event("ADDED", {"metadata": {"name": "a"}}, 0.0)  # no status yet: nothing to write
    trail.on_event("MODIFIED", job("a", "Pending", "1"), 0.0)
    trail.on_event("MODIFIED", job("a", "Pending", "2"), 0.0)  # only a timestamp moved: not a new state
    trail.on_event("MODIFIED", job("b", "Running", "2"), 0.0)  # another job
    trail.on_event("MODIFIED", job("a", "Running", "2"), 0.0)
    trail.on_event("MODIFIED", job("a", "Succeeded", "2"), 0.0)
    assert len(trail.states) == 3
    assert trail.phase == "Succeeded"


@pytest.mark.parametrize("kind", manifests.KIND_ORDER)
def test_every_kind_has_a_valid_manifest_that_ends_by_itself(kind: str) -> None:
    manifest = manifests.job(kind, "x", "ns", replicas=4, seconds=1.5)
    assert manifest["kind"] == kind
    text = str(manifest)
    assert manifests.EXIT_CODE in text and "'1.5'" in text
    assert manifests.collection(kind, "ns").endswith(f"/namespaces/ns/{KINDS[kind].PLURAL}")
    assert manifests.EXIT_CODE not in str(manifests.job(kind, "x", "ns", replicas=4, seconds=None))


def test_proc_readings_of_this_process() -> None:
    assert procstat.rss_bytes(os.getpid()) > 10 * 2**20
    before = procstat.cpu_seconds(os.getpid())
    sum(i * i for i in range(2_000_000))
    assert procstat.cpu_seconds(os.getpid()) > before


@pytest.mark.parametrize("step", [0, 1, 37, 99_999])
def test_section_6_writes_progress_lines_as_report_writes_them(
    step: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RANK", raising=False)
    line = live_logs.progress_line(step)
    capsys.readouterr()
    report(step, live_logs.TOTAL_STEPS, loss=round(1.0 / (step + 1), 6))
    assert capsys.readouterr().out == line
    parsed = parse(line.rstrip("\n"))
    assert parsed is not None and parsed.step == step and parsed.total == live_logs.TOTAL_STEPS
