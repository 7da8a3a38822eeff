"""The T9k controller as a child process: its /metrics counters, CPU time and memory."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import TracebackType

from prometheus_client.parser import text_string_to_metric_families

from benchmarks import procstat
from benchmarks.api import wait_until

PREFIX = "t9k_controller"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Controller:
    """``python -m t9k_provider.controller`` against ``kubeconfig``; metrics and health on loopback."""

    def __init__(self, kubeconfig: Path, log_file: Path) -> None:
        self.kubeconfig = kubeconfig
        self.log_file = log_file
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60) -> Controller:
        argv = [
            sys.executable, "-m", "t9k_provider.controller",
            "--kubeconfig", str(self.kubeconfig),
            "--metrics-port", str(self.metrics_port),
            "--health-port", str(self.health_port),
            "--log-format", "text", "--log-level", "warning",
        ]  # fmt: skip
        with open(self.log_file, "ab") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        wait_until(self._ready, timeout, "controller /readyz", interval=0.1)
        return self

    def _get(self, port: int, path: str, timeout: float = 5) -> tuple[int, str]:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"controller exited; log tail:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as resp:
                return resp.status, resp.read().decode()
        except OSError:
            return 0, ""

    def _ready(self) -> bool:
        return self._get(self.health_port, "/readyz")[0] == 200

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        # Generous: with tens of thousands of objects a busy controller's loop can answer late.
        status, text = self._get(self.metrics_port, "/metrics", timeout=60)
        if status != 200:
            raise RuntimeError(f"controller /metrics answered {status}")
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def cpu_seconds(self) -> float:
        return procstat.cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return procstat.rss_bytes(self.pid)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> Controller:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def metric_sum(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and wanted <= lab)


def delta(
    after: dict[tuple[str, frozenset[tuple[str, str]]], float],
    before: dict[tuple[str, frozenset[tuple[str, str]]], float],
    name: str,
    **labels: str,
) -> float:
    return metric_sum(after, name, **labels) - metric_sum(before, name, **labels)


def reconciles(samples: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> float:
    return metric_sum(samples, f"{PREFIX}_reconcile_total")
