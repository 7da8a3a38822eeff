"""A decorated function reports progress: the decorators take the options, and the runner ships
``t9k_provider.progress`` with the call to images without the package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from airflow.providers.common.compat.sdk import DAG, task

from t9k_provider.decorators import transport
from t9k_provider.decorators.source import ship


def lambda_free() -> None:
    return None


def test_every_decorator_takes_the_options() -> None:
    with DAG("opts", schedule=None):
        op = task.t9k_pytorch(
            workers=2, progress_timeout=60, checkpoint_volume={"hostPath": {"path": "/ckpt"}}
        )(lambda_free)().operator
    assert op.progress_timeout == 60 and op.checkpoint_volume == {"hostPath": {"path": "/ckpt"}}


def reports_and_returns() -> str:
    from t9k_provider.progress import report

    report(1, total=2, loss=0.5)
    return "done"


def test_a_function_reports_in_an_image_without_the_package(tmp_path: Path) -> None:
    """The runner under ``python -I -S`` (no site-packages: no t9k_provider) still gives the function
    ``t9k_provider.progress``, shipped with the call."""
    (tmp_path / "runner.py").write_bytes(transport.unpack(transport.packed_runner()))
    call = transport.encode_call(ship(reports_and_returns), "json", [], {})
    (tmp_path / "call.json").write_bytes(transport.unpack(call))
    probe = [sys.executable, "-I", "-S", "-c", "import t9k_provider"]
    assert subprocess.run(probe, capture_output=True, timeout=30).returncode != 0  # the probe works
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(tmp_path / "runner.py"), str(tmp_path / "call.json")],
        capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "RANK": "0"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    marker, _, body = done.stdout.splitlines()[0].partition(" ")
    assert marker == "T9K_PROGRESS" and json.loads(body)["step"] == 1
    assert transport.decode_result(done.stdout.splitlines(), "json") == "done"
