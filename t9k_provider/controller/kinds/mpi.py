"""MPIJob (both API shapes, via `spec.normalized()`): mpirun on the launcher over SSH
(docs/controller.md#mpi).

`Succeeded` means the launcher's mpirun exited 0: the program finished, not that its result is right.
"""

from __future__ import annotations

from t9k_provider.controller.engine.plan import Plan
from t9k_provider.jobs.mpi import MPIJob, NormalizedMPIJob

from .context import JobContext
from .ssh import launcher_plan

HOSTFILE = "/etc/mpi/hostfile"
SUCCESS = "The launcher finished: mpirun exited 0. Read the launcher log for the program's result."


def mpirun_command(n: NormalizedMPIJob, hostfile: str = HOSTFILE) -> list[str]:
    cmd = ["mpirun", "--hostfile", hostfile]
    if n.home:
        cmd += ["--prefix", n.home]
    for key, value in sorted(n.mca.items()):
        cmd += ["-mca", key, value]
    recovery = n.process_recovery
    if recovery is not None and recovery.enabled:
        cmd.append("--enable-recovery")
        if recovery.limit is not None:
            cmd += ["--max-restarts", str(recovery.limit)]
    return [*cmd, *n.extra_args, *n.script]


def compile_mpi(typed: MPIJob, ctx: JobContext) -> Plan:
    n = typed.spec.normalized()
    return launcher_plan(
        n,
        ctx,
        launch=mpirun_command(n),
        launcher_env={
            "OMPI_MCA_orte_default_hostfile": HOSTFILE,
            "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
            "PYTHONUNBUFFERED": "1",
        },
        hostfile_path=HOSTFILE,
        slots=n.processes_per_worker or 1,
        worker_debug=(n.ssh.sshd_path, "-D"),
        success_message=SUCCESS,
    )
