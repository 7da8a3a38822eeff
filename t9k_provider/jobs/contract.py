"""What the controller writes and the Airflow side reads: child labels and names, phases, condition types.

Both sides import these; nothing outside `t9k_provider.jobs` spells them again (tests/jobs/test_contract.py).
Standard library only, so the operators can import it while a DAG file is parsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, get_args

# Labels the controller puts on every child (docs/controller.md, "Children, names and labels").
LABEL_OWNER_NAME = "tensorstack.dev/owner-name"
LABEL_COMPONENT = "tensorstack.dev/component"
LABEL_COMPONENT_TYPE = "tensorstack.dev/component-type"
LABEL_JOB_UID = "batch.tensorstack.dev/job-uid"
# Pods and their Services: the replica a pod is (the controller never parses pod names).
LABEL_REPLICA_TYPE = "batch.tensorstack.dev/replica-type"
LABEL_REPLICA_INDEX = "batch.tensorstack.dev/replica-index"
# GenericJob pods also carry the T9k GenericJob labels: the job's name and the pod's own.
LABEL_GENERICJOB = "genericjob"
LABEL_GENERICJOB_REPLICA = "genericjob-replica"
ANNOTATION_RESTART_COUNT = "batch.tensorstack.dev/restart-count"
# On the pods of a job that restarts as a whole after a disruption: the job's restart (`status.restarts`) the
# pod belongs to; a pod of an earlier one is deleted (docs/controller.md#disruptions).
ANNOTATION_JOB_RESTARTS = "batch.tensorstack.dev/job-restarts"
# With `spec.scheduler.t9kScheduler`: the PodGroup a pod belongs to, its queue and its replica type.
LABEL_GROUP_NAME = "scheduler.tensorstack.dev/group-name"
LABEL_QUEUE = "scheduler.tensorstack.dev/queue"
LABEL_ROLE = "scheduler.tensorstack.dev/role"
T9K_SCHEDULER_NAME = "t9k-scheduler"
# BeamJob's submit pods come from its batch/v1 Job (`batch_job_name`), labelled by the Job controller.
LABEL_BATCH_JOB_NAME = "batch.kubernetes.io/job-name"

BATCH_JOB_SUFFIX = "batchjob"
#: Where a T9k Job names its T9k Scheduler Queue.
QUEUE_FIELD = "spec.scheduler.t9kScheduler.queue"


def job_queue(job: dict[str, Any]) -> str | None:
    """The Queue a T9k Job names (the DeepSpeedJob reference spells it ``Queue``); None: no T9k Scheduler.

    Read from the raw object, whose parts may be of any type: the API server asks before validating it."""
    t9k: Any = job
    for key in ("spec", "scheduler", "t9kScheduler"):
        t9k = t9k.get(key) if isinstance(t9k, dict) else None
    if not isinstance(t9k, dict):
        return None
    name = t9k.get("queue", t9k.get("Queue"))
    return str(name) if name else None


def batch_job_name(job_name: str) -> str:
    """The batch/v1 Job that submits a BeamJob's pipeline."""
    return f"{job_name}-{BATCH_JOB_SUFFIX}"


#: Pod failure reasons set by the node or the control plane, not by the user's program: a pod that failed with
#: one (or with no exit code, or marked `DisruptionTarget`) was disrupted, for the controller (no budget is
#: charged) and for the provider (an infrastructure ending, retried).
INFRASTRUCTURE_REASONS = frozenset(
    {
        "Evicted",
        "Shutdown",
        "Terminated",
        "NodeShutdown",
        "NodeLost",
        "DeadlineExceeded",
        "UnexpectedAdmissionError",
        "OutOfcpu",
        "OutOfmemory",
        "OutOfpods",
        "Preempting",
    }
)
#: How many `status.disruptions` entries the controller keeps (the latest).
DISRUPTIONS_KEPT = 20
#: What the controller did about a disruption: restart every replica, or recreate only the lost one.
DisruptionAction = Literal["RestartJob", "RecreateReplica"]
RESTART_JOB: DisruptionAction = "RestartJob"
RECREATE_REPLICA: DisruptionAction = "RecreateReplica"

JobPhase = Literal["Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown"]
BeamJobPhase = Literal["Initializing", "Running", "Succeeded", "Failed", "Unknown"]
ReplicaPhase = Literal["Creating", "Pending", "Running", "Succeeded", "Failed", "Unknown", "Deleted"]
REPLICA_PHASES: tuple[ReplicaPhase, ...] = get_args(ReplicaPhase)
TERMINAL_PHASES: tuple[JobPhase, ...] = ("Succeeded", "Failed")
#: A replica with a pod that has neither finished nor lost its node; a move between these is progress.
ACTIVE_REPLICA_PHASES: tuple[ReplicaPhase, ...] = ("Pending", "Running")
#: Before the job's replicas (BeamJob: its Flink cluster) run.
PENDING_PHASES: tuple[JobPhase | BeamJobPhase, ...] = ("Pending", "Initializing")

# Condition types of the replica kinds, in the order status lists them.
ConditionType = Literal["Initialized", "Running", "ReplicaFailure", "Completed", "Failed", "Paused"]
CONDITION_TYPES: tuple[ConditionType, ...] = get_args(ConditionType)
BeamConditionType = Literal["ClusterRunning", "JobRunning", "Completed", "Failed"]
#: Spellings older controllers wrote, read as the current one.
OLD_CONDITION_TYPES: dict[str, ConditionType] = {"Initializing": "Initialized"}


# The key of a task's replica list in `status.tasks[]`: the guides write `status` (GenericJob, ColossalAIJob),
# the DeepSpeedJob API reference `replicaStatus`; controllers before 0.2 wrote `replicas`, still read.
TASK_REPLICAS_KEY = "status"
TASK_REPLICAS_KEYS: dict[str, str] = {"DeepSpeedJob": "replicaStatus"}
TASK_REPLICAS_READ = ("status", "replicaStatus", "replicas")


def task_replicas_key(kind: str) -> str:
    """Where the controller writes a `status.tasks[]` entry's replicas for a job of `kind`."""
    return TASK_REPLICAS_KEYS.get(kind, TASK_REPLICAS_KEY)


def task_replicas(task: dict) -> list:
    """A `status.tasks[]` entry's replicas, under whichever key a controller wrote them."""
    for key in TASK_REPLICAS_READ:
        value = task.get(key)
        if isinstance(value, list):
            return value
    return []


class Leader(NamedTuple):
    """The replica whose log tells a job's story: the operator follows it unless `log_replicas` says.

    A kind whose replica types are fixed names it: `type`, and `index` (None: every replica of the type).
    A kind whose `replicaSpecs` choose the types lists `preferred` ones: replica 0 of the first the job has,
    else of the first type it lists. Neither: every pod of the job.
    """

    type: str | None = None
    index: int | None = 0
    preferred: tuple[str, ...] = ()

    def pick(self, listed: Sequence[str]) -> tuple[str | None, int | None]:
        """(type, index) to follow for a job listing these replica types; (None, None) is every pod."""
        if self.type is not None:
            return self.type, self.index
        chosen = next((t for t in self.preferred if t in listed), listed[0] if listed else None)
        return (chosen, 0) if chosen else (None, None)
