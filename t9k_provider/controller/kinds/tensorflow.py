"""TensorFlowTrainingJob: TF_CONFIG with short hosts, chief (else worker-0) decides
(docs/controller.md#tensorflow).

Decision: `evaluator` is not part of `cluster` (TensorFlow's side-car evaluator is outside the training
cluster); its own TF_CONFIG carries the training cluster and `task.type: evaluator`.
No peer-wait init container (as in Kubeflow): TensorFlow's gRPC channels keep retrying a peer that does not
resolve yet, while a wait on a chief that already finished would hold the other replicas for nothing.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from t9k_provider.controller.engine.plan import Plan, ReplicaGroup
from t9k_provider.jobs.specparts import TrainingReplicaSpec
from t9k_provider.jobs.training import TensorFlowTrainingJob

from .common import declared_port, ensure_port, with_env
from .context import JobContext
from .training import tensorboard_companion, training_plan

CONTAINER = "tensorflow"
PORT_NAME = "tfjob-port"
DEFAULT_PORT = 2222
OUTSIDE_CLUSTER = ("evaluator",)


def compile_tensorflow(typed: TensorFlowTrainingJob, ctx: JobContext) -> Plan:
    spec = typed.spec
    name = ctx.name
    ports = {
        rs.type: declared_port(rs.template, CONTAINER, PORT_NAME)
        or declared_port(rs.template, CONTAINER, None)
        or DEFAULT_PORT
        for rs in spec.replica_specs
    }
    cluster = {
        rs.type: [f"{name}-{rs.type}-{i}:{ports[rs.type]}".lower() for i in range(rs.replicas)]
        for rs in spec.replica_specs
        if rs.type not in OUTSIDE_CLUSTER
    }
    types = [rs.type for rs in spec.replica_specs]
    master = "chief" if "chief" in types else "worker" if "worker" in types else types[0]

    def build(rs: TrainingReplicaSpec, index: int) -> dict[str, Any]:
        tf_config = {"cluster": cluster, "task": {"type": rs.type, "index": index}, "environment": "cloud"}
        tpl = with_env(rs.template, {"TF_CONFIG": json.dumps(tf_config), "PYTHONUNBUFFERED": "1"})
        ensure_port(tpl, CONTAINER, PORT_NAME, ports[rs.type])
        return tpl

    groups = tuple(
        ReplicaGroup(
            type=rs.type,
            replicas=rs.replicas,
            template=partial(build, rs),
            restart_policy=rs.restart_policy,
            training_container=CONTAINER,
            service_ports=({"name": PORT_NAME, "port": ports[rs.type]},),
        )
        for rs in spec.replica_specs
    )
    return training_plan(
        groups,
        master,
        spec.run_policy,
        spec.run_mode,
        spec.scheduler,
        master_decides_failure=True,  # 04-tensorflowtrainingjob.md, 成功和失败: the master fails the job
        companions=tensorboard_companion(ctx, spec.tensorboard_spec),
        tensorboard=name if spec.tensorboard_spec is not None else None,
    )
