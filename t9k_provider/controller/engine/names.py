"""Deterministic child names, labels and owner references (spec section 3)."""

from __future__ import annotations

from typing import Any

LABEL_OWNER_NAME = "tensorstack.dev/owner-name"
LABEL_COMPONENT = "tensorstack.dev/component"
LABEL_COMPONENT_TYPE = "tensorstack.dev/component-type"
LABEL_REPLICA_TYPE = "batch.tensorstack.dev/replica-type"
LABEL_REPLICA_INDEX = "batch.tensorstack.dev/replica-index"
LABEL_JOB_UID = "batch.tensorstack.dev/job-uid"
ANNOTATION_RESTART_COUNT = "batch.tensorstack.dev/restart-count"
LABEL_GROUP_NAME = "scheduler.tensorstack.dev/group-name"
LABEL_QUEUE = "scheduler.tensorstack.dev/queue"
LABEL_ROLE = "scheduler.tensorstack.dev/role"

T9K_SCHEDULER_NAME = "t9k-scheduler"


def pod_name(job: str, replica_type: str, index: int, indexed: bool = True) -> str:
    base = f"{job}-{replica_type}".lower()
    return f"{base}-{index}" if indexed else base


def owner_reference(job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def job_labels(job: dict[str, Any]) -> dict[str, str]:
    """Labels every child carries, so `kubectl get pod -l tensorstack.dev/owner-name=<job>` works."""
    meta = job["metadata"]
    return {
        LABEL_OWNER_NAME: meta["name"],
        LABEL_COMPONENT: str(job["kind"]).lower(),
        LABEL_COMPONENT_TYPE: "user",
        LABEL_JOB_UID: meta["uid"],
    }


def child_metadata(job: dict[str, Any], name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job["metadata"].get("namespace", "default"),
        "labels": {**job_labels(job), **(labels or {})},
        "ownerReferences": [owner_reference(job)],
    }


def replica_labels(job: dict[str, Any], replica_type: str, index: int, name: str) -> dict[str, str]:
    labels = {LABEL_REPLICA_TYPE: replica_type, LABEL_REPLICA_INDEX: str(index)}
    if job["kind"] == "GenericJob":
        labels["genericjob"] = job["metadata"]["name"]
        labels["genericjob-replica"] = name
    return labels


def replica_key(obj: dict[str, Any]) -> tuple[str, int] | None:
    """(type, index) from the machine-readable labels, never from the name."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    replica_type = labels.get(LABEL_REPLICA_TYPE)
    index = labels.get(LABEL_REPLICA_INDEX)
    if replica_type is None or index is None or not str(index).isdigit():
        return None
    return replica_type, int(index)
