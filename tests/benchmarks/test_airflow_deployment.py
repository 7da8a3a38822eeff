"""The deployment harness's own parts that need no Airflow running: log lines, process groups, settings,
and the pipeline report (the deployment itself runs in tests/deployment)."""

from __future__ import annotations

import http.server
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from benchmarks.airflow_deployment import AirflowDeployment, ApiError, Component, LogLine
from benchmarks.pipeline_deployment import RunFigures, TaskFigures, report

pytestmark = pytest.mark.slow


def test_log_lines_keep_when_airflow_logged_them() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, 123000, tzinfo=timezone.utc)
    entry = {
        "timestamp": "2026-01-02T03:04:05.123000Z",
        "event": "[job-worker-0/main] epoch 1/10",
        "level": "info",
    }
    assert LogLine.from_entry(entry) == LogLine(at, "[job-worker-0/main] epoch 1/10")
    text = "[2026-01-02T04:04:05.123+0100] {log_follower.py:74} INFO - [job-worker-0/main] epoch 1/10"
    assert LogLine.from_text(text) == LogLine(
        at, "{log_follower.py:74} INFO - [job-worker-0/main] epoch 1/10"
    )
    assert LogLine.from_text("  continued") == LogLine(None, "  continued")


def _group(pgid: int) -> list[int]:
    members = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(proc.name))
    return members


@pytest.mark.parametrize("how", ["stop", "crash"])
def test_a_component_ends_with_everything_it_spawned(tmp_path: Path, how: str) -> None:
    # The leader ignores SIGTERM, as a component stuck in shutdown would; its child is a worker it spawned.
    argv = ["sh", "-c", "trap '' TERM; sleep 60 & wait"]
    component = Component("stubborn", argv, tmp_path / "stubborn.log")
    component.start(dict(os.environ))
    pgid = component.pid
    deadline = time.monotonic() + 10
    while len(_group(pgid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_group(pgid)) == 2
    started = time.monotonic()
    if how == "stop":
        component.stop(deadline=time.monotonic() + 1)
    else:
        component.kill(signal.SIGKILL)
        component.stop()
    assert time.monotonic() - started < 10 and component.proc is None
    deadline = time.monotonic() + 5  # a SIGKILLed orphan is reaped by init asynchronously
    while _group(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group(pgid) == []


def test_a_component_whose_harness_dies_ends_with_everything_it_spawned(tmp_path: Path) -> None:
    """The harness SIGKILLed, as a killed test run is: its components' guards end their groups."""
    owner = f"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from benchmarks.airflow_deployment import Component
component = Component("orphan", ["sh", "-c", "sleep 60 & wait"], Path({str(tmp_path / "orphan.log")!r}))
component.start(dict(os.environ))
print(component.pid, component.guard.pid, flush=True)
sys.stdin.readline()
os.kill(os.getpid(), signal.SIGKILL)
"""
    harness = subprocess.Popen(
        [sys.executable, "-c", owner], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert harness.stdout is not None and harness.stdin is not None
    pgid, guard = (int(word) for word in harness.stdout.readline().split())
    deadline = time.monotonic() + 10
    while len(_group(pgid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_group(pgid)) == 2 and Path(f"/proc/{guard}").exists()
    harness.stdin.write("\n")
    harness.stdin.flush()
    assert harness.wait(10) == -signal.SIGKILL
    deadline = time.monotonic() + 15
    while (_group(pgid) or Path(f"/proc/{guard}").exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group(pgid) == [] and not Path(f"/proc/{guard}").exists()


def test_a_stopped_component_leaves_no_guard(tmp_path: Path) -> None:
    component = Component("stopped", ["sh", "-c", "sleep 60 & wait"], tmp_path / "stopped.log")
    component.start(dict(os.environ))
    guard = component.guard
    assert guard is not None and guard.poll() is None
    component.stop(deadline=time.monotonic() + 5)
    assert guard.returncode == 0 and component.guard is None


def test_the_callers_airflow_settings_stay_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
    monkeypatch.setenv("_AIRFLOW__SOMETHING_PRIVATE", "1")
    monkeypatch.setenv("AIRFLOW_HOME", "/elsewhere")
    deployment = AirflowDeployment(tmp_path / "home", tmp_path / "dags", tmp_path / "kubeconfig")
    env = deployment.env
    assert "AIRFLOW__CORE__UNIT_TEST_MODE" not in env and "_AIRFLOW__SOMETHING_PRIVATE" not in env
    assert env["AIRFLOW_HOME"] == str(tmp_path / "home")
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    module, _, name = env["AIRFLOW__CORE__HOSTNAME_CALLABLE"].rpartition(".")
    assert getattr(importlib.import_module(module), name)() == "127.0.0.1"
    ports = {
        env[key]
        for key in ("AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT", "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT")
    }
    assert len(ports | {str(deployment.port)}) == 3


def test_pipeline_report_counts_failed_tries_and_task_overhead() -> None:
    def run(seconds: float, prepare_tries: int, report_state: str = "success") -> RunFigures:
        tasks = [
            TaskFigures("prepare_data", "success", prepare_tries, 12.0, 1.0),
            TaskFigures("report", report_state, 1, 3.0, None),
        ]
        return RunFigures("r", "success", seconds, tasks, [0.5])

    runs = [run(90.0, 3), run(100.0, 1), run(110.0, 1, report_state="failed")]
    assert [r.failed_tries for r in runs] == [2, 0, 1]
    text = report(runs, datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert "median 100.0 s, min 90.0 s, max 110.0 s; failed tries in all: 3." in text
    assert "| prepare_data | 12.0, 12.0, 12.0 | 1.0, 1.0, 1.0 | 11.0 |" in text
    assert "| report | 3.0, 3.0, 3.0 | -, -, - | - |" in text


class Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 500 ("database is locked") to the first ``failures`` requests, then 200 ``{"ok": true}``."""

    failures = 0
    seen: list[str] = []

    def _answer(self) -> None:
        Flaky.seen.append(self.command)
        failing = len(Flaky.seen) <= Flaky.failures
        body = b'{"detail": "database is locked"}' if failing else b'{"ok": true}'
        self.send_response(500 if failing else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("method", "failures", "answered"), [("GET", 2, True), ("GET", 9, False), ("POST", 1, False)]
)
def test_a_rest_read_answered_5xx_is_tried_again_a_write_never(
    method: str, failures: int, answered: bool
) -> None:
    Flaky.failures, Flaky.seen = failures, []
    server = http.server.HTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    harness = AirflowDeployment.__new__(AirflowDeployment)
    harness.api = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        if answered:
            assert harness.request(method, "/dags") == {"ok": True}
            assert Flaky.seen == [method] * (failures + 1)
        else:
            with pytest.raises(ApiError, match="HTTP 500"):
                harness.request(method, "/dags", body={} if method == "POST" else None)
            assert Flaky.seen == [method] * (4 if method == "GET" else 1)
    finally:
        server.shutdown()
        server.server_close()
