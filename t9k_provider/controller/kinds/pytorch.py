"""PyTorchTrainingJob: ranks across types, MASTER_*/PET_* env, torchrun launch, elastic scaling
(docs/controller.md#pytorch)."""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.controller.engine.plan import Plan, ReplicaGroup
from t9k_provider.jobs.specparts import PyTorchReplicaSpec
from t9k_provider.jobs.training import PyTorchTrainingJob, TorchrunConfig
from t9k_provider.kube.resources import GPU

from .common import (
    add_wait,
    container_named,
    declared_port,
    elastic_replicas,
    ensure_port,
    pick_container,
    set_command,
    with_env,
)
from .context import JobContext
from .training import tensorboard_companion, training_plan

PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
TRAINING_CONTAINERS = ("pytorch", "python")


def rank_order(specs: list[PyTorchReplicaSpec]) -> list[PyTorchReplicaSpec]:
    """A type literally named `master` holds rank 0; otherwise the first listed type does."""
    masters = [s for s in specs if s.type == "master"]
    return masters + [s for s in specs if s.type != "master"]


def elastic_counts(specs: list[PyTorchReplicaSpec], total: int) -> list[int]:
    """Spread `total` replicas over the types by scalingWeight (default: the written replicas).

    Largest remainder, ties to the earlier type; the master type always keeps at least one replica.
    """
    weights = [s.scaling_weight if s.scaling_weight is not None else s.replicas for s in specs]
    if not sum(weights):
        weights = [1] * len(specs)
    shares = [total * w / sum(weights) for w in weights]
    counts = [int(s) for s in shares]
    order = sorted(range(len(specs)), key=lambda i: (-(shares[i] - counts[i]), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    if counts and counts[0] == 0:
        donor = max(range(len(counts)), key=lambda i: counts[i])
        counts[donor] -= 1
        counts[0] = 1
    return counts


def _gpu_count(container: dict[str, Any] | None) -> int:
    limits = ((container or {}).get("resources") or {}).get("limits") or {}
    value = limits.get(GPU)
    return int(value) if value is not None and str(value).isdigit() else 1


def _run_under_torchrun(
    tpl: dict[str, Any], cname: str, torchrun: TorchrunConfig, nnodes: str, endpoint: str, rdzv_id: str
) -> None:
    """The training container's command becomes ``torchrun`` with its rendezvous at ``endpoint`` (the
    master's address), the container's own args after torchrun's options."""
    main = container_named(tpl, cname) or {}
    nproc = torchrun.proc_per_node
    args = [f"--nnodes={nnodes}"]
    if nproc is not None:
        args.append(f"--nproc_per_node={_gpu_count(main) if nproc == 'gpu' else int(nproc)}")
    if torchrun.max_restarts is not None:
        args.append(f"--max_restarts={torchrun.max_restarts}")
    args += [
        f"--rdzv_backend={torchrun.rdzv_backend}",
        f"--rdzv_endpoint={endpoint}",
        f"--rdzv_id={rdzv_id}",
        *torchrun.extra_options,
        *(main.get("args") or []),
    ]
    set_command(tpl, cname, ["torchrun", *args])


def compile_pytorch(typed: PyTorchTrainingJob, ctx: JobContext) -> Plan:
    spec = typed.spec
    name = ctx.name
    specs = rank_order(spec.replica_specs)
    elastic = spec.elastic if spec.elastic is not None and spec.elastic.enabled else None
    if elastic is not None:
        total = elastic_replicas(elastic, sum(s.replicas for s in specs))
        counts = elastic_counts(specs, total)
        nnodes = f"{elastic.min_replicas}:{elastic.max_replicas}"
    else:
        counts = [s.replicas for s in specs]
        total = sum(counts)
        nnodes = str(total)
    master = specs[0]
    master_container = pick_container(master.template, TRAINING_CONTAINERS)
    port = declared_port(master.template, master_container, PORT_NAME) or DEFAULT_PORT
    master_addr = f"{name}-{master.type}-0".lower()
    torchrun = (
        spec.torchrun_config if spec.torchrun_config is not None and spec.torchrun_config.enabled else None
    )

    def build(rs: PyTorchReplicaSpec, cname: str, offset: int, index: int) -> dict[str, Any]:
        rank = offset + index
        tpl = with_env(
            rs.template,
            {
                "MASTER_ADDR": master_addr,
                "MASTER_PORT": str(port),
                "RANK": str(rank),
                "WORLD_SIZE": str(total),
                "PYTHONUNBUFFERED": "1",
                "PET_MASTER_ADDR": master_addr,
                "PET_MASTER_PORT": str(port),
                "PET_NODE_RANK": str(rank),
                "PET_NNODES": nnodes,
            },
        )
        ensure_port(tpl, cname, PORT_NAME, port)
        if torchrun is not None:
            _run_under_torchrun(tpl, cname, torchrun, nnodes, f"{master_addr}:{port}", ctx.uid)
        if rank != 0:
            add_wait(tpl, cname, [master_addr])
        return tpl

    groups = []
    offset = 0
    for rs, count in zip(specs, counts, strict=True):
        cname = pick_container(rs.template, TRAINING_CONTAINERS)
        groups.append(
            ReplicaGroup(
                type=rs.type,
                replicas=count,
                template=partial(build, rs, cname, offset),
                restart_policy=rs.restart_policy,
                training_container=cname,
                service_ports=({"name": PORT_NAME, "port": port},),
            )
        )
        offset += count
    return training_plan(
        tuple(groups),
        master.type,
        spec.run_policy,
        spec.run_mode,
        spec.scheduler,
        elastic_min=elastic.min_replicas if elastic is not None else None,
        companions=tensorboard_companion(ctx, spec.tensorboard_spec),
        tensorboard=name if spec.tensorboard_spec is not None else None,
    )
