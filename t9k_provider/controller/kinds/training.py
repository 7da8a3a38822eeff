"""What the TrainingJobs (PyTorch, TensorFlow, XGBoost) and DeepSpeed share: run policy, master rules."""

from __future__ import annotations

from typing import Any

from t9k_provider.controller.engine.decision import ChildType
from t9k_provider.controller.engine.plan import Companion, Plan, ReplicaGroup
from t9k_provider.jobs.specparts import RunMode, RunPolicy, SchedulePolicy, TensorBoardSpec

from .common import mode_fields, scheduler_plan
from .context import JobContext

TENSORBOARDS = ChildType("tensorstack.dev/v1beta1", "TensorBoard", "tensorboards")


def each_replica(groups: tuple[ReplicaGroup, ...]) -> tuple[dict[str, tuple[int, ...]], ...]:
    return tuple({g.type: (i,)} for g in groups for i in range(g.replicas))


def training_plan(
    groups: tuple[ReplicaGroup, ...],
    master: str,
    run_policy: RunPolicy,
    run_mode: RunMode | None,
    scheduler: SchedulePolicy | None,
    *,
    elastic_min: int | None = None,
    master_decides_failure: bool = False,
    companions: tuple[Companion, ...] = (),
    tensorboard: str | None = None,
) -> Plan:
    """Success: the master (index 0 of `master`) succeeded. Failure: any replica failed for good (fail-fast,
    docs/controller.md#r7), or only the master with `master_decides_failure` (TensorFlow's documented rule),
    or, when elastic, every replica (the job may go on at a smaller scale). A disruption restarts every
    replica, unless elastic (docs/controller.md#disruptions)."""
    if elastic_min is not None:
        success = each_replica(groups)
        failure: tuple[dict[str, tuple[int, ...]], ...] = (
            {g.type: tuple(range(g.replicas)) for g in groups},
        )
    else:
        success = ({master: (0,)},)
        failure = ({master: (0,)},) if master_decides_failure else each_replica(groups)
    total = sum(g.replicas for g in groups)
    return Plan(
        groups=groups,
        success_rules=success,
        failure_rules=failure,
        backoff_limit=run_policy.backoff_limit,
        active_deadline_seconds=run_policy.active_deadline_seconds,
        cleanup_policy=run_policy.clean_up_policy,
        scheduler=scheduler_plan(scheduler, elastic_min if elastic_min is not None else total),
        companions=companions,
        tensorboard=tensorboard,
        reports_backoff=True,
        # One collective (torch.distributed, TF's cluster, Rabit, DeepSpeed's pdsh ranks): a lost replica
        # breaks every peer. An elastic PyTorch job's agents re-form the group around a new pod instead.
        whole_restart=elastic_min is None,
        **mode_fields(run_mode, [g.type for g in groups]),
    )


def tensorboard_companion(ctx: JobContext, spec: TensorBoardSpec | None) -> tuple[Companion, ...]:
    """The TensorBoard `<job>` next to a PyTorch/TensorFlow job, kept after the end
    (docs/controller.md#tensorboard)."""
    if spec is None:
        return ()

    def build() -> dict[str, Any]:
        return {
            "apiVersion": TENSORBOARDS.api_version,
            "kind": TENSORBOARDS.kind,
            "metadata": ctx.meta(ctx.name),
            "spec": spec.dump(),
        }

    return (Companion(TENSORBOARDS, ctx.name, build),)
