"""The T9k Job API (`batch.tensorstack.dev/v1beta1`): typed models, manifests and CRDs.

Imports nothing from Airflow: the controller and the local cluster use it on their own.
"""

from __future__ import annotations

from t9k_provider.jobs.beam import BeamJob, BeamJobSpec
from t9k_provider.jobs.colossalai import ColossalAIJob, ColossalAIJobSpec, NormalizedColossalAIJob
from t9k_provider.jobs.common import (
    DebugMode,
    ElasticConfig,
    PauseMode,
    ReplicaSpec,
    RestartPolicy,
    RunMode,
    RunPolicy,
    SchedulePolicy,
    T9kScheduler,
    TensorBoardSpec,
    TrainingReplicaSpec,
)
from t9k_provider.jobs.constants import API_VERSION, GROUP, RETRYABLE_EXIT_CODES, VERSION
from t9k_provider.jobs.deepspeed import DeepSpeedJob, DeepSpeedJobSpec
from t9k_provider.jobs.errors import ManifestError
from t9k_provider.jobs.generic import GenericJob, GenericJobSpec
from t9k_provider.jobs.job import JobSpec, T9kJob
from t9k_provider.jobs.manifest import KINDS, load
from t9k_provider.jobs.mpi import MPIJob, MPIJobSpec, NormalizedMPIJob
from t9k_provider.jobs.status import (
    Aggregate,
    BeamJobStatus,
    Condition,
    ContainerStatus,
    DependentStatus,
    JobStatus,
    ReplicaStatus,
    TaskStatus,
)
from t9k_provider.jobs.training import (
    PyTorchTrainingJob,
    PyTorchTrainingJobSpec,
    TensorFlowTrainingJob,
    TensorFlowTrainingJobSpec,
    XGBoostTrainingJob,
    XGBoostTrainingJobSpec,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "RETRYABLE_EXIT_CODES",
    "VERSION",
    "Aggregate",
    "BeamJob",
    "BeamJobSpec",
    "BeamJobStatus",
    "ColossalAIJob",
    "ColossalAIJobSpec",
    "Condition",
    "ContainerStatus",
    "DebugMode",
    "DeepSpeedJob",
    "DeepSpeedJobSpec",
    "DependentStatus",
    "ElasticConfig",
    "GenericJob",
    "GenericJobSpec",
    "JobSpec",
    "JobStatus",
    "MPIJob",
    "MPIJobSpec",
    "ManifestError",
    "NormalizedColossalAIJob",
    "NormalizedMPIJob",
    "PauseMode",
    "PyTorchTrainingJob",
    "PyTorchTrainingJobSpec",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunMode",
    "RunPolicy",
    "SchedulePolicy",
    "T9kJob",
    "T9kScheduler",
    "TaskStatus",
    "TensorBoardSpec",
    "TensorFlowTrainingJob",
    "TensorFlowTrainingJobSpec",
    "TrainingReplicaSpec",
    "XGBoostTrainingJob",
    "XGBoostTrainingJobSpec",
    "load",
]
