"""MPIJob and ColossalAIJob share one layout: sshd workers plus a launcher started once they run (R10)."""

from __future__ import annotations

import copy
from typing import Any

from t9k_provider.controller.engine.model import Plan, ReplicaGroup
from t9k_provider.jobs.ssh import NormalizedSSHJob

from .common import add_wait, mode_fields, scheduler_plan, set_command, with_env
from .ssh import (
    SSH_PORT,
    SSH_SERVICE_PORTS,
    Keygen,
    hostfile_configmap,
    mount_hostfile,
    mount_ssh,
    ssh_secret,
    worker_hosts,
)


def ssh_plan(
    n: NormalizedSSHJob,
    job: dict[str, Any],
    keygen: Keygen | None,
    *,
    launch: list[str],
    launcher_env: dict[str, str],
    hostfile_data: dict[str, str],
    hostfile_paths: dict[str, str],
    worker_debug: tuple[str, ...],
    success_message: str,
) -> Plan:
    """Workers `<job>-worker-<i>` run sshd; the launcher `<job>-launcher` runs `launch` once all workers run.

    Success and failure follow the launcher; a worker failing for good fails the job at once (fail-fast).
    The PodGroup's minMember counts the workers only: the launcher is created after they run, so requiring
    it in the gang would deadlock (decision, docs/controller.md).
    """
    mount = n.ssh.auth_mount_path
    workers = n.worker.replicas
    hosts = worker_hosts(job, workers)

    def worker(_: int) -> dict[str, Any]:
        tpl = copy.deepcopy(n.worker.template)
        set_command(tpl, n.worker_container, [n.ssh.sshd_path, "-D", "-e"])
        mount_ssh(tpl, n.worker_container, job, mount)
        return tpl

    def launcher(_: int) -> dict[str, Any]:
        tpl = with_env(n.launcher.template, launcher_env)
        set_command(tpl, n.launcher_container, launch)
        mount_ssh(tpl, n.launcher_container, job, mount)
        mount_hostfile(tpl, n.launcher_container, job, hostfile_paths)
        add_wait(tpl, n.launcher_container, [f"{h}:{SSH_PORT}" for h in hosts])
        return tpl

    worker_policy = n.worker.restart_policy
    launcher_policy = n.launcher.restart_policy
    groups = (
        ReplicaGroup(
            type="worker",
            replicas=workers,
            template=worker,
            restart_policy=worker_policy.policy,
            restart_limit=worker_policy.limit,
            training_container=n.worker_container,
            service_ports=SSH_SERVICE_PORTS,
            debug_command=worker_debug,
            recreatable=worker_policy.policy != "Never",
        ),
        ReplicaGroup(
            type="launcher",
            replicas=1,
            template=launcher,
            restart_policy=launcher_policy.policy,
            restart_limit=launcher_policy.limit,
            training_container=n.launcher_container,
            indexed=False,
            after_running="worker",
        ),
    )
    return Plan(
        groups=groups,
        success_rules=({"launcher": (0,)},),
        failure_rules=({"launcher": (0,)}, *({"worker": (i,)} for i in range(workers))),
        success_message=success_message,
        cleanup_policy="All" if n.clean_up_workers else "None",
        cleanup_types=frozenset({"worker"}),
        scheduler=scheduler_plan(n.scheduler, workers),
        companions=(ssh_secret(job, keygen, mount), hostfile_configmap(job, hostfile_data)),
        **mode_fields(n.run_mode, ["worker", "launcher"]),
    )
