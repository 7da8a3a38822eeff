"""A simple apps/v1 DaemonSet controller: one pod on every node whose labels match the template's
``nodeSelector``, replaced when it ends, and on a RollingUpdate the outdated pod deleted before its successor
is created (``maxUnavailable`` 1 per node, no surge). A node that goes (or stops matching) loses its pod.

Not done here: tolerations and taints, node affinity beyond ``nodeSelector``, ControllerRevisions (the
revision is the template's hash in the ``controller-revision-hash`` label), ``minReadySeconds``.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.api import KubeApi
from t9k_provider.kube.informer import OWNER_INDEX, Informer
from t9k_provider.kube.resources import DAEMONSETS
from t9k_provider.local.controllers.owned import (
    REVISION_LABEL,
    PodOwnerController,
    pod_from_template,
    template_hash,
)
from t9k_provider.local.controllers.podstate import pod_active, pod_ready, pod_revision

COMPONENT = "daemonset-controller"
GENERATION_LABEL = "pod-template-generation"


def _node_affinity(node: str) -> dict[str, Any]:
    """Pins the pod to ``node``, as the DaemonSet controller does since the scheduler places its pods."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def target_node(pod: dict[str, Any]) -> str:
    """The node a DaemonSet pod is for: where it runs, else the node its affinity pins it to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or ():
        for field in term.get("matchFields") or ():
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return ""


class DaemonSetController(PodOwnerController):
    """Owners: DaemonSets; children: pods; and the Nodes they run on."""

    resource = DAEMONSETS
    component = COMPONENT

    def __init__(self, kube: KubeApi, owners: Informer, pods: Informer, nodes: Informer) -> None:
        super().__init__(kube, owners, pods)
        self.nodes = nodes

    def on_node(self, _old: dict[str, Any] | None, _new: dict[str, Any] | None) -> None:
        for ds in self.owners.items():  # a node came, went or changed its labels
            self.on_owner(None, ds)

    async def run(self) -> None:
        await self.nodes.synced.wait()
        await super().run()

    async def sync(self, ds: dict[str, Any]) -> None:
        meta, spec = ds["metadata"], ds.get("spec") or {}
        template = spec.get("template") or {}
        revision = template_hash(template)
        selector = (template.get("spec") or {}).get("nodeSelector") or {}
        wanted = {
            n["metadata"]["name"]
            for n in self.nodes.items()
            if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
        }
        owned = self.children.by_index(OWNER_INDEX, meta["uid"])
        rolling = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"
        running: list[dict[str, Any]] = []
        for node in sorted(wanted | {target_node(p) for p in owned}):
            here = [p for p in owned if target_node(p) == node]
            running += await self._sync_node(ds, node, here, node in wanted, rolling, revision)
        await self._update_status(ds, running, len(wanted), revision)

    async def _sync_node(
        self,
        ds: dict[str, Any],
        node: str,
        owned: list[dict[str, Any]],
        wanted: bool,
        rolling: bool,
        revision: str,
    ) -> list[dict[str, Any]]:
        """The DaemonSet's pods for one node: ended ones replaced, one there iff ``wanted``; returns it."""
        active = [p for p in owned if pod_active(p)] if wanted else []
        for pod in owned:  # ended pods are replaced; a pod on a node it does not fit goes
            if not pod["metadata"].get("deletionTimestamp") and (not pod_active(pod) or not wanted):
                await self.pod_writer.delete(ds, pod)
        if wanted and rolling:
            for pod in [p for p in active if pod_revision(p) != revision]:
                await self.pod_writer.delete(ds, pod)
                active.remove(pod)
        terminating = any(p["metadata"].get("deletionTimestamp") for p in owned)
        if wanted and not active and not terminating:
            meta = ds["metadata"]
            labels = {REVISION_LABEL: revision, GENERATION_LABEL: str(meta.get("generation", 1))}
            pod = pod_from_template(ds, labels=labels, affinity=_node_affinity(node))
            active.append(await self.pod_writer.create(ds, pod))
        for extra in active[1:]:
            await self.pod_writer.delete(ds, extra)
        return active[:1]

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
            "currentNumberScheduled": len(active),
            "numberMisscheduled": 0,
            "numberReady": ready,
            "updatedNumberScheduled": updated,
            "numberAvailable": ready,
            "numberUnavailable": max(0, desired - ready),
        }
        for key in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):  # omitempty
            if not new_status[key]:
                new_status[key] = None
        await self.write_status(ds, new_status)
