"""scripts/test_durations.py: seconds per folder and module from JUnit XML, a moved module matched by name."""

from __future__ import annotations

import importlib.util
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
