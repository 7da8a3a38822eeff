"""Which replicas' logs to follow: parsing ``log_replicas`` and each kind's default leader."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

#: The controller labels every replica pod with its job's name.
OWNER_LABEL = "tensorstack.dev/owner-name"
#: BeamJob's submit pods come from its batch/v1 Job ``<job>-batchjob``, labelled by the Job controller.
BATCH_JOB_LABEL = "batch.kubernetes.io/job-name"
REPLICA_TYPE_LABEL = "batch.tensorstack.dev/replica-type"
REPLICA_INDEX_LABEL = "batch.tensorstack.dev/replica-index"


class ReplicaTarget(NamedTuple):
    """``type`` None matches every pod of the job; ``index`` None matches every replica of the type."""

    type: str | None
    index: int | None

    def matches(self, labels: dict[str, str]) -> bool:
        if self.type is None:
            return True
        if labels.get(REPLICA_TYPE_LABEL) != self.type:
            return False
        return self.index is None or labels.get(REPLICA_INDEX_LABEL, "0") == str(self.index)


def parse_targets(spec: str | Sequence[str]) -> list[ReplicaTarget]:
    """``"all"``, ``"worker"`` (every worker) or ``"worker/0"``; a list combines several."""
    items = [spec] if isinstance(spec, str) else list(spec)
    targets = []
    for item in items:
        text = item.strip()
        if text in ("all", "*"):
            targets.append(ReplicaTarget(None, None))
            continue
        kind, _, index = text.partition("/")
        if not kind or (index and not index.isdigit()):
            raise ValueError(f"log_replicas: {item!r} is not 'all', '<type>' or '<type>/<index>'")
        targets.append(ReplicaTarget(kind, int(index) if index else None))
    return targets


def default_targets(kind: str, manifest: dict[str, Any]) -> list[ReplicaTarget]:
    """The replica whose log tells the job's story: master/chief/launcher/worker-0, per the kind's rules."""
    spec = manifest.get("spec") or {}
    types = [
        str(s.get("type")) for s in spec.get("replicaSpecs") or [] if isinstance(s, dict) and s.get("type")
    ]
    if kind in ("MPIJob", "ColossalAIJob"):
        return [ReplicaTarget("launcher", None)]
    if kind == "DeepSpeedJob":
        return [ReplicaTarget("worker", 0)]
    if kind == "BeamJob":
        return [ReplicaTarget(None, None)]
    preferred = {"PyTorchTrainingJob": ("master",), "TensorFlowTrainingJob": ("chief", "worker")}
    preferred["XGBoostTrainingJob"] = ("master",)
    for candidate in preferred.get(kind, ()):
        if candidate in types:
            return [ReplicaTarget(candidate, 0)]
    return [ReplicaTarget(types[0], 0)] if types else [ReplicaTarget(None, None)]


def pod_selector(kind: str, job_name: str) -> str:
    """Label selector for the pods whose logs belong to the job."""
    if kind == "BeamJob":
        return f"{BATCH_JOB_LABEL}={job_name}-batchjob"
    return f"{OWNER_LABEL}={job_name}"
