"""The order test modules start in (`tests.support.schedule`): the longest first, each module whole."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.support import schedule


@dataclass
class Node:
    nodeid: str


def test_modules_start_longest_first_whole_and_the_unmeasured_last_in_their_order() -> None:
    items = [
        Node("tests/a/test_unit.py::test_1"),
        Node("tests/a/test_unit.py::test_2[x]"),
        Node("tests/new/test_untimed.py::test_1"),
        Node("tests/b/test_slow.py::test_1"),
        Node("tests/b/test_slow.py::test_2"),
        Node("tests/c/test_mid.py::test_1"),
        Node("tests/new/test_also_untimed.py::test_1"),
    ]
    seconds = {"tests/a/test_unit.py": 1.0, "tests/b/test_slow.py": 200.0, "tests/c/test_mid.py": 30.0}
    schedule.longest_first(items, seconds)
    assert [i.nodeid for i in items] == [
        "tests/b/test_slow.py::test_1",
        "tests/b/test_slow.py::test_2",
        "tests/c/test_mid.py::test_1",
        "tests/a/test_unit.py::test_1",
        "tests/a/test_unit.py::test_2[x]",
        "tests/new/test_untimed.py::test_1",
        "tests/new/test_also_untimed.py::test_1",
    ]


def test_the_committed_durations_name_modules_that_exist(tmp_path: Path) -> None:
    """A module renamed or moved without ``--save`` would silently start last: the file must match."""
    root = Path(schedule.__file__).resolve().parents[2]
    seconds = schedule.load()
    assert seconds, schedule.DURATIONS
    assert [m for m in seconds if not (root / m).is_file()] == []
    assert schedule.load(tmp_path / "missing.json") == {}
    (tmp_path / "d.json").write_text(json.dumps({"tests/x.py": 3}))
    assert schedule.load(tmp_path / "d.json") == {"tests/x.py": 3.0}
