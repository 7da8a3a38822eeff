"""ColossalAIJob (both API shapes): `colossalai run` on the launcher over SSH
(docs/controller.md#colossalai)."""

from __future__ import annotations

from t9k_provider.controller.engine.plan import Plan
from t9k_provider.jobs.colossalai import ColossalAIJob, launch_arg_pairs

from .context import JobContext
from .ssh import launcher_plan, worker_hosts

HOSTFILE = "/etc/colossalai/hostfile"
MASTER_PORT = 29500
SUCCESS = "The launcher finished (colossalai run exited 0): read its log for the training's result."


def extra_launch_args(args: list[str]) -> list[str]:
    """torchArgs as `colossalai run --extra_launch_args k=v,...` (validated by the model: no ',', one '=')."""
    items = [item for _, item in launch_arg_pairs(args)]
    return ["--extra_launch_args", ",".join(items)] if items else []


def compile_colossalai(typed: ColossalAIJob, ctx: JobContext) -> Plan:
    n = typed.spec.normalized()
    launch = [
        "colossalai",
        "run",
        "--hostfile",
        HOSTFILE,
        "--nproc_per_node",
        str(n.proc_per_worker),
        "--master_addr",
        worker_hosts(ctx, 1)[0],
        "--master_port",
        str(MASTER_PORT),
        *extra_launch_args(n.extra_args),
        *n.script,
    ]
    return launcher_plan(
        n,
        ctx,
        launch=launch,
        launcher_env={"PYTHONUNBUFFERED": "1"},
        hostfile_path=HOSTFILE,
        slots=None,
        worker_debug=("sleep", "inf"),
        success_message=SUCCESS,
        worker_session_env=True,
    )
