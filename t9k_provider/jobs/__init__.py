"""The T9k Job API (`batch.tensorstack.dev/v1beta1`): typed models, manifests and CRDs.

Imports nothing from Airflow: the controller and the local cluster use it on their own. The names below load
their module on first use, so importing `t9k_provider.jobs.contract` or `.constants` (the operators do, while
a DAG file is parsed) does not build the pydantic models.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULE_OF = {
    "API_VERSION": "constants",
    "GROUP": "constants",
    "RETRYABLE_EXIT_CODES": "constants",
    "VERSION": "constants",
    "KINDS": "loading",
    "load": "loading",
    "ManifestError": "errors",
    "JobSpec": "envelope",
    "T9kJob": "envelope",
    "GenericJob": "generic",
    "GenericJobSpec": "generic",
    "PyTorchTrainingJob": "training",
    "PyTorchTrainingJobSpec": "training",
    "TensorFlowTrainingJob": "training",
    "TensorFlowTrainingJobSpec": "training",
    "XGBoostTrainingJob": "training",
    "XGBoostTrainingJobSpec": "training",
    "MPIJob": "mpi",
    "MPIJobSpec": "mpi",
    "NormalizedMPIJob": "mpi",
    "ColossalAIJob": "colossalai",
    "ColossalAIJobSpec": "colossalai",
    "NormalizedColossalAIJob": "colossalai",
    "DeepSpeedJob": "deepspeed",
    "DeepSpeedJobSpec": "deepspeed",
    "BeamJob": "beam",
    "BeamJobSpec": "beam",
    "DebugMode": "specparts",
    "ElasticConfig": "specparts",
    "PauseMode": "specparts",
    "ReplicaSpec": "specparts",
    "RestartPolicy": "specparts",
    "RunMode": "specparts",
    "RunPolicy": "specparts",
    "SchedulePolicy": "specparts",
    "T9kScheduler": "specparts",
    "TensorBoardSpec": "specparts",
    "TrainingReplicaSpec": "specparts",
    "Aggregate": "status",
    "BeamJobStatus": "status",
    "Condition": "status",
    "ContainerStatus": "status",
    "DependentStatus": "status",
    "Disruption": "status",
    "JobStatus": "status",
    "ReplicaStatus": "status",
    "TaskStatus": "status",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})
