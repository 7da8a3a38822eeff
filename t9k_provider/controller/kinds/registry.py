"""The kind registry: each job model class, how the controller runs it and the child types it creates.

Adding a kind: its model in `t9k_provider.jobs` (listed in `jobs.KINDS`), a compiler module in this package,
one line in `REGISTRY`. The runtime watches `WATCHED_CHILD_TYPES`, the union of what the kinds declare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from t9k_provider import jobs
from t9k_provider.controller.engine import jobrun
from t9k_provider.controller.engine.decision import ChildType, Decision
from t9k_provider.controller.engine.plan import Plan, Standing
from t9k_provider.controller.engine.standing import standing_decision
from t9k_provider.jobs import T9kJob

from . import beam, colossalai, deepspeed, generic, mpi, pytorch, ssh, tensorflow, xgboost
from .context import JobContext
from .training import TENSORBOARDS


@dataclass(frozen=True)
class ReplicaKind:
    """A kind compiled to a Plan, which the engine's JobRun runs (it creates the Pods, Services and PodGroup);
    `companions` are the types of the Plan's companions."""

    compile: Callable[[Any, JobContext], Plan]
    companions: tuple[ChildType, ...] = ()

    @property
    def children(self) -> tuple[ChildType, ...]:
        return (*jobrun.CHILD_TYPES, *self.companions)

    def decide(
        self, typed: T9kJob, ctx: JobContext, children: list[dict[str, Any]], now: datetime
    ) -> Decision:
        return jobrun.JobRun(ctx.job, self.compile(typed, ctx), children, now).decide()


@dataclass(frozen=True)
class CompanionKind:
    """A kind without replicas that drives companion resources itself and reads its Standing from them."""

    drive: Callable[[Any, JobContext, list[dict[str, Any]]], Standing]
    children: tuple[ChildType, ...]

    def decide(
        self, typed: T9kJob, ctx: JobContext, children: list[dict[str, Any]], now: datetime
    ) -> Decision:
        return standing_decision(ctx.job, self.drive(typed, ctx, children), now)


REGISTRY: dict[type[T9kJob], ReplicaKind | CompanionKind] = {
    jobs.GenericJob: ReplicaKind(generic.compile_generic),
    jobs.PyTorchTrainingJob: ReplicaKind(pytorch.compile_pytorch, (TENSORBOARDS,)),
    jobs.TensorFlowTrainingJob: ReplicaKind(tensorflow.compile_tensorflow, (TENSORBOARDS,)),
    jobs.XGBoostTrainingJob: ReplicaKind(xgboost.compile_xgboost),
    jobs.MPIJob: ReplicaKind(mpi.compile_mpi, ssh.COMPANION_TYPES),
    jobs.ColossalAIJob: ReplicaKind(colossalai.compile_colossalai, ssh.COMPANION_TYPES),
    jobs.DeepSpeedJob: ReplicaKind(deepspeed.compile_deepspeed, ssh.COMPANION_TYPES),
    jobs.BeamJob: CompanionKind(beam.drive_beam, (beam.FLINKCLUSTERS, beam.BATCH_JOBS)),
}

WATCHED_CHILD_TYPES: tuple[ChildType, ...] = tuple(
    dict.fromkeys(child for kind in REGISTRY.values() for child in kind.children)
)
