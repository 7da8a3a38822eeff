"""The order test modules start in: the longest first, by their measured seconds (``tests/durations.json``).

pytest-xdist's ``--dist loadscope`` hands each worker whole modules in the order collected; its default
reorder puts the modules with the most tests first, which on this suite is the unit tests, and left the
few-test modules that take minutes (a benchmark's quick run, a real Airflow deployment) to start last, with
one worker busy alone at the end. Started first, they overlap the short ones (``make test`` runs with
``--no-loadscope-reorder``). A module not measured yet goes after the measured ones, in collection order;
``scripts/test_durations.py --save`` writes the file from a run's JUnit XML.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"


class Item(Protocol):
    nodeid: str


def module(nodeid: str) -> str:
    """The test module of a node id (``tests/x/test_y.py::test_z[a]`` -> ``tests/x/test_y.py``)."""
    return nodeid.split("::", 1)[0]


def load(path: Path = DURATIONS) -> dict[str, float]:
    """Seconds by module path; empty where the file is missing (the order is then the collected one)."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except FileNotFoundError:
        return {}


def longest_first(items: list[Item], seconds: Mapping[str, float]) -> None:
    """Sorts ``items`` in place: modules by their seconds, longest first; a module's tests stay together and
    in their order (the sort is stable), as do the unmeasured modules after the rest."""
    items.sort(key=lambda item: -seconds.get(module(item.nodeid), 0.0))
