"""ColossalAIJob (both API shapes): `colossalai run` on the launcher over SSH (section 8.6)."""

from __future__ import annotations

from typing import Any

from t9k_provider.controller.engine.model import Plan
from t9k_provider.jobs.colossalai import ColossalAIJob, launch_arg_pairs

from .ssh import Keygen, worker_hosts
from .sshjob import ssh_plan

HOSTFILE = "/etc/colossalai/hostfile"
MASTER_PORT = 29500
SUCCESS = "The launcher finished (colossalai run exited 0): read its log for the training's result."


def extra_launch_args(args: list[str]) -> list[str]:
    """torchArgs as `colossalai run --extra_launch_args k=v,...` (validated by the model: no ',', one '=')."""
    items = [item for _, item in launch_arg_pairs(args)]
    return ["--extra_launch_args", ",".join(items)] if items else []


def compile_colossalai(typed: ColossalAIJob, job: dict[str, Any], keygen: Keygen | None) -> Plan:
    n = typed.spec.normalized()
    hosts = worker_hosts(job, n.worker.replicas)
    launch = [
        "colossalai",
        "run",
        "--hostfile",
        HOSTFILE,
        "--nproc_per_node",
        str(n.proc_per_worker),
        "--master_addr",
        hosts[0],
        "--master_port",
        str(MASTER_PORT),
        *extra_launch_args(n.extra_args),
        *n.script,
    ]
    return ssh_plan(
        n,
        job,
        keygen,
        launch=launch,
        launcher_env={"PYTHONUNBUFFERED": "1"},
        hostfile_data={"hostfile": "".join(f"{h}\n" for h in hosts)},
        hostfile_paths={"hostfile": HOSTFILE},
        worker_debug=("sleep", "inf"),
        success_message=SUCCESS,
    )
