"""A simple apps/v1 DaemonSet controller for the local cluster's one node: one pod there when the
template's ``nodeSelector`` matches the node's labels (none otherwise), replaced when it ends, and on a
RollingUpdate the outdated pod deleted before its successor is created (``maxUnavailable`` 1, no surge).

Not done here: tolerations and taints, node affinity beyond ``nodeSelector``, ControllerRevisions (the
revision is the template's hash in the ``controller-revision-hash`` label), ``minReadySeconds``.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.informer import OWNER_INDEX
from t9k_provider.kube.resources import DAEMONSETS, NODES
from t9k_provider.local.controllers.owned import (
    REVISION_LABEL,
    PodOwnerController,
    pod_from_template,
    template_hash,
)
from t9k_provider.local.controllers.podstate import pod_active, pod_ready, pod_revision
from t9k_provider.local.machinery.events import NODE_NAME

COMPONENT = "daemonset-controller"
GENERATION_LABEL = "pod-template-generation"


def _node_affinity() -> dict[str, Any]:
    """Pins the pod to the node, as the DaemonSet controller does since the scheduler places its pods."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_NAME]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


class DaemonSetController(PodOwnerController):
    """Owners: DaemonSets; children: pods."""

    resource = DAEMONSETS
    component = COMPONENT

    async def sync(self, ds: dict[str, Any]) -> None:
        meta, spec = ds["metadata"], ds.get("spec") or {}
        template = spec.get("template") or {}
        revision = template_hash(template)
        node = await self.kube.get(NODES, None, NODE_NAME)
        node_labels = node["metadata"].get("labels") or {}
        selector = (template.get("spec") or {}).get("nodeSelector") or {}
        wanted = all(node_labels.get(k) == v for k, v in selector.items())
        owned = self.children.by_index(OWNER_INDEX, meta["uid"])
        active = [p for p in owned if pod_active(p)]
        for pod in owned:  # ended pods are replaced; a pod on a node it does not fit goes
            if not pod["metadata"].get("deletionTimestamp") and (not pod_active(pod) or not wanted):
                await self.pod_writer.delete(ds, pod)
        if not wanted:
            active = []
        rolling = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"
        if wanted and rolling:
            outdated = [p for p in active if pod_revision(p) != revision]
            for pod in outdated:
                await self.pod_writer.delete(ds, pod)
                active.remove(pod)
        terminating = any(p["metadata"].get("deletionTimestamp") for p in owned)
        if wanted and not active and not terminating:
            labels = {REVISION_LABEL: revision, GENERATION_LABEL: str(meta.get("generation", 1))}
            pod = pod_from_template(ds, labels=labels, affinity=_node_affinity())
            active.append(await self.pod_writer.create(ds, pod))
        for extra in active[1:]:
            await self.pod_writer.delete(ds, extra)
        await self._update_status(ds, active[:1], int(wanted), revision)

    async def _update_status(
        self, ds: dict[str, Any], active: list[dict[str, Any]], desired: int, revision: str
    ) -> None:
        meta, status = ds["metadata"], dict(ds.get("status") or {})
        ready = sum(pod_ready(p) for p in active)
        updated = sum(pod_revision(p) == revision for p in active)
        new_status: dict[str, Any] = {
            **status,
            "observedGeneration": meta.get("generation", 0),
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": len(active) if desired else 0,
            "numberMisscheduled": 0 if desired else len(active),
            "numberReady": ready,
            "updatedNumberScheduled": updated,
            "numberAvailable": ready,
            "numberUnavailable": max(0, desired - ready),
        }
        for key in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):  # omitempty
            if not new_status[key]:
                new_status[key] = None
        await self.write_status(ds, new_status)
