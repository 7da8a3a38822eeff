"""Deterministic child names, labels and owner references (docs/controller.md#children-names-and-labels);
the label keys are the contract's (`t9k_provider.jobs.contract`)."""

from __future__ import annotations

from typing import Any

from t9k_provider.jobs.contract import (
    LABEL_COMPONENT,
    LABEL_COMPONENT_TYPE,
    LABEL_GENERICJOB,
    LABEL_GENERICJOB_REPLICA,
    LABEL_JOB_UID,
    LABEL_OWNER_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)


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
        labels[LABEL_GENERICJOB] = job["metadata"]["name"]
        labels[LABEL_GENERICJOB_REPLICA] = name
    return labels


def replica_key(obj: dict[str, Any]) -> tuple[str, int] | None:
    """(type, index) from the machine-readable labels, never from the name."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    replica_type = labels.get(LABEL_REPLICA_TYPE)
    index = labels.get(LABEL_REPLICA_INDEX)
    if replica_type is None or index is None or not str(index).isdigit():
        return None
    return replica_type, int(index)
