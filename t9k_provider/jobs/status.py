"""Status written by the controller: the common shape and BeamJob's own."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from t9k_provider.jobs.basemodel import StatusModel
from t9k_provider.jobs.contract import (
    DISRUPTIONS_KEPT,
    OLD_CONDITION_TYPES,
    BeamJobPhase,
    DisruptionAction,
    JobPhase,
    ReplicaPhase,
)

ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(StatusModel):
    type: str = Field(min_length=1)
    status: ConditionStatus
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    last_update_time: str | None = None

    @field_validator("type")
    @classmethod
    def _canonical_type(cls, value: str) -> str:
        return OLD_CONDITION_TYPES.get(value, value)


class ContainerStatus(StatusModel):
    name: str
    state: str | None = None
    exit_code: int | None = None


class ReplicaStatus(StatusModel):
    """One replica (pod) of a type; `restartCount` counts controller recreations of it."""

    name: str
    uid: str | None = None
    phase: ReplicaPhase | None = None
    restart_count: int | None = Field(None, ge=0)
    containers: list[ContainerStatus] | None = None
    # uid of the pod the controller is replacing: a failure is counted once however often it is observed.
    replaced_uid: str | None = None
    # The node the replica's pod was placed on (this project's extension): a pod deleted outright still
    # names its node in the disruption it causes.
    node_name: str | None = None


class TaskStatus(StatusModel):
    """All replicas of one type; `restartCount` is their sum."""

    # Older docs call the replica list `status` (examples) or `replicaStatus` (API reference).
    RENAMED: ClassVar[dict[str, str]] = {"status": "replicas", "replicaStatus": "replicas"}

    type: str
    restart_count: int | None = Field(None, ge=0)
    replicas: list[ReplicaStatus] | None = None


class Aggregate(StatusModel):
    """Number of replicas in each phase."""

    creating: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    deleted: int = 0


class Disruption(StatusModel):
    """A replica lost to something outside its program: an extension (docs/controller.md#disruptions)."""

    # An eviction, a preemption, its node's loss or shutdown, a deletion from outside, as the pod's own
    # Kubernetes signals said it.

    replica_type: str
    replica_index: int = Field(ge=0)
    pod: str
    uid: str | None = None
    node: str | None = None
    # The DisruptionTarget condition's reason (EvictionByEvictionAPI, PreemptionByScheduler,
    # DeletionByTaintManager, TerminationByKubelet), else the pod's (Evicted, Shutdown...), NoExitCode or
    # DeletedFromOutside.
    reason: str
    message: str | None = None
    time: str | None = None
    action: DisruptionAction
    # RestartJob: the job's restart (`restarts`) it caused or was part of.
    restart: int | None = Field(None, ge=0)


class ObjectReference(StatusModel):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None


class DependentStatus(StatusModel):
    """Readiness of a dependent object such as the job's TensorBoard."""

    dependent: ObjectReference | None = None
    ready: bool | None = None
    reason: str | None = None
    action: str | None = None
    note: str | None = None
    type: Literal["Normal", "Warning"] | None = None


class _KindStatus(StatusModel):
    """What the status of every kind has."""

    conditions: list[Condition] | None = None
    start_time: str | None = None
    completion_time: str | None = None
    observed_generation: int | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions or [] if c.type == type_), None)


class JobStatus(_KindStatus):
    """Common status of every kind except BeamJob."""

    phase: JobPhase | None = None
    tasks: list[TaskStatus] | None = None
    aggregate: Aggregate | None = None
    backoff_count: int | None = Field(None, ge=0)
    tensorboard: DependentStatus | None = None
    # This project's extension (docs/controller.md#disruptions): how often the job restarted as a whole after
    # a disruption (JobSet's `restarts`), charged to no restart budget, and the latest disruptions.
    restarts: int | None = Field(None, ge=0)
    disruptions: list[Disruption] | None = Field(None, max_length=DISRUPTIONS_KEPT)


class PodReference(StatusModel):
    name: str | None = None
    uid: str | None = None


class PodPhase(StatusModel):
    phase: str | None = None
    reference: PodReference | None = None


class FlinkClusterStatus(StatusModel):
    job_manager_status: list[PodPhase] | None = None
    task_manager_status: list[PodPhase] | None = None


class BeamJobStatus(_KindStatus):
    phase: BeamJobPhase | None = None
    job_url: str | None = Field(None, alias="jobURL")
    flink_cluster_status: FlinkClusterStatus | None = None
    job_status: list[PodPhase] | None = None
