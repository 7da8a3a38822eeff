"""One pass over a job's replicas: the Round it builds, what every replica's decision reads (`Pass`) and the
replica being decided (`Replica`); shared by the per-replica decisions (`replicas`) and what a disruption
changes (`disrupted`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from t9k_provider.kube.timestamps import parse_time

from .decision import Action, Delete, Event
from .disruptions import deleted_by_taint_manager
from .plan import Plan, ReplicaGroup
from .podstate import PodState, telling_exit_reason

# A pod still terminating this long after its deletion deadline is force-deleted (node lost,
# docs/controller.md#r8).
STUCK_TERMINATING_SECONDS = 300

ACTIVE, PAUSED, STOPPED = "active", "paused", "stopped"


@dataclass
class Round:
    """The result of one pass over every desired replica."""

    records: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    failures: dict[tuple[str, int], str] = field(default_factory=dict)  # ReplicaFailure message per replica
    # Failed pods whose container ended for a reason of its own (e.g. OOMKilled): pod name -> the words
    terminations: dict[str, str] = field(default_factory=dict)
    backoff_count: int = 0
    requeue_at: datetime | None = None
    restarts: int = 0  # the job's whole restarts (status.restarts)
    disruptions: list[dict[str, Any]] = field(default_factory=list)  # status.disruptions, the latest kept
    restarting: bool = False  # a whole restart is under way: pods of an earlier restart are being deleted
    held: bool = False  # a program failure waits out the attribution window: no outcome yet

    @property
    def all_created(self) -> bool:
        """Every desired replica has an observed pod or a final outcome."""
        return all(r["phase"] not in ("Creating", "Deleted") for r in self.records.values())

    def wake_at(self, moment: datetime) -> None:
        self.requeue_at = moment if self.requeue_at is None else min(self.requeue_at, moment)


def replica_record(
    name: str,
    uid: str,
    phase: str,
    containers: list[dict[str, Any]],
    restarts: int,
    replaced_uid: str | None,
    node: str | None,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "phase": phase,
        "containers": containers,
        "restartCount": restarts,
    }
    if replaced_uid:
        rec["replacedUid"] = replaced_uid
    if node:
        rec["nodeName"] = node
    return rec


def describe(name: str, state: PodState) -> str:
    """How the replica's pod ended, as a sentence's start ("Pod x failed with exit code 137 (OOMKilled)")."""
    if state.phase == "Succeeded":
        return f"Pod {name} succeeded"
    if state.exit_code is not None:
        said = f" ({state.exit_reason})" if telling_exit_reason(state.exit_reason) else ""
        return f"Pod {name} failed with exit code {state.exit_code}{said}"
    return f"Pod {name} failed ({state.reason or 'no exit code'})"


def force_delete_if_stuck(rnd: Round, pod: dict[str, Any], now: datetime) -> None:
    """A terminating pod whose node will never confirm the kill blocks its replica's name: the taint
    manager's at once (its node stopped reporting, as the out-of-service taint would), any other 300 s past
    its deletion deadline (docs/controller.md#r8, #disruptions)."""
    meta = pod.get("metadata") or {}
    deleting = parse_time(meta.get("deletionTimestamp"))
    if deleting is None:
        return
    limit = deleting + timedelta(seconds=STUCK_TERMINATING_SECONDS)
    if deleted_by_taint_manager(pod):
        why = (
            "was deleted by the taint manager (its node is unreachable or not ready, so no kubelet will "
            "confirm the kill); force-deleting it, as the node.kubernetes.io/out-of-service taint would"
        )
    elif now >= limit:
        why = "was stuck terminating; force-deleting it"
    else:
        rnd.wake_at(limit)
        return
    rnd.actions.append(Delete("v1", "Pod", meta["name"], uid=meta.get("uid"), grace_period_seconds=0))
    rnd.events.append(Event("Warning", "ForceDelete", f"Pod {meta['name']} {why}"))


@dataclass
class Pass:
    """What every replica's decision reads, and the round it writes."""

    job: dict[str, Any]
    plan: Plan
    now: datetime
    mode: str
    resumed: bool
    may_create: bool
    running_types: set[str]
    rnd: Round


@dataclass
class Replica:
    """One desired replica: its pod (if any), what the last status recorded of it, its restarts so far and
    the uid of a pod being replaced."""

    key: tuple[str, int]
    name: str
    group: ReplicaGroup
    index: int
    prior: dict[str, Any]
    pod: dict[str, Any] | None
    state: PodState | None
    restarts: int
    replaced: str | None

    @property
    def uid(self) -> str:
        return (self.pod or {}).get("metadata", {}).get("uid", "")

    @property
    def label(self) -> str:
        """How the job names the replica: `worker-1`, or `launcher` for a single pod."""
        return f"{self.group.type}-{self.index}" if self.group.indexed else self.group.type

    def record(
        self, p: Pass, uid: str, phase: str, containers: list[dict[str, Any]], replaced: str | None
    ) -> None:
        if uid and self.pod is not None and uid == self.uid:
            node = (self.pod.get("spec") or {}).get("nodeName")
        else:
            node = self.prior.get("nodeName") if uid and uid == self.prior.get("uid") else None
        p.rnd.records[self.key] = replica_record(
            self.name, uid, phase, containers, self.restarts, replaced, node
        )
