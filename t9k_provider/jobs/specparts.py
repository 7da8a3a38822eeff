"""Spec parts shared by several kinds: replica specs, run policy, run mode, scheduler, elastic."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints, model_validator

from t9k_provider.jobs.basemodel import IntOrString, KubeObject, Model

RestartPolicyName = Literal["Never", "OnFailure", "Always"]
TrainingRestartPolicy = Literal["Never", "OnFailure", "Always", "ExitCode"]
CleanUpPolicy = Literal["All", "Unfinished", "None"]


class RestartPolicy(Model):
    """What to do when a replica fails, and how many times each replica may be restarted."""

    policy: RestartPolicyName = "OnFailure"
    limit: int = Field(0, ge=0, le=32767, description="Restarts allowed per replica (default 0).")


class ReplicaSpec(Model):
    """Replicas of one type, with a restart policy object (`{policy, limit}`)."""

    type: str = Field(min_length=1, description="Replica type; pods are named <job>-<type>-<rank>.")
    replicas: int = Field(1, ge=1)
    restart_policy: RestartPolicy = Field(default_factory=RestartPolicy)
    template: KubeObject = Field(
        default_factory=dict, description="PodTemplateSpec; its restartPolicy is Never."
    )


class TrainingReplicaSpec(Model):
    """Replicas of one type; restarts are limited job-wide by `runPolicy.backoffLimit`."""

    type: str = Field(min_length=1)
    replicas: int = Field(1, ge=1)
    restart_policy: TrainingRestartPolicy = Field(
        "OnFailure", description="ExitCode restarts on exit codes 130, 137, 138 and 143 only."
    )
    template: KubeObject = Field(
        default_factory=dict, description="PodTemplateSpec; its restartPolicy is Never."
    )


class PyTorchReplicaSpec(TrainingReplicaSpec):
    """Replicas of one type; `scalingWeight` spreads elastic replicas across types."""

    scaling_weight: int | None = Field(None, ge=0)


class RunPolicy(Model):
    """Run policy of the TrainingJobs and DeepSpeedJob."""

    active_deadline_seconds: int | None = Field(
        None, ge=1, description="Fail the job this long after it started."
    )
    backoff_limit: int = Field(3, ge=0, description="Restarts allowed, shared by all replicas (default 3).")
    clean_up_policy: CleanUpPolicy = Field(
        "None", description="Replicas to delete once the job has finished."
    )


class WorkersRunPolicy(Model):
    """Run policy of MPIJob and ColossalAIJob: only whether workers are deleted after the end."""

    clean_up_workers: bool = Field(False, description="Delete the workers once finished; the launcher stays.")


class DebugReplicaSpec(Model):
    """How one replica type starts in debug mode."""

    type: str = Field(min_length=1)
    skip_init_container: bool = False
    command: list[str] | None = Field(None, description="Replaces the training container's command.")


class DebugMode(Model):
    RENAMED: ClassVar[dict[str, str]] = {"enable": "enabled"}

    enabled: bool = False
    replica_specs: list[DebugReplicaSpec] | None = None


#: The bounds of a resume spec keep the immutability rule below within a real API server's CEL cost budget
#: (a rule's estimated cost grows with the largest list and string the schema allows).
RESUME_TYPES, RESUME_ARGS, RESUME_ARG_LENGTH = 32, 64, 4096
ResumeArg = Annotated[str, StringConstraints(max_length=RESUME_ARG_LENGTH)]


class ResumeSpec(Model):
    """How one replica type restarts after pause; unset fields keep the template's values."""

    type: str = Field(min_length=1, max_length=63)
    skip_init_container: bool = False
    command: list[ResumeArg] | None = Field(None, max_length=RESUME_ARGS)
    args: list[ResumeArg] | None = Field(None, max_length=RESUME_ARGS)


class PauseMode(Model):
    RENAMED: ClassVar[dict[str, str]] = {"enable": "enabled"}

    enabled: bool = False
    # The seeds (01-genericjob.md, 暂停模式): pause.enabled may change at any time, resumeSpecs never. The CRD
    # says so as a transition rule, which the API server enforces (a 422 naming the field).
    resume_specs: list[ResumeSpec] | None = Field(
        None,
        max_length=RESUME_TYPES,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self == oldSelf",
                    "message": "resumeSpecs cannot be changed (only pause.enabled can): set them when the "
                    "job is created, or create a new job",
                }
            ]
        },
    )


class RunMode(Model):
    """Immediate when neither mode is enabled."""

    debug: DebugMode | None = None
    pause: PauseMode | None = None

    @property
    def debug_enabled(self) -> bool:
        return self.debug is not None and self.debug.enabled

    @property
    def pause_enabled(self) -> bool:
        return self.pause is not None and self.pause.enabled


class T9kScheduler(Model):
    # The DeepSpeedJob API reference spells the queue `Queue`.
    RENAMED: ClassVar[dict[str, str]] = {"Queue": "queue"}

    queue: str = Field(min_length=1)
    # 03-deepspeedjob-api.md, T9kScheduler: "range is [0,100]. Default 10." (the one seed that gives it; the
    # T9k Scheduler's PodGroup is the same for every kind).
    priority: int = Field(10, ge=0, le=100, description="PodGroup priority, 0..100 (default 10).")


class SchedulePolicy(Model):
    """Absent: the default kube-scheduler; `t9kScheduler`: a PodGroup in a T9k queue."""

    t9k_scheduler: T9kScheduler | None = Field(None, alias="t9kScheduler")


class ElasticConfig(Model):
    """Elastic scale range; `expectedReplicas` is clamped into [min, max] by the controller."""

    RENAMED: ClassVar[dict[str, str]] = {"enable": "enabled"}

    enabled: bool = False
    min_replicas: int | None = Field(None, ge=1)
    max_replicas: int | None = Field(None, ge=1)
    expected_replicas: int | None = Field(None, ge=1, description="Desired scale, clamped to [min, max].")

    @model_validator(mode="after")
    def _range(self) -> ElasticConfig:
        low, high = self.min_replicas, self.max_replicas
        if low is not None and high is not None and low > high:
            raise ValueError(f"minReplicas ({low}) is greater than maxReplicas ({high})")
        if self.enabled and (self.min_replicas is None or self.max_replicas is None):
            raise ValueError("elastic mode needs minReplicas and maxReplicas")
        return self


class PVCLogDir(Model):
    name: str = Field(min_length=1)
    sub_path: list[str] = Field(default_factory=list)


class LogDir(Model):
    """Where TensorBoard reads logs; S3 and HTTP sources are kept as written."""

    pvc: list[PVCLogDir] | None = None
    s3: KubeObject | None = None
    http: KubeObject | None = None


class TensorBoardSpec(Model):
    """TensorBoard created next to a PyTorch or TensorFlow job."""

    training_log_filesets: list[str] | None = None
    log_dir: LogDir | None = None
    image: str | None = None
    resources: KubeObject | None = None


class ServicePort(Model):
    """A port exposed by GenericJob's per-replica Services (corev1.ServicePort)."""

    name: str = Field(min_length=1)
    port: int = Field(ge=1, le=65535)
    target_port: IntOrString | None = None
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None
    app_protocol: str | None = None
    node_port: int | None = Field(None, ge=1, le=65535)


class ServiceOption(Model):
    ports: list[ServicePort] = Field(default_factory=list)
