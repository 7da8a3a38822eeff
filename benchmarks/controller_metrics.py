"""The controller the benchmarks measure (`t9k_provider.testing.ControllerProcess`, logging warnings only) and
the counters they read from its /metrics."""

from __future__ import annotations

from pathlib import Path

from t9k_provider.testing import ControllerProcess, metric_sum
from t9k_provider.testing.controller import Samples

PREFIX = "t9k_controller"
#: A busy controller holding tens of thousands of objects can answer /metrics late.
METRICS_TIMEOUT = 60.0


def controller_process(kubeconfig: Path, log_file: Path) -> ControllerProcess:
    return ControllerProcess(kubeconfig, log_file, "--log-level", "warning")


def metrics(proc: ControllerProcess) -> Samples:
    """The controller's samples; an error if it does not answer (a benchmark must not count from nothing)."""
    samples = proc.metrics(METRICS_TIMEOUT)
    if not samples:
        raise RuntimeError(f"the controller's /metrics did not answer; log tail:\n{proc.log_tail()}")
    return samples


def delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    return metric_sum(after, name, **labels) - metric_sum(before, name, **labels)


def reconciles(samples: Samples) -> float:
    return metric_sum(samples, f"{PREFIX}_reconcile_total")
