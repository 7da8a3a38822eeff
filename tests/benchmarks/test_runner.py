"""The runner end to end: the server's request counter, a failed sanity check, and the quick smoke run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks import run, soak_faults
from benchmarks.api import USER_AGENT, Client, request_counts
from benchmarks.stats import Figure
from t9k_provider.testing import LocalCluster, unavailable
from tests.benchmarks.quick import quick_report

pytestmark = pytest.mark.slow


def test_server_counts_requests_by_user_agent_and_access(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    cluster = cluster_factory(node_agents=False)
    client = Client(cluster)
    before = request_counts(client)
    path = "/api/v1/namespaces/default/configmaps"
    client.json("GET", path)
    client.json("POST", path, {"metadata": {"name": "counted"}, "data": {"a": "b"}})
    assert client.call("GET", f"{path}?watch=true&timeoutSeconds=1")[0] == 200
    status, _, _ = cluster.request("GET", path, headers={"User-Agent": "someone-else"})
    assert status == 200
    after = request_counts(client)  # reading the counters is not counted itself
    client.close()

    def added(agent: str, access: str) -> int:
        return after.get((agent, access), 0) - before.get((agent, access), 0)

    assert [added(USER_AGENT, a) for a in ("read", "write", "watch")] == [1, 1, 1]
    assert added("someone-else", "read") == 1


def test_a_failed_section_fails_the_run_and_keeps_the_others_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An implausible measurement or a section that raises fails the run, but the report is written after
    every section: the sections before and after it keep what they measured."""

    def broken(profile: run.Profile, work: Path) -> list[Figure]:
        return [Figure("1. X", "requests per job", "requests", [0.0] * profile.runs)]

    def crashing(profile: run.Profile, work: Path) -> list[Figure]:
        raise RuntimeError("the cluster went away")

    def sound(title: str) -> Callable[[run.Profile, Path], list[Figure]]:
        return lambda profile, work: [Figure(title, "writes per job", "requests", [3.0] * profile.runs)]

    monkeypatch.setattr(
        run,
        "SECTIONS",
        {"before": sound("2. Before"), "broken": broken, "crashing": crashing, "after": sound("3. After")},
    )
    output = tmp_path / "report.md"
    assert run.main(["--quick", "--output", str(output), "--work-dir", str(tmp_path / "work")]) == 1
    text = output.read_text()
    assert "## 2. Before" in text and "## 3. After" in text
    assert "## 1. X" not in text


def test_quick_needs_its_own_output() -> None:
    with pytest.raises(SystemExit):
        run.main(["--quick"])


@pytest.mark.timeout(900)
def test_quick_run_of_every_benchmark(tmp_path: Path) -> None:
    """What `make bench` runs, in a tiny configuration, through the real command: sections 1-5, and none of
    the opt-in ones (each has its own quick run here)."""
    text = quick_report(tmp_path)
    for section in (
        "1. Controller efficiency",
        "2. Controller latency",
        "3. Waiting cost",
        "4. Local",
        "5. DAG parse",
    ):
        assert f"## {section}" in text
    assert "GenericJob: writes / minimum" in text
    assert "T9kJobTrigger: API requests per waiting task per minute" in text
    for opt_in in ("6. Live replica logs", "7. Per-task overhead", "8. Controller at scale"):
        assert f"## {opt_in}" not in text  # only with --only NAME


@pytest.mark.timeout(900)
def test_quick_run_of_live_logs_and_the_controller_at_scale(tmp_path: Path) -> None:
    """The two opt-in sections that fit a quick run together, through the real command."""
    text = quick_report(tmp_path, "livelogs", "scale")
    assert "## 6. Live replica logs" in text and "## 8. Controller at scale" in text
    assert "live logs on: triggerer CPU with" in text
    assert "live logs on, reporting progress: triggerer requests during the 1.5 s window | 0 |" in text
    assert "reporting progress: triggerer requests over live logs on's, to the window's end | 0 |" in text
    assert "reporting progress: triggers whose event carried a report (step > 0), of 3 | 3 |" in text
    assert "## 1. Controller efficiency" not in text


@pytest.mark.timeout(900)
def test_quick_run_of_the_soak(tmp_path: Path) -> None:
    """One small round of `make soak` through the real command: every workload kind, every fault, under a CPU
    hog; the run fails (and so this test) when any object misses its desired state, a replica runs twice at
    once or anything is left behind."""
    if (why := soak_faults.cannot_cut()) is not None:
        unavailable("resetting the API server's connections", why)
    text = quick_report(tmp_path, "soak")
    assert "## 13. Fault injection (soak)" in text
    for figure in (
        "objects that missed their desired state (missed)",
        "replicas that ran twice at once",
        "left behind after deletion and stop",
        "writes never seen by a watch",
    ):
        assert f"| {figure} | 0 | 0-0 |" in text
    assert "| faults: API server SIGKILLed and started again | 1 |" in text
    assert "write -> the soak's watch sees it, p99" in text
