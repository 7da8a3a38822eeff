"""One compiler per kind, from the typed job (`t9k_provider.jobs`) to the engine's `Plan`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from t9k_provider.controller.engine.jobrun import JobRun
from t9k_provider.controller.engine.model import Plan
from t9k_provider.controller.engine.types import Decision
from t9k_provider.jobs import (
    GenericJob,
    PyTorchTrainingJob,
    T9kJob,
    TensorFlowTrainingJob,
    XGBoostTrainingJob,
)

from .generic import compile_generic
from .pytorch import compile_pytorch
from .tensorflow import compile_tensorflow
from .xgboost import compile_xgboost

Keygen = Callable[[], tuple[str, str]]


def compile_job(typed: T9kJob, manifest: dict[str, Any], ssh_keygen: Keygen | None) -> Plan:
    if isinstance(typed, GenericJob):
        return compile_generic(typed, manifest["metadata"]["name"])
    if isinstance(typed, PyTorchTrainingJob):
        return compile_pytorch(typed, manifest)
    if isinstance(typed, TensorFlowTrainingJob):
        return compile_tensorflow(typed, manifest)
    if isinstance(typed, XGBoostTrainingJob):
        return compile_xgboost(typed, manifest)
    raise NotImplementedError(typed.KIND)


def run_compiled(
    job: dict[str, Any], compiled: Plan, children: list[dict[str, Any]], now: datetime
) -> Decision:
    return JobRun(job, compiled, children, now).decide()
