"""``t9k-local up/status/down`` as a user runs them (console script in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from t9k_provider.local.state import StateDir, default_state_dir
from tests.support.builders import make_container, make_job, make_template


def t9k_local(
    *args: str, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "t9k_provider.local.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def state_dir(tmp_path: Path):
    path = tmp_path / "home"
    yield path
    t9k_local("down", "--state-dir", str(path))


def test_up_status_down_and_double_start(state_dir: Path) -> None:
    up = t9k_local("up", "--state-dir", str(state_dir), "--no-controller", "--no-node-agents")
    assert up.returncode == 0, up.stderr
    kubeconfig = Path(up.stdout.strip())
    assert kubeconfig == state_dir / "kubeconfig"
    config = yaml.safe_load(kubeconfig.read_text())
    assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
    assert config["users"][0]["user"]["token"]
    assert state_dir.stat().st_mode & 0o777 == 0o700 and kubeconfig.stat().st_mode & 0o777 == 0o600

    status = t9k_local("status", "--state-dir", str(state_dir))
    assert status.returncode == 0 and "running" in status.stdout and "ready:      yes" in status.stdout

    again = t9k_local("up", "--state-dir", str(state_dir), "--no-controller", "--no-node-agents")
    assert again.returncode == 1 and "already running" in again.stderr

    run_again = t9k_local("run", "--state-dir", str(state_dir), "--no-controller", "--no-node-agents")
    assert run_again.returncode == 1 and "already running" in run_again.stderr

    down = t9k_local("down", "--state-dir", str(state_dir))
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not (state_dir / "server.pid").exists()
    assert t9k_local("status", "--state-dir", str(state_dir)).returncode == 1


def test_up_after_a_crash_cleans_the_stale_pid_file_and_keeps_the_port(state_dir: Path) -> None:
    up = t9k_local("up", "--state-dir", str(state_dir), "--no-controller", "--no-node-agents")
    assert up.returncode == 0, up.stderr
    state = StateDir(state_dir)
    pid, port = state.read_pid_file()
    assert pid and port
    os.kill(pid, 9)
    for _ in range(100):
        if state.running() is None:
            break
        time.sleep(0.05)
    assert state.pid_file.exists()
    up = t9k_local("up", "--state-dir", str(state_dir), "--no-controller", "--no-node-agents")
    assert up.returncode == 0, up.stderr
    new_pid, new_port = state.read_pid_file()
    assert new_pid != pid and new_port == port


@pytest.mark.usefixtures("kubectl_binary")
def test_fresh_cluster_is_ready_for_t9k_jobs(state_dir: Path, tmp_path: Path) -> None:
    up = t9k_local("up", "--state-dir", str(state_dir), "--no-controller", "--no-node-agents")
    assert up.returncode == 0, up.stderr
    job = tmp_path / "job.yaml"
    worker = {"type": "worker", "replicas": 1, "template": make_template(make_container("w", py="print(1)"))}
    job.write_text(yaml.safe_dump(make_job("GenericJob", "demo", {"replicaSpecs": [worker]})))
    kubectl = [
        "kubectl",
        "--kubeconfig",
        str(state_dir / "kubeconfig"),
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    applied = subprocess.run(
        [*kubectl, "apply", "-f", str(job), "--validate=false"], capture_output=True, text=True, timeout=60
    )
    assert applied.returncode == 0, applied.stderr
    got = subprocess.run(
        [*kubectl, "get", "genericjobs", "demo", "-o", "jsonpath={.metadata.name}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.stdout == "demo", got.stderr


def test_default_state_dir_honours_t9k_local_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("T9K_LOCAL_HOME", str(tmp_path / "elsewhere"))
    assert default_state_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("T9K_LOCAL_HOME")
    assert default_state_dir() == Path.home() / ".t9k-local"
