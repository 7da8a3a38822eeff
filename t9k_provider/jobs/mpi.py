"""MPIJob in both API shapes: documented (`worker` + `mca`/`mpiHome`) and `replicaSpecs` + `mpiConfig`."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from t9k_provider.jobs.base import KubeObject, Model
from t9k_provider.jobs.common import ReplicaSpec, RunMode, SchedulePolicy, WorkersRunPolicy
from t9k_provider.jobs.job import T9kJob
from t9k_provider.jobs.replicas import run_mode_issues
from t9k_provider.jobs.ssh import (
    DEFAULT_SSH_MOUNT_PATH,
    DEFAULT_SSHD_PATH,
    LAUNCHER_WORKER_TYPES,
    NormalizedSSHJob,
    SSHJobSpec,
    SSHSettings,
    field_exclusive_issues,
    launcher_from,
    replica_specs_issues,
    split_replica_specs,
    worker_with,
)
from t9k_provider.jobs.status import JobStatus
from t9k_provider.jobs.templates import Issues, mount_issues, template_issues

# Training container of the documented shape; the replicaSpecs shape names it `worker`.
DOCUMENTED_WORKER_CONTAINER = "mpi-worker"
WORKER_CONTAINER = "worker"


class ProcessRecovery(Model):
    """OpenMPI process recovery (`--enable-recovery --max-restarts <limit>`), seen in T9k examples."""

    RENAMED: ClassVar[dict[str, str]] = {"enable": "enabled"}

    enabled: bool = False
    limit: int | None = Field(None, ge=0)


class MPIWorker(Model):
    """Documented shape: the workers, whose template also configures the launcher."""

    replicas: int = Field(1, ge=1)
    extra_mpi_args: list[str] | None = Field(None, alias="extraMPIArgs")
    cmd: list[str] = Field(min_length=1, description="Program mpirun starts once all workers are ready.")
    template: KubeObject = Field(default_factory=dict)
    processes_per_worker: int | None = Field(None, ge=1)
    process_recovery: ProcessRecovery | None = None


class MPISSH(Model):
    ssh_auth_mount_path: str = DEFAULT_SSH_MOUNT_PATH
    sshd_path: str = DEFAULT_SSHD_PATH


class MPIConfig(Model):
    """`replicaSpecs` shape: what `mpirun` runs and with which options."""

    mca: dict[str, str] | None = None
    home: str | None = None
    extra_args: list[str] | None = None
    script: list[str] = Field(min_length=1)


class NormalizedMPIJob(NormalizedSSHJob):
    """MPIJob in the one form the controller compiles (see `NormalizedSSHJob`)."""

    mca: dict[str, str] = Field(default_factory=dict)
    home: str | None = None
    extra_args: list[str] = Field(default_factory=list)
    script: list[str]
    processes_per_worker: int | None = None
    process_recovery: ProcessRecovery | None = None


class MPIJobSpec(SSHJobSpec):
    """Exactly one shape: `worker` (with `mca`, `mpiHome`) or `replicaSpecs` (with `mpiConfig`)."""

    worker: MPIWorker | None = None
    mca: dict[str, str] | None = Field(None, description="OpenMPI MCA parameters, passed as -mca <k> <v>.")
    mpi_home: str | None = Field(None, description="OpenMPI installation prefix.")
    replica_specs: list[ReplicaSpec] | None = None
    mpi_config: MPIConfig | None = None
    ssh: MPISSH = Field(default_factory=MPISSH)
    run_policy: WorkersRunPolicy = Field(default_factory=WorkersRunPolicy)
    run_mode: RunMode | None = None
    scheduler: SchedulePolicy | None = None

    def issues(self) -> Issues:
        present = {
            "worker": self.worker is not None,
            "mca": self.mca is not None,
            "mpiHome": self.mpi_home is not None,
            "replicaSpecs": self.replica_specs is not None,
            "mpiConfig": self.mpi_config is not None,
        }
        issues = field_exclusive_issues(present, ("worker", "mca", "mpiHome"), ("replicaSpecs", "mpiConfig"))
        if issues:
            return issues
        ssh_path = self.ssh.ssh_auth_mount_path
        if self.worker is not None:
            template = self.worker.template
            issues += template_issues(template, "worker.template", "MPIJob", DOCUMENTED_WORKER_CONTAINER)
            issues += mount_issues(template, "worker.template", [ssh_path], "MPIJob (SSH keys)")
        else:
            if self.mpi_config is None:
                issues.append(("mpiConfig", "the replicaSpecs shape needs mpiConfig with a script"))
            issues += replica_specs_issues(self.replica_specs or [], "MPIJob", WORKER_CONTAINER, ssh_path)
        return issues + run_mode_issues(self.run_mode, LAUNCHER_WORKER_TYPES)

    def normalized(self) -> NormalizedMPIJob:
        """Both shapes as one `NormalizedMPIJob`, sharing nothing with this spec."""
        ssh = SSHSettings(auth_mount_path=self.ssh.ssh_auth_mount_path, sshd_path=self.ssh.sshd_path)
        common = self.normalized_common(ssh)
        if self.worker is not None:
            worker = worker_with(self.worker.template, self.worker.replicas)
            launcher, launcher_container = launcher_from(
                None, worker, DOCUMENTED_WORKER_CONTAINER, "launcher"
            )
            return NormalizedMPIJob.deep(
                worker=worker,
                launcher=launcher,
                worker_container=DOCUMENTED_WORKER_CONTAINER,
                launcher_container=launcher_container,
                mca=dict(self.mca or {}),
                home=self.mpi_home,
                extra_args=list(self.worker.extra_mpi_args or []),
                script=list(self.worker.cmd),
                processes_per_worker=self.worker.processes_per_worker,
                process_recovery=self.worker.process_recovery,
                **common,
            )
        worker, written_launcher = split_replica_specs(self.replica_specs or [])
        assert worker is not None and self.mpi_config is not None  # guaranteed by issues()
        launcher, launcher_container = launcher_from(written_launcher, worker, WORKER_CONTAINER, "launcher")
        config = self.mpi_config
        return NormalizedMPIJob.deep(
            worker=worker,
            launcher=launcher,
            worker_container=WORKER_CONTAINER,
            launcher_container=launcher_container,
            mca=dict(config.mca or {}),
            home=config.home,
            extra_args=list(config.extra_args or []),
            script=list(config.script),
            **common,
        )


class MPIJob(T9kJob):
    """MPIJob runs an OpenMPI program: a launcher starts mpirun over SSH on the workers."""

    KIND: ClassVar[str] = "MPIJob"
    PLURAL: ClassVar[str] = "mpijobs"
    SINGULAR: ClassVar[str] = "mpijob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mj",)

    spec: MPIJobSpec
    status: JobStatus | None = None
