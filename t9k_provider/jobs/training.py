"""The TrainingJobs: PyTorch, TensorFlow and XGBoost (replica spec variant B)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from t9k_provider.jobs.basemodel import IntOrString, Model
from t9k_provider.jobs.contract import Leader
from t9k_provider.jobs.envelope import JobSpec, T9kJob
from t9k_provider.jobs.podtemplates import Issues, template_issues
from t9k_provider.jobs.replicachecks import (
    allowed_type_issues,
    duplicate_type_issues,
    run_mode_issues,
    type_name_issues,
)
from t9k_provider.jobs.specparts import (
    ElasticConfig,
    PyTorchReplicaSpec,
    RunMode,
    RunPolicy,
    SchedulePolicy,
    TensorBoardSpec,
    TrainingReplicaSpec,
)


class TorchrunConfig(Model):
    """Launch every replica through `torchrun` instead of the container command."""

    RENAMED: ClassVar[dict[str, str]] = {"enable": "enabled"}

    enabled: bool = False
    max_restarts: int | None = Field(None, ge=0)
    proc_per_node: IntOrString | None = Field(
        None, description='Processes per replica: a number, or "gpu" for the GPU count.'
    )
    rdzv_backend: Literal["c10d", "etcd", "etcd-v2"] = "c10d"
    extra_options: list[str] = Field(default_factory=list)
    min_nodes: int | None = Field(None, ge=1)

    @field_validator("proc_per_node")
    @classmethod
    def _proc_per_node(cls, value: int | str | None) -> int | str | None:
        if value is None or value == "gpu":
            return value
        if (isinstance(value, int) and value >= 1) or (
            isinstance(value, str) and value.isdigit() and int(value) >= 1
        ):
            return value
        raise ValueError(f'must be a positive number or "gpu", got {value!r}')


class _TrainingSpec(JobSpec):
    """Fields every TrainingJob has."""

    KIND: ClassVar[str]
    # Replica types the kind allows (None: free-form) and the container each replica must have.
    TYPES: ClassVar[tuple[str, ...] | None] = None
    CONTAINER: ClassVar[str | None] = None

    replica_specs: list[TrainingReplicaSpec] = Field(min_length=1)
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    run_mode: RunMode | None = None
    scheduler: SchedulePolicy | None = None

    def replica_counts(self) -> dict[str, int]:
        return {r.type: r.replicas for r in self.replica_specs}

    def issues(self) -> Issues:
        types = [r.type for r in self.replica_specs]
        issues = duplicate_type_issues(types, "replicaSpecs")
        if self.TYPES is not None:
            issues += allowed_type_issues(types, self.TYPES, "replicaSpecs", self.KIND)
        else:
            issues += type_name_issues(types, "replicaSpecs")
        for i, replica in enumerate(self.replica_specs):
            issues += template_issues(
                replica.template, f"replicaSpecs[{i}].template", self.KIND, self.CONTAINER
            )
        return issues + run_mode_issues(self.run_mode, types)


class PyTorchTrainingJobSpec(_TrainingSpec):
    KIND: ClassVar[str] = "PyTorchTrainingJob"

    replica_specs: list[PyTorchReplicaSpec] = Field(min_length=1)
    torchrun_config: TorchrunConfig | None = None
    elastic: ElasticConfig | None = None
    tensorboard_spec: TensorBoardSpec | None = None

    def replica_counts(self) -> dict[str, int]:
        counts = super().replica_counts()
        if self.elastic is not None and self.elastic.enabled and self.elastic.max_replicas:
            # Elastic scale-up may create up to maxReplicas replicas of any type.
            counts = {t: max(n, self.elastic.max_replicas) for t, n in counts.items()}
        return counts

    def issues(self) -> Issues:
        issues = super().issues()
        elastic = self.elastic is not None and self.elastic.enabled
        if elastic and (self.torchrun_config is None or not self.torchrun_config.enabled):
            issues.append(("elastic.enabled", "elastic training needs torchrunConfig.enabled: true"))
        return issues


class TensorFlowTrainingJobSpec(_TrainingSpec):
    KIND: ClassVar[str] = "TensorFlowTrainingJob"
    TYPES: ClassVar[tuple[str, ...] | None] = ("chief", "worker", "ps", "evaluator")
    CONTAINER: ClassVar[str | None] = "tensorflow"

    tensorboard_spec: TensorBoardSpec | None = None

    def issues(self) -> Issues:
        issues = super().issues()
        for i, replica in enumerate(self.replica_specs):
            if replica.type == "chief" and replica.replicas != 1:
                issues.append((f"replicaSpecs[{i}].replicas", "a TensorFlow chief has exactly 1 replica"))
        return issues


class XGBoostTrainingJobSpec(_TrainingSpec):
    KIND: ClassVar[str] = "XGBoostTrainingJob"
    TYPES: ClassVar[tuple[str, ...] | None] = ("master", "worker")
    CONTAINER: ClassVar[str | None] = "xgboost"

    def issues(self) -> Issues:
        issues = super().issues()
        masters = [i for i, r in enumerate(self.replica_specs) if r.type == "master"]
        if not masters:
            issues.append(("replicaSpecs", "XGBoostTrainingJob needs a replica spec of type master"))
        for i in masters:
            if self.replica_specs[i].replicas != 1:
                issues.append((f"replicaSpecs[{i}].replicas", "the XGBoost master has exactly 1 replica"))
        return issues


class PyTorchTrainingJob(T9kJob):
    """PyTorchTrainingJob runs PyTorch distributed training, optionally through torchrun."""

    KIND: ClassVar[str] = "PyTorchTrainingJob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("pj",)
    LEADER: ClassVar[Leader] = Leader(preferred=("master",))

    spec: PyTorchTrainingJobSpec


class TensorFlowTrainingJob(T9kJob):
    """TensorFlowTrainingJob runs TensorFlow distributed training (chief, worker, ps, evaluator)."""

    KIND: ClassVar[str] = "TensorFlowTrainingJob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("tj",)
    LEADER: ClassVar[Leader] = Leader(preferred=("chief", "worker"))

    spec: TensorFlowTrainingJobSpec


class XGBoostTrainingJob(T9kJob):
    """XGBoostTrainingJob runs distributed XGBoost training (one master, workers)."""

    KIND: ClassVar[str] = "XGBoostTrainingJob"
    # Not shown in the T9k docs; `xgbj` follows the pattern of `pj`/`tj` without clashing.
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("xgbj",)
    LEADER: ClassVar[Leader] = Leader(preferred=("master",))

    spec: XGBoostTrainingJobSpec
