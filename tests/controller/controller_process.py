"""Test helper: the controller as a real child process, with its metrics and health on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from polling import wait_for
from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ControllerProcess:
    """``python -m t9k_provider.controller`` against a kubeconfig, with metrics and health on loopback."""

    def __init__(self, kubeconfig: Path, log_file: Path, *extra: str) -> None:
        self.kubeconfig = kubeconfig
        self.log_file = log_file
        self.extra = list(extra)
        self.metrics_port = 0
        self.health_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> ControllerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.metrics_port, self.health_port = free_port(), free_port()
        argv = [
            sys.executable, "-m", "t9k_provider.controller",
            "--kubeconfig", str(self.kubeconfig),
            "--metrics-port", str(self.metrics_port),
            "--health-port", str(self.health_port),
            "--log-format", "text",
            *self.extra,
        ]  # fmt: skip
        with open(self.log_file, "ab") as out:
            out.write(f"==== start {self.starts} ====\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        self.starts += 1
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(10)

    def stop(self, timeout: float = 20) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def _get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def ready(self) -> bool:
        return self._get(self.health_port, "/readyz")[0] == 200

    def live(self) -> tuple[int, str]:
        return self._get(self.health_port, "/healthz")

    def wait_ready(self, timeout: float = 30) -> ControllerProcess:
        def check() -> bool:
            if not self.running():
                raise AssertionError(f"controller exited: {self.log_tail()}")
            return self.ready()

        wait_for("controller /readyz", check, timeout)
        return self

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Samples by (name, sorted labels); empty when the endpoint is not up."""
        status, text = self._get(self.metrics_port, "/metrics")
        if status != 200:
            return {}
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def metric_sum(self, name: str, **labels: str) -> float:
        return sum(
            value
            for (sample, sample_labels), value in self.metrics().items()
            if sample == name and all((k, v) in sample_labels for k, v in labels.items())
        )

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
