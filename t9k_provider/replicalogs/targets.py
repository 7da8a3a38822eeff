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


class Followed(NamedTuple):
    """Whose logs a wait follows (``targets``) and whose progress reports count (``leader``: the kind's
    leader replica, None when it is not followed). Plain JSON inside, as it travels across a deferral."""

    targets: list[ReplicaTarget]
    leader: ReplicaTarget | None

    @classmethod
    def for_job(
        cls, kind: str, manifest: dict[str, Any], log_replicas: str | Sequence[str] | None, needs_leader: bool
    ) -> Followed:
        """``log_replicas`` when given, else the kind's leader; ``needs_leader`` (a ``progress_timeout``)
        fails when ``log_replicas`` leaves the leader out, as its reports would never be read."""
        leader = default_targets(kind, manifest)[0]
        targets = parse_targets(log_replicas) if log_replicas is not None else [leader]
        leader_labels = {LABEL_REPLICA_TYPE: str(leader.type), LABEL_REPLICA_INDEX: str(leader.index or 0)}
        if any(t.matches(leader_labels) for t in targets):
            return cls(targets, leader)
        if needs_leader:
            raise ValueError(
                f"log_replicas: progress_timeout reads the progress reports of the leader replica "
                f"({leader.type}/{leader.index or 0}), which {log_replicas!r} does not follow"
            )
        return cls(targets, None)

    def to_json(self) -> dict[str, Any]:
        return {"log_targets": [list(t) for t in self.targets], "leader": list(self.leader or []) or None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Followed:
        leader = data.get("leader")
        targets = [ReplicaTarget(*t) for t in data["log_targets"]]
        return cls(targets, ReplicaTarget(*leader) if leader else None)


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
