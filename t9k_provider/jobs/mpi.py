"""MPIJob in both API shapes: documented (`worker` + `mca`/`mpiHome`) and `replicaSpecs` + `mpiConfig`."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from t9k_provider.jobs.basemodel import KubeObject, Model
from t9k_provider.jobs.contract import Leader
from t9k_provider.jobs.envelope import T9kJob
from t9k_provider.jobs.ssh import (
    DEFAULT_SSH_MOUNT_PATH,
    DEFAULT_SSHD_PATH,
    NormalizedSSHJob,
    SSHJobSpec,
    SSHSettings,
)


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

    KIND: ClassVar[str] = "MPIJob"
    DOCUMENTED_FIELDS: ClassVar[tuple[str, ...]] = ("worker", "mca", "mpiHome")
    CONFIG_FIELD: ClassVar[str] = "mpiConfig"
    DOCUMENTED_WORKER_CONTAINER: ClassVar[str] = "mpi-worker"

    worker: MPIWorker | None = None
    mca: dict[str, str] | None = Field(None, description="OpenMPI MCA parameters, passed as -mca <k> <v>.")
    mpi_home: str | None = Field(None, description="OpenMPI installation prefix.")
    mpi_config: MPIConfig | None = None
    ssh: MPISSH = Field(default_factory=MPISSH)

    def ssh_settings(self) -> SSHSettings:
        return SSHSettings(auth_mount_path=self.ssh.ssh_auth_mount_path, sshd_path=self.ssh.sshd_path)

    def normalized(self) -> NormalizedMPIJob:
        """Both shapes as one `NormalizedMPIJob`, sharing nothing with this spec."""
        common = self.normalized_common()
        if self.worker is not None:
            return NormalizedMPIJob.deep(
                mca=dict(self.mca or {}),
                home=self.mpi_home,
                extra_args=list(self.worker.extra_mpi_args or []),
                script=list(self.worker.cmd),
                processes_per_worker=self.worker.processes_per_worker,
                process_recovery=self.worker.process_recovery,
                **common,
            )
        config = self.mpi_config
        assert config is not None  # guaranteed by issues()
        return NormalizedMPIJob.deep(
            mca=dict(config.mca or {}),
            home=config.home,
            extra_args=list(config.extra_args or []),
            script=list(config.script),
            **common,
        )


class MPIJob(T9kJob):
    """MPIJob runs an OpenMPI program: a launcher starts mpirun over SSH on the workers."""

    KIND: ClassVar[str] = "MPIJob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mj",)
    LEADER: ClassVar[Leader] = Leader("launcher", index=None)

    spec: MPIJobSpec
