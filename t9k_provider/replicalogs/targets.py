"""Which replicas' logs to follow: parsing ``log_replicas`` and each kind's default leader."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from t9k_provider.jobs.contract import (
    LABEL_BATCH_JOB_NAME,
    LABEL_OWNER_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    batch_job_name,
)


class ReplicaTarget(NamedTuple):
    """``type`` None matches every pod of the job; ``index`` None matches every replica of the type."""

    type: str | None
    index: int | None

    def matches(self, labels: dict[str, str]) -> bool:
        if self.type is None:
            return True
        if labels.get(LABEL_REPLICA_TYPE) != self.type:
            return False
        return self.index is None or labels.get(LABEL_REPLICA_INDEX, "0") == str(self.index)


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


def targets_for(
    kind: str, manifest: dict[str, Any], log_replicas: str | Sequence[str] | None
) -> list[ReplicaTarget]:
    """The replicas whose logs a task follows: ``log_replicas`` when given, else the kind's leader."""
    return parse_targets(log_replicas) if log_replicas is not None else default_targets(kind, manifest)


def default_targets(kind: str, manifest: dict[str, Any]) -> list[ReplicaTarget]:
    """The kind's leader replica (its model's ``LEADER``) in a job with this manifest."""
    from t9k_provider.jobs import KINDS  # the models: only once a task runs, never while a DAG is parsed

    spec = manifest.get("spec") or {}
    types = [
        str(s.get("type")) for s in spec.get("replicaSpecs") or [] if isinstance(s, dict) and s.get("type")
    ]
    return [ReplicaTarget(*KINDS[kind].LEADER.pick(types))]


def pod_selector(kind: str, job_name: str) -> str:
    """Label selector for the pods whose logs belong to the job."""
    if kind == "BeamJob":
        return f"{LABEL_BATCH_JOB_NAME}={batch_job_name(job_name)}"
    return f"{LABEL_OWNER_NAME}={job_name}"
