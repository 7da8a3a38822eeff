"""One compiler per kind, from the typed job (`t9k_provider.jobs`) to the engine's `Plan`.

BeamJob has no replicas: it is reconciled by `kinds.beam` on its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from t9k_provider.controller.engine.jobrun import JobRun
from t9k_provider.controller.engine.model import Plan
from t9k_provider.controller.engine.types import Decision
from t9k_provider.jobs import (
    BeamJob,
    ColossalAIJob,
    DeepSpeedJob,
    GenericJob,
    MPIJob,
    PyTorchTrainingJob,
    T9kJob,
    TensorFlowTrainingJob,
    XGBoostTrainingJob,
)

from .beam import reconcile_beam
from .colossalai import compile_colossalai
from .deepspeed import compile_deepspeed
from .generic import compile_generic
from .mpi import compile_mpi
from .pytorch import compile_pytorch
from .ssh import Keygen
from .tensorflow import compile_tensorflow
from .xgboost import compile_xgboost


def compile_plan(typed: T9kJob, job: dict[str, Any], ssh_keygen: Keygen | None) -> Plan:
    """The Plan of a replica kind; raises SpecError for specs the controller cannot satisfy."""
    if isinstance(typed, GenericJob):
        return compile_generic(typed, job["metadata"]["name"])
    if isinstance(typed, PyTorchTrainingJob):
        return compile_pytorch(typed, job)
    if isinstance(typed, TensorFlowTrainingJob):
        return compile_tensorflow(typed, job)
    if isinstance(typed, XGBoostTrainingJob):
        return compile_xgboost(typed, job)
    if isinstance(typed, MPIJob):
        return compile_mpi(typed, job, ssh_keygen)
    if isinstance(typed, ColossalAIJob):
        return compile_colossalai(typed, job, ssh_keygen)
    if isinstance(typed, DeepSpeedJob):
        return compile_deepspeed(typed, job, ssh_keygen)
    raise TypeError(f"no compiler for {type(typed).__name__}")


def decide(
    typed: T9kJob,
    job: dict[str, Any],
    children: list[dict[str, Any]],
    now: datetime,
    ssh_keygen: Keygen | None,
) -> Decision:
    if isinstance(typed, BeamJob):
        return reconcile_beam(typed, job, children, now)
    return JobRun(job, compile_plan(typed, job, ssh_keygen), children, now).decide()
