"""``t9k_provider.progress``: the report line a training writes and the operators read, the same both ways,
and a module that needs nothing beyond the standard library (the TaskFlow runner ships it)."""

from __future__ import annotations

import ast
import io
import json
import sys
from pathlib import Path

import pytest

from t9k_provider import progress
from t9k_provider.progress import MARKER, Report, parse, report

pytestmark = pytest.mark.airflow_independent


def reported(
    monkeypatch: pytest.MonkeyPatch, *args: object, rank: str | None = None, **metrics: object
) -> str:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    if rank is None:
        monkeypatch.delenv("RANK", raising=False)
    else:
        monkeypatch.setenv("RANK", rank)
    report(*args, **metrics)  # type: ignore[arg-type]
    return out.getvalue()


def test_a_report_is_one_documented_line_that_parses_back(monkeypatch: pytest.MonkeyPatch) -> None:
    line = reported(monkeypatch, 30, 100, loss=0.25, phase="warmup", best=True)
    assert line.endswith("\n") and line.count("\n") == 1
    marker, _, body = line.rstrip("\n").partition(" ")
    assert marker == MARKER
    assert json.loads(body) == {
        "step": 30, "total": 100, "metrics": {"loss": 0.25, "phase": "warmup", "best": True}
    }  # fmt: skip
    assert parse(line.rstrip("\n")) == Report(30, 100, {"loss": 0.25, "phase": "warmup", "best": True})


@pytest.mark.parametrize(("rank", "writes"), [(None, True), ("0", True), ("1", False), ("7", False)])
def test_only_global_rank_zero_writes(
    monkeypatch: pytest.MonkeyPatch, rank: str | None, writes: bool
) -> None:
    assert bool(reported(monkeypatch, 1, rank=rank)) is writes


@pytest.mark.parametrize(
    ("args", "metrics", "error", "names"),
    [
        ((-1,), {}, ValueError, "step"),
        (("3",), {}, ValueError, "step"),
        ((float("nan"),), {}, ValueError, "step"),
        ((1, 0), {}, ValueError, "total"),
        ((1,), {"loss": float("inf")}, TypeError, "metric 'loss'"),
        ((1,), {"weights": [1, 2]}, TypeError, "metric 'weights'"),
        ((1,), {f"m{i}": i for i in range(33)}, ValueError, "metrics"),
    ],
)
def test_bad_arguments_name_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, args: tuple, metrics: dict, error: type, names: str
) -> None:
    with pytest.raises(error, match=names):
        reported(monkeypatch, *args, **metrics)


def test_numpy_scalars_are_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    numpy = pytest.importorskip("numpy")
    line = reported(monkeypatch, numpy.int64(5), numpy.int32(10), loss=numpy.float32(0.5))
    assert parse(line.strip()) == Report(5, 10, {"loss": 0.5})


@pytest.mark.parametrize(
    ("text", "step"),
    [
        ('T9K_PROGRESS {"step": 3}', 3),
        ('   T9K_PROGRESS {"step": 3, "total": null, "metrics": {}}', 3),
        ('worker-1: T9K_PROGRESS {"step": 4, "total": 8}', 4),  # DeepSpeed's pdsh prefix
        ('echo T9K_PROGRESS {"step": 3}', None),  # a command that mentions it
        ("T9K_PROGRESS not json", None),
        ('T9K_PROGRESS {"total": 3}', None),
        ('T9K_PROGRESS {"step": -1}', None),
        ('T9K_PROGRESS {"step": 1, "metrics": []}', None),
        ("plain output", None),
    ],
)
def test_parse_reads_reports_and_never_raises(text: str, step: int | None) -> None:
    parsed = parse(text)
    assert (parsed.step if parsed else None) == step


def test_the_module_needs_only_the_standard_library() -> None:
    """The runner ships its source to images without the package (``decorators/runner.provide``)."""
    tree = ast.parse(Path(progress.__file__).read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) else []
        )
    }  # fmt: skip
    assert "json" in imported  # the probe reads the module's imports
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
