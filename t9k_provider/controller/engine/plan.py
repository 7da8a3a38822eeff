"""The internal model the kinds hand to the engine: a `Plan` (replica kinds) or a `Standing` (BeamJob).

A kind compiler turns a typed job into a `Plan`; the engine never looks at kind-specific spec fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .decision import ChildType, Delete


class SpecError(ValueError):
    """A spec the controller cannot satisfy; the message starts with the field path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class ReplicaGroup:
    """One replica type. `template(i)` builds the compiled PodTemplateSpec of replica `i` (a fresh dict); it
    is called only when that pod is created, so a reconcile of a running job copies no templates."""

    type: str
    replicas: int
    template: Callable[[int], dict[str, Any]]
    restart_policy: str = "Never"
    # Per-replica restart budget (GenericJob, MPI/ColossalAI new shape); None: the job-wide backoffLimit.
    restart_limit: int | None = None
    training_container: str = ""
    # Ports of the per-replica headless Service; empty: no Service.
    service_ports: tuple[dict[str, Any], ...] = ()
    # False: a single pod named `<job>-<type>` (MPI/ColossalAI launcher).
    indexed: bool = True
    # Create these replicas only once every replica of this type is Running (launcher after workers).
    after_running: str | None = None
    # Command used in debug mode when the debug spec names none.
    debug_command: tuple[str, ...] = ("sleep", "inf")
    # The index of the replica that launches the training on every replica of this group (DeepSpeed's
    # worker-0, elastic): its pod records the group's size when built, and is relaunched once the size
    # differs and every replica runs (docs/controller.md#elastic-relaunch). None: never relaunched.
    relaunch_on_resize: int | None = None


@dataclass(frozen=True)
class ModeOverride:
    """Per-type command changes of debug mode or of a resume after pause."""

    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None
    skip_init_container: bool = False


#: What a debug or resume override applies to: a replica type, or one replica `(type, index)` of it, which
#: takes precedence over its type's entry (DeepSpeed's `master`: worker 0).
OverrideKey = str | tuple[str, int]


@dataclass(frozen=True)
class SchedulerPlan:
    queue: str
    priority: int
    min_member: int


@dataclass(frozen=True)
class Companion:
    """An auxiliary child (Secret, ConfigMap, TensorBoard ...) created before any pod.

    `build` is called only when the object is missing (so key generation runs once); `sync` lists the
    top-level fields kept equal to the built object with a merge patch (e.g. a ConfigMap's `data`).
    """

    type: ChildType
    name: str
    build: Callable[[], dict[str, Any]]
    sync: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """Everything the engine needs to run one job."""

    groups: tuple[ReplicaGroup, ...]
    # Each rule maps type -> indices; any rule fully met decides. Failure rules win over success rules.
    success_rules: tuple[dict[str, tuple[int, ...]], ...]
    failure_rules: tuple[dict[str, tuple[int, ...]], ...]
    success_message: str = "The job has finished successfully."
    failure_message: str = "The job exited with an error code."
    # Job-wide restart budget shared by all replicas (TrainingJobs, DeepSpeed); None: per-replica limits.
    backoff_limit: int | None = None
    active_deadline_seconds: int | None = None
    cleanup_policy: str = "None"  # None | Unfinished | All
    cleanup_types: frozenset[str] | None = None  # None: every type (cleanUpWorkers: only workers)
    debug: dict[OverrideKey, ModeOverride] | None = None  # None: not in debug mode
    paused: bool = False
    resume: dict[OverrideKey, ModeOverride] = field(default_factory=dict)
    scheduler: SchedulerPlan | None = None
    companions: tuple[Companion, ...] = ()
    tensorboard: str | None = None  # name of the TensorBoard companion mirrored into status
    reports_backoff: bool = False  # write status.backoffCount (TrainingJobs, DeepSpeed)
    # The replicas form one collective: a disruption of any restarts them all, charging no budget; False:
    # only the lost replica is recreated (docs/controller.md#disruptions).
    whole_restart: bool = False
    rule_messages: bool = False  # GenericJob: name the deciding rule in the condition message

    def group(self, replica_type: str) -> ReplicaGroup | None:
        return next((g for g in self.groups if g.type == replica_type), None)


@dataclass(frozen=True)
class Standing:
    """Where a job that drives companion resources itself (BeamJob) stands, as its kind reads them this round.

    `conditions` maps type -> (status, reason, message); `fields` are the kind's own status fields;
    `cleanup` runs only once the terminal phase is in the observed status (as a Plan's cleanupPolicy).
    """

    phase: str
    conditions: dict[str, tuple[str, str, str]]
    creates: tuple[dict[str, Any], ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    cleanup: tuple[Delete, ...] = ()
