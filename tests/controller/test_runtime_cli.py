"""The t9k-controller command line: flags, validation, structured logs, configuration errors."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from t9k_provider.controller.cli import build_parser
from t9k_provider.controller.runtime import log_format


def test_defaults_are_safe_for_a_single_local_controller() -> None:
    args = build_parser().parse_args([])
    assert args.namespace == [] and args.workers == 16
    assert args.leader_elect is False
    assert args.metrics_port == 0 and args.health_port == 0 and args.bind_address == "127.0.0.1"
    assert args.log_format == "json"


def test_repeatable_namespaces_and_leader_flags() -> None:
    args = build_parser().parse_args(
        ["--namespace", "a", "--namespace", "b", "--leader-elect", "--lease-name", "x", "--workers", "2"]
    )
    assert args.namespace == ["a", "b"] and args.leader_elect and args.lease_name == "x" and args.workers == 2
    assert build_parser().parse_args(["--leader-elect", "--no-leader-elect"]).leader_elect is False


@pytest.mark.parametrize(
    "argv",
    [["--workers", "0"], ["--metrics-port", "70000"], ["--log-format", "xml"], ["--health-port", "-1"]],
)
def test_bad_flags_are_rejected(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert argv[0] in capsys.readouterr().err


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t9k_provider.controller", *argv], capture_output=True, text=True, timeout=60
    )


def test_inconsistent_lease_timing_is_a_usage_error() -> None:
    result = run_cli("--leader-elect", "--lease-duration", "5", "--renew-deadline", "6")
    assert result.returncode == 2
    assert "--renew-deadline" in result.stderr


def test_unreadable_kubeconfig_exits_2_with_a_message(tmp_path: Path) -> None:
    result = run_cli("--kubeconfig", str(tmp_path / "missing"), "--log-format", "text")
    assert result.returncode == 2
    assert "cannot load the cluster configuration" in result.stderr


def test_json_logs_are_one_object_per_line_with_context(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        log_format.configure("json", "info")
        logging.getLogger("t9k.test").info("reconciled %s", "x", extra={"job": "ns/j", "kind": "GenericJob"})
        logging.getLogger("t9k.test").debug("hidden")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["msg"] == "reconciled x" and entry["level"] == "info" and entry["logger"] == "t9k.test"
    assert entry["job"] == "ns/j" and entry["kind"] == "GenericJob" and entry["ts"].endswith("+00:00")
