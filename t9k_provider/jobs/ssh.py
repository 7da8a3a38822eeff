"""Pieces shared by the SSH-launched kinds MPIJob and ColossalAIJob."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import Field

from t9k_provider.jobs.basemodel import Model
from t9k_provider.jobs.envelope import JobSpec
from t9k_provider.jobs.podtemplates import Issues, container_index, containers, mount_issues, template_issues
from t9k_provider.jobs.replicachecks import allowed_type_issues, duplicate_type_issues, run_mode_issues
from t9k_provider.jobs.specparts import ReplicaSpec, RestartPolicy, RunMode, SchedulePolicy, WorkersRunPolicy

DEFAULT_SSH_MOUNT_PATH = "/root/.ssh"
DEFAULT_SSHD_PATH = "/usr/sbin/sshd"
LAUNCHER_WORKER_TYPES = ("launcher", "worker")
#: The launcher container that runs the launch command, when the launcher has several.
LAUNCHER_CONTAINER = "launcher"


class SSHSettings(Model):
    """Where the SSH keys are mounted and which sshd the workers run (normalised form)."""

    auth_mount_path: str = DEFAULT_SSH_MOUNT_PATH
    sshd_path: str = DEFAULT_SSHD_PATH


_Normalized = TypeVar("_Normalized", bound="NormalizedSSHJob")


class NormalizedSSHJob(Model):
    """The one form the controller compiles for MPIJob and ColossalAIJob, whichever shape was written.

    `launcher.template` is never empty: a launcher written as `template: {}` (or left out) runs in a
    copy of the worker template. `worker_container` and `launcher_container` name the containers
    that run sshd and the launch command.
    """

    worker: ReplicaSpec
    launcher: ReplicaSpec
    worker_container: str
    launcher_container: str
    ssh: SSHSettings
    clean_up_workers: bool = False
    run_mode: RunMode | None = None
    scheduler: SchedulePolicy | None = None

    @classmethod
    def deep(cls: type[_Normalized], **fields: Any) -> _Normalized:
        """Build from parts of a spec, copying them so the controller may change the result freely."""
        return cls(**fields).model_copy(deep=True)


#: Where a worker keeps its environment for its SSH sessions (docs/controller.md#session-env): the controller
#: mounts it, so a template may not.
SESSION_ENV_DIR = "/t9k/session-env"


class SSHJobSpec(JobSpec):
    """What the MPIJob and ColossalAIJob specs do alike: workers from `worker` (documented shape) or from
    `replicaSpecs` with a config field, never both, plus one launcher pod. The subclasses declare `worker`,
    `ssh` and the fields only their kind has."""

    KIND: ClassVar[str]
    #: The documented shape's fields, `worker` first, and the config field of the `replicaSpecs` shape.
    DOCUMENTED_FIELDS: ClassVar[tuple[str, ...]]
    CONFIG_FIELD: ClassVar[str]
    #: The container that runs sshd in the workers of the documented shape and of the `replicaSpecs` one.
    DOCUMENTED_WORKER_CONTAINER: ClassVar[str]
    WORKER_CONTAINER: ClassVar[str] = "worker"
    #: Whether the workers' SSH sessions get the worker container's environment (`SESSION_ENV_DIR`).
    SESSION_ENV: ClassVar[bool] = False

    if TYPE_CHECKING:
        worker: Any

    replica_specs: list[ReplicaSpec] | None = None
    run_policy: WorkersRunPolicy = Field(default_factory=WorkersRunPolicy)
    run_mode: RunMode | None = None
    scheduler: SchedulePolicy | None = None

    def ssh_settings(self) -> SSHSettings:
        """The SSH fields in their normalised form."""
        raise NotImplementedError

    def kind_issues(self) -> Issues:
        """Checks only this kind has, run once the shape is known to be one of the two."""
        return []

    def issues(self) -> Issues:
        fields = type(self).model_fields.items()
        written = {f.alias or name: getattr(self, name) is not None for name, f in fields}
        issues = field_exclusive_issues(written, self.DOCUMENTED_FIELDS, ("replicaSpecs", self.CONFIG_FIELD))
        if issues:
            return issues
        reserved = [self.ssh_settings().auth_mount_path, *([SESSION_ENV_DIR] if self.SESSION_ENV else [])]
        if self.worker is not None:
            where, template = "worker.template", self.worker.template
            issues += template_issues(template, where, self.KIND, self.DOCUMENTED_WORKER_CONTAINER)
            issues += mount_issues(template, where, reserved, f"{self.KIND} (SSH)")
        else:
            if not written[self.CONFIG_FIELD]:
                needs = f"the replicaSpecs shape needs {self.CONFIG_FIELD} with a script"
                issues.append((self.CONFIG_FIELD, needs))
            workers = self.replica_specs or []
            issues += replica_specs_issues(workers, self.KIND, self.WORKER_CONTAINER, reserved)
        return issues + self.kind_issues() + run_mode_issues(self.run_mode, LAUNCHER_WORKER_TYPES)

    def replica_counts(self) -> dict[str, int]:
        if self.worker is not None:
            return {"worker": self.worker.replicas}
        worker, _ = split_replica_specs(self.replica_specs or [])
        return {"worker": worker.replicas} if worker else {}

    def extra_child_suffixes(self) -> list[str]:
        return ["launcher"]

    def documented_launcher(self) -> ReplicaSpec | None:
        """The launcher the documented shape writes; None: it runs in a copy of the worker template."""
        return None

    def normalized_common(self) -> dict[str, Any]:
        """The `NormalizedSSHJob` fields, whichever shape was written."""
        if self.worker is not None:
            worker = worker_with(self.worker.template, self.worker.replicas)
            written_launcher, worker_container = self.documented_launcher(), self.DOCUMENTED_WORKER_CONTAINER
        else:
            worker, written_launcher = split_replica_specs(self.replica_specs or [])
            assert worker is not None  # guaranteed by issues()
            worker_container = self.WORKER_CONTAINER
        launcher, launcher_container = launcher_from(
            written_launcher, worker, worker_container, LAUNCHER_CONTAINER
        )
        return {
            "worker": worker,
            "launcher": launcher,
            "worker_container": worker_container,
            "launcher_container": launcher_container,
            "ssh": self.ssh_settings(),
            "clean_up_workers": self.run_policy.clean_up_workers,
            "run_mode": self.run_mode,
            "scheduler": self.scheduler,
        }


def no_restart() -> RestartPolicy:
    """Documented shapes have no restart policy: a failed pod stays failed."""
    return RestartPolicy(policy="Never", limit=0)


def split_replica_specs(specs: list[ReplicaSpec]) -> tuple[ReplicaSpec | None, ReplicaSpec | None]:
    """(worker, launcher) from the `replicaSpecs` shape."""
    by_type = {r.type: r for r in specs}
    return by_type.get("worker"), by_type.get("launcher")


def replica_specs_issues(
    specs: list[ReplicaSpec], kind: str, worker_container: str, reserved: Sequence[str]
) -> Issues:
    """Checks of the `replicaSpecs` shape: one worker spec, at most one single launcher."""
    types = [r.type for r in specs]
    issues = duplicate_type_issues(types, "replicaSpecs")
    issues += allowed_type_issues(types, LAUNCHER_WORKER_TYPES, "replicaSpecs", kind)
    if "worker" not in types:
        issues.append(("replicaSpecs", f"{kind} needs a replica spec of type worker"))
    for i, replica in enumerate(specs):
        where = f"replicaSpecs[{i}].template"
        if replica.type == "worker":
            issues += template_issues(replica.template, where, kind, worker_container)
        elif replica.type == "launcher":
            if replica.replicas != 1:
                issues.append((f"replicaSpecs[{i}].replicas", "there is exactly 1 launcher"))
            issues += template_issues(replica.template, where, kind, may_be_empty=True)
        issues += mount_issues(replica.template, where, reserved, f"{kind} (SSH)")
    return issues


def launcher_from(
    launcher: ReplicaSpec | None, worker: ReplicaSpec, worker_container: str, preferred: str
) -> tuple[ReplicaSpec, str]:
    """The launcher spec and its launch container; an empty launcher reuses the worker template."""
    if launcher is not None and containers(launcher.template):
        index = container_index(launcher.template, [preferred]) or 0
        return launcher, containers(launcher.template)[index]["name"]
    base = launcher or ReplicaSpec(type="launcher", restart_policy=no_restart())
    derived = base.model_copy(update={"template": copy.deepcopy(worker.template), "replicas": 1})
    return derived, worker_container


def field_exclusive_issues(
    present: dict[str, bool], shape_a: tuple[str, ...], shape_b: tuple[str, ...]
) -> Issues:
    """The two API shapes must not be mixed; report the first field of the other shape."""
    used_a = [f for f in shape_a if present[f]]
    used_b = [f for f in shape_b if present[f]]
    if used_a and used_b:
        return [(used_b[0], f"cannot be combined with {used_a[0]}: use one API shape")]
    if not used_a and not used_b:
        return [("", f"set either {shape_a[0]} (documented shape) or {shape_b[0]} (replicaSpecs shape)")]
    return []


def worker_with(template: dict, replicas: int) -> ReplicaSpec:
    """The worker replica spec of a documented shape."""
    return ReplicaSpec(
        type="worker", replicas=replicas, restart_policy=no_restart(), template=copy.deepcopy(template)
    )
