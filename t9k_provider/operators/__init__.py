"""Operators for T9k Jobs. Importing this package is cheap: no Kubernetes client, no job models."""

from __future__ import annotations

from t9k_provider.operators.job import T9kJobFailed, T9kJobOperator, T9kJobTimeout
from t9k_provider.operators.kinds import (
    BeamJobOperator,
    ColossalAIJobOperator,
    DeepSpeedJobOperator,
    GenericJobOperator,
    MPIJobOperator,
    PyTorchTrainingJobOperator,
    TensorFlowTrainingJobOperator,
    XGBoostTrainingJobOperator,
)

__all__ = [
    "BeamJobOperator",
    "ColossalAIJobOperator",
    "DeepSpeedJobOperator",
    "GenericJobOperator",
    "MPIJobOperator",
    "PyTorchTrainingJobOperator",
    "T9kJobFailed",
    "T9kJobOperator",
    "T9kJobTimeout",
    "TensorFlowTrainingJobOperator",
    "XGBoostTrainingJobOperator",
]
