"""One operator per T9k Job kind: the same behaviour as ``T9kJobOperator``, restricted to that kind.

A manifest of another kind fails before any API call, so a DAG reads as what it runs.
"""

from __future__ import annotations

from t9k_provider.operators.job import T9kJobOperator


class GenericJobOperator(T9kJobOperator):
    job_kind = "GenericJob"


class PyTorchTrainingJobOperator(T9kJobOperator):
    job_kind = "PyTorchTrainingJob"


class TensorFlowTrainingJobOperator(T9kJobOperator):
    job_kind = "TensorFlowTrainingJob"


class XGBoostTrainingJobOperator(T9kJobOperator):
    job_kind = "XGBoostTrainingJob"


class ColossalAIJobOperator(T9kJobOperator):
    job_kind = "ColossalAIJob"


class DeepSpeedJobOperator(T9kJobOperator):
    job_kind = "DeepSpeedJob"


class MPIJobOperator(T9kJobOperator):
    job_kind = "MPIJob"


class BeamJobOperator(T9kJobOperator):
    job_kind = "BeamJob"
