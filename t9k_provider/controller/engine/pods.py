"""Pod and per-replica Service manifests built from a compiled replica template."""

from __future__ import annotations

from typing import Any

from t9k_provider.jobs.contract import (
    ANNOTATION_JOB_RESTARTS,
    ANNOTATION_RESTART_COUNT,
    LABEL_GROUP_NAME,
    LABEL_QUEUE,
    LABEL_ROLE,
    T9K_SCHEDULER_NAME,
)

from .names import child_metadata, pod_name, replica_labels
from .plan import ModeOverride, Plan, ReplicaGroup

#: On the pod of a group's launcher (`ReplicaGroup.relaunch_on_resize`): how many replicas of its group (the
#: workers it starts the training on) it was started with (docs/controller.md#elastic-relaunch).
ANNOTATION_LAUNCHED_WORKERS = "batch.tensorstack.dev/launched-workers"


def training_container(spec: dict[str, Any], name: str) -> dict[str, Any] | None:
    containers = spec.get("containers") or []
    return next((c for c in containers if c.get("name") == name), containers[0] if containers else None)


def apply_override(spec: dict[str, Any], container_name: str, override: ModeOverride) -> None:
    """Debug / resume: replace the training container's command (and args), drop init containers."""
    container = training_container(spec, container_name)
    if container is not None and override.command is not None:
        container["command"] = list(override.command)
        container["args"] = list(override.args or ())
        if not container["args"]:
            container.pop("args")
    elif container is not None and override.args is not None:
        container["args"] = list(override.args)
    if override.skip_init_container:
        spec.pop("initContainers", None)


def mode_override(plan: Plan, group: ReplicaGroup, index: int, resumed: bool) -> ModeOverride | None:
    """Replica `index`'s own entry, else its type's: in debug mode (a type not listed, or an entry without a
    command, runs the group's debug command), else after a resume."""
    if plan.debug is not None:
        override = plan.debug.get((group.type, index), plan.debug.get(group.type))
        if override is not None and override.command is None:
            return ModeOverride(command=group.debug_command, skip_init_container=override.skip_init_container)
        return override
    return plan.resume.get((group.type, index), plan.resume.get(group.type)) if resumed else None


def build_pod(
    job: dict[str, Any],
    plan: Plan,
    group: ReplicaGroup,
    index: int,
    restarts: int,
    resumed: bool,
    job_restarts: int | None = None,
) -> dict[str, Any]:
    """Replica `index`'s pod; `restarts` are its own (budgeted) ones, `job_restarts` the job's whole restart
    it belongs to (None: the job never restarts as a whole)."""
    name = pod_name(job["metadata"]["name"], group.type, index, group.indexed)
    template = group.template(index)
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    labels = replica_labels(job, group.type, index, name)
    if plan.scheduler is not None:
        labels.update(
            {
                LABEL_GROUP_NAME: job["metadata"]["name"],
                LABEL_QUEUE: plan.scheduler.queue,
                LABEL_ROLE: group.type,
            }
        )
        spec["schedulerName"] = T9K_SCHEDULER_NAME
    metadata = child_metadata(job, name)
    # Template labels are kept, but never override the controller's own keys.
    metadata["labels"] = {**(meta.get("labels") or {}), **metadata["labels"], **labels}
    metadata["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_RESTART_COUNT: str(restarts)}
    if job_restarts is not None:
        metadata["annotations"][ANNOTATION_JOB_RESTARTS] = str(job_restarts)
    if group.relaunch_on_resize == index:
        metadata["annotations"][ANNOTATION_LAUNCHED_WORKERS] = str(group.replicas)
    # Restarts are the controller's job (T9k forces Never), so the kubelet never restarts in place.
    spec["restartPolicy"] = "Never"
    override = mode_override(plan, group, index, resumed)
    if override is not None:
        apply_override(spec, group.training_container, override)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def build_service(job: dict[str, Any], group: ReplicaGroup, index: int) -> dict[str, Any]:
    """Headless, and published before readiness so peers resolve it while it starts
    (docs/controller.md#r4)."""
    name = pod_name(job["metadata"]["name"], group.type, index, group.indexed)
    labels = replica_labels(job, group.type, index, name)
    metadata = child_metadata(job, name, labels)
    selector = {k: v for k, v in metadata["labels"].items() if k.startswith("batch.tensorstack.dev/")}
    ports = [
        {
            k: v
            for k, v in {
                **p,
                "protocol": p.get("protocol", "TCP"),
                "targetPort": p.get("targetPort", p["port"]),
            }.items()
            if k in ("name", "port", "protocol", "targetPort")
        }
        for p in group.service_ports
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": selector, "ports": ports},
    }
