"""XGBoostTrainingJob: MASTER_ADDR/PORT, RANK (master 0, worker i+1), WORLD_SIZE; master decides
(docs/controller.md#xgboost).

No peer-wait init container (as in Kubeflow): Rabit retries its tracker connection, while a wait on a master
that already finished would hold the workers for nothing.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.controller.engine.plan import Plan, ReplicaGroup
from t9k_provider.jobs.specparts import TrainingReplicaSpec
from t9k_provider.jobs.training import XGBoostTrainingJob

from .common import declared_port, ensure_port, with_env
from .context import JobContext
from .training import training_plan

CONTAINER = "xgboost"
PORT_NAME = "xgboostjob-port"
DEFAULT_PORT = 9999


def compile_xgboost(typed: XGBoostTrainingJob, ctx: JobContext) -> Plan:
    spec = typed.spec
    name = ctx.name
    specs = sorted(spec.replica_specs, key=lambda s: s.type != "master")  # master first: rank 0
    master = specs[0]
    port = declared_port(master.template, CONTAINER, None) or DEFAULT_PORT
    master_addr = f"{name}-master-0".lower()
    total = sum(s.replicas for s in specs)

    def build(offset: int, rs: TrainingReplicaSpec, index: int) -> dict[str, Any]:
        rank = offset + index
        env = {
            "MASTER_ADDR": master_addr,
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "WORLD_SIZE": str(total),
            "PYTHONUNBUFFERED": "1",
        }
        tpl = with_env(rs.template, env)
        ensure_port(tpl, CONTAINER, PORT_NAME, port)
        return tpl

    groups = []
    offset = 0
    for rs in specs:
        groups.append(
            ReplicaGroup(
                type=rs.type,
                replicas=rs.replicas,
                template=partial(build, offset, rs),
                restart_policy=rs.restart_policy,
                training_container=CONTAINER,
                service_ports=({"name": PORT_NAME, "port": port},),
            )
        )
        offset += rs.replicas
    return training_plan(tuple(groups), "master", spec.run_policy, spec.run_mode, spec.scheduler)
