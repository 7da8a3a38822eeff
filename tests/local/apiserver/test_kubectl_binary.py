"""The ``kubectl_binary`` fixture (tests/conftest.py): without kubectl, a test that runs kubectl skips on a
developer machine and fails under ``CI=true``, saying why, before any module fixture (a cluster) starts.

Each case is a child pytest, whose PATH has no kubectl, on a probe module marked as the kubectl tests are
and loading tests/conftest.py as a plugin (a child on a real kubectl test would spend seconds importing
the clients)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import pathlib

import pytest

pytestmark = pytest.mark.usefixtures("kubectl_binary")


@pytest.fixture(scope="module")
def cluster():
    pathlib.Path({started!r}).write_text("a module fixture ran")


def test_runs_kubectl(cluster):
    pass
"""


def run_probe(
    tmp_path: Path, ci: str | None, kubectl: str | None = None
) -> tuple[subprocess.CompletedProcess[str], bool]:
    """The child's outcome and whether its module fixture ran; its PATH holds ``kubectl`` or nothing."""
    started = tmp_path / "started"
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE.format(started=str(started)))
    path = tmp_path / "bin"
    path.mkdir()
    if kubectl is not None:
        (path / "kubectl").symlink_to(kubectl)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PATH=str(path), PYTHONPATH=str(ROOT))
    if ci is not None:
        env["CI"] = ci
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "-c", os.devnull, "--rootdir", str(tmp_path), str(probe)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return run, started.exists()


@pytest.mark.parametrize("ci", [None, "false"])
def test_a_developer_machine_without_kubectl_skips(tmp_path: Path, ci: str | None) -> None:
    run, started = run_probe(tmp_path, ci)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout and "kubectl is not installed" in run.stdout, run.stdout
    assert not started, "a module fixture ran before the skip"


def test_ci_without_kubectl_fails_saying_so(tmp_path: Path) -> None:
    run, started = run_probe(tmp_path, "true")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 error" in run.stdout, run.stdout
    assert "kubectl is not on PATH but CI=true: the CI image must provide kubectl 1.32" in run.stdout
    assert not started, "a module fixture ran before the failure"


def test_with_kubectl_the_test_runs(tmp_path: Path, kubectl_binary: str) -> None:
    run, started = run_probe(tmp_path, "true", kubectl_binary)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    assert started
