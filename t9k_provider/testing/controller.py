"""The T9k controller as a child process (``python -m t9k_provider.controller``), with its metrics and
health endpoints on loopback: for tests that kill, restart or run several controllers, and for benchmarks
that read its counters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from t9k_provider.testing.polling import wait_for
from t9k_provider.testing.ports import free_port

#: Samples by (name, labels).
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class ControllerProcess:
    """The controller against ``kubeconfig``, its output appended to ``log_file``; ``extra``: more flags.

    As a context manager it starts, waits until ready and stops at the end."""

    def __init__(self, kubeconfig: Path, log_file: Path, *extra: str) -> None:
        self.kubeconfig = kubeconfig
        self.log_file = log_file
        self.extra = list(extra)
        self.metrics_port = 0
        self.health_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def start(self) -> ControllerProcess:
        assert not self.running(), "already running"
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

    def wait_ready(self, timeout: float = 30) -> ControllerProcess:
        def ready() -> bool:
            if not self.running():
                raise RuntimeError(f"the controller exited; log tail:\n{self.log_tail()}")
            return self.ready()

        wait_for("controller /readyz", ready, timeout)
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(10)

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM, SIGKILL after ``timeout``; the exit code (None if never started)."""
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

    def _get(self, port: int, path: str, timeout: float) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def ready(self) -> bool:
        return self._get(self.health_port, "/readyz", 2)[0] == 200

    def live(self) -> tuple[int, str]:
        return self._get(self.health_port, "/healthz", 2)

    def metrics(self, timeout: float = 5) -> Samples:
        """The /metrics samples; empty while the endpoint does not answer (a busy controller holding tens of
        thousands of objects may answer late: give it a longer ``timeout``)."""
        from prometheus_client.parser import text_string_to_metric_families

        status, text = self._get(self.metrics_port, "/metrics", timeout)
        if status != 200:
            return {}
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def metric_sum(self, name: str, **labels: str) -> float:
        return metric_sum(self.metrics(), name, **labels)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> ControllerProcess:
        return self.start().wait_ready(60)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def metric_sum(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(value for (sample, got), value in samples.items() if sample == name and wanted <= got)
