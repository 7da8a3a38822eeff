"""``t9k_provider.progress``: the report line a training writes and the operators read, the same both ways,
and a module that needs nothing beyond the standard library (the TaskFlow runner ships it)."""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
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


def served_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """The scalars of an event directory as TensorBoard's own loader reads them (tag: [(step, value)])."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    events = EventAccumulator(str(directory))
    events.Reload()
    return {
        tag: [
            (e.step, round(float(tensor_util.make_ndarray(e.tensor_proto)), 4)) for e in events.Tensors(tag)
        ]
        for tag in events.Tags()["tensors"]
    }


@pytest.fixture
def scalars_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """``T9K_TENSORBOARD_DIR`` set, and this process's writer not opened yet."""
    monkeypatch.setattr(progress, "_scalars", progress._Scalars())
    monkeypatch.setenv(progress.TENSORBOARD_DIR_ENV, str(tmp_path / "tb"))
    return tmp_path / "tb"


def test_reports_are_tensorboard_scalars_in_its_directory(
    monkeypatch: pytest.MonkeyPatch, scalars_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorboard")
    for step, loss in ((1, 0.5), (2, 0.25), (3.7, 0.125)):
        reported(monkeypatch, step, 10, loss=loss, phase="warmup", best=True)
    reported(monkeypatch, 9, rank="1", loss=9.0)  # another rank writes nothing, here neither
    assert served_scalars(scalars_dir) == {"loss": [(1, 0.5), (2, 0.25), (3, 0.125)]}  # no str, no bool
    assert capsys.readouterr().err == ""


def test_without_a_writer_the_training_goes_on_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, scalars_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress, "WRITERS", (("no_such_writer_module", "Writer"),))
    lines = [reported(monkeypatch, step, 3, loss=1.0 / step) for step in (1, 2, 3)]
    assert [parse(line.strip()).step for line in lines] == [1, 2, 3]  # type: ignore[union-attr]
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"not written as TensorBoard scalars to {scalars_dir}" in err and "no_such_writer_module" in err
    assert not scalars_dir.exists()


def test_a_writer_that_fails_is_turned_off_once(
    monkeypatch: pytest.MonkeyPatch, scalars_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorboard")
    scalars_dir.parent.mkdir(exist_ok=True)
    scalars_dir.write_text("a file where the directory should be")
    for step in (1, 2):
        assert reported(monkeypatch, step, loss=0.5).startswith(MARKER)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the training goes on without them" in err, err


PROBE = """
import json, os, sys
{before}
from t9k_provider.progress import report
report(1, 2, loss=0.5)
from t9k_provider import progress
writer = progress._scalars.writer
loaded = sorted(m for m in ("torch", "tensorboard", "tensorboardX") if m in sys.modules)
print(json.dumps({{"writer": type(writer).__module__ if writer else None, "loaded": loaded}}))
"""


@pytest.mark.parametrize(
    ("before", "directory", "writer", "loaded"),
    [
        ("", False, None, []),  # unset: nothing imported
        ("", True, "tensorboard.summary._writer", ["tensorboard"]),  # torch is not imported for it
        ("import torch", True, "torch.utils.tensorboard.writer", ["tensorboard", "torch"]),
    ],
    ids=["unset", "no-torch", "torch"],
)
def test_which_writer_and_what_it_costs(
    tmp_path: Path, before: str, directory: bool, writer: str | None, loaded: list[str]
) -> None:
    if directory:
        pytest.importorskip("tensorboard")
    if before:
        pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", progress.TENSORBOARD_DIR_ENV)}
    if directory:
        env[progress.TENSORBOARD_DIR_ENV] = str(tmp_path / "tb")
    probe = PROBE.format(before=before)
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout.splitlines()[-1]) == {"writer": writer, "loaded": loaded}, out.stderr
    if directory:
        assert served_scalars(tmp_path / "tb") == {"loss": [(1, 0.5)]}
