"""scripts/test_durations.py: seconds per folder and module from JUnit XML, a moved module matched by name."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test_durations.py"


@pytest.fixture(scope="module")
def durations():
    spec = importlib.util.spec_from_file_location("test_durations", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def junit(path: Path, cases: list[tuple[str, float]]) -> Path:
    body = "".join(
        f'<testcase classname="{cls}" name="t{i}" time="{t}"/>' for i, (cls, t) in enumerate(cases)
    )
    path.write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return path


def test_seconds_and_counts_by_module(durations, tmp_path: Path) -> None:
    xml = junit(
        tmp_path / "a.xml", [("tests.jobs.test_x", 1.5), ("tests.jobs.test_x", 0.5), ("tests.kube.test_y", 3)]
    )
    assert durations.seconds_by_module(xml) == {"jobs.test_x": (2.0, 2), "kube.test_y": (3.0, 1)}


def test_a_module_that_moved_folder_is_compared_with_itself(durations, tmp_path: Path) -> None:
    before = durations.seconds_by_module(
        junit(tmp_path / "b.xml", [("tests.local.test_kubelet_cluster", 120)])
    )
    after = durations.seconds_by_module(
        junit(tmp_path / "a.xml", [("tests.local.kubelet.test_kubelet_cluster", 90)])
    )
    table = durations.table(after, durations.renamed(before, after), top=5)
    assert "| `local.kubelet` | 120 s (1) | 90 s (1) |" in table
    assert "| `local.kubelet.test_kubelet_cluster` | 120 s (1) | 90 s (1) |" in table
    assert "| **all** | 120 s (1) | 90 s (1) |" in table


def test_modules_of_one_file_name_in_two_folders_stay_apart(durations, tmp_path: Path) -> None:
    """Both ``tests/airflow`` and ``tests/local/scheduler`` hold a ``test_queues_on_cluster.py``."""
    cases = [
        ("tests.airflow.test_queues_on_cluster", 170),
        ("tests.local.scheduler.test_queues_on_cluster", 8),
    ]
    before = durations.seconds_by_module(junit(tmp_path / "b.xml", cases))
    after = durations.seconds_by_module(junit(tmp_path / "a.xml", cases))
    assert durations.renamed(before, after) == before


def test_save_writes_seconds_by_module_file(durations, tmp_path: Path, monkeypatch) -> None:
    """``--save``: the file `tests.support.schedule` orders the modules by."""
    xml = junit(
        tmp_path / "a.xml", [("tests.jobs.test_x", 1.25), ("tests.jobs.test_x", 1), ("tests.kube.test_y", 3)]
    )
    monkeypatch.setattr(durations, "DURATIONS", tmp_path / "durations.json")
    monkeypatch.setattr("sys.argv", ["test_durations.py", str(xml), "--save"])
    durations.main()
    assert json.loads((tmp_path / "durations.json").read_text()) == {
        "tests/jobs/test_x.py": 2.2,
        "tests/kube/test_y.py": 3.0,
    }
