"""A simple apps/v1 StatefulSet controller: pods ``<name>-<ordinal>`` with stable hostnames, created in
order (``OrderedReady``: the next one once the previous is Ready; ``Parallel``: all at once), removed from
the highest ordinal down, replaced when they end, and a RollingUpdate that recreates outdated pods from the
highest ordinal down to ``partition``, one at a time.

Not done here: ControllerRevisions (the revision is the template's hash, in the ``controller-revision-hash``
label and the status), volumeClaimTemplates (no PersistentVolumeClaims are served), ``minReadySeconds``.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.informer import OWNER_INDEX
from t9k_provider.kube.resources import STATEFULSETS
from t9k_provider.local.controllers.owned import (
    REVISION_LABEL,
    PodOwnerController,
    pod_from_template,
    template_hash,
)
from t9k_provider.local.controllers.podstate import pod_finished, pod_ready, pod_revision

COMPONENT = "statefulset-controller"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _ordinal(sts_name: str, pod: dict[str, Any]) -> int | None:
    name = pod["metadata"]["name"]
    prefix = f"{sts_name}-"
    tail = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


class StatefulSetController(PodOwnerController):
    """Owners: StatefulSets; children: pods."""

    resource = STATEFULSETS
    component = COMPONENT

    async def sync(self, sts: dict[str, Any]) -> None:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        name = meta["name"]
        revision = f"{name}-{template_hash(spec.get('template') or {})}"
        replicas = int(spec.get("replicas", 1))
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        pods: dict[int, dict[str, Any]] = {}
        for pod in self.children.by_index(OWNER_INDEX, meta["uid"]):
            ordinal = _ordinal(name, pod)
            if ordinal is not None:
                pods[ordinal] = pod
        busy = await self._converge(sts, pods, replicas, revision, ordered)
        if not busy:
            await self._roll(sts, pods, replicas, revision)
        await self._update_status(sts, pods, replicas, revision)

    async def _converge(
        self,
        sts: dict[str, Any],
        pods: dict[int, dict[str, Any]],
        replicas: int,
        revision: str,
        ordered: bool,
    ) -> bool:
        """Create missing pods in order, replace ended ones, remove those beyond ``replicas`` from the top;
        True while pods are still coming or going."""
        busy = False
        for ordinal in range(replicas):
            pod = pods.get(ordinal)
            if pod is not None and pod_finished(pod) and not pod["metadata"].get("deletionTimestamp"):
                await self.pod_writer.delete(sts, pod)
                busy = True
            elif pod is None:
                pods[ordinal] = await self.pod_writer.create(sts, self._pod(sts, ordinal, revision))
                busy = True
            elif not pod_ready(pod) or pod["metadata"].get("deletionTimestamp"):
                busy = True
            if busy and ordered:
                return True
        extra = sorted((o for o in pods if o >= replicas), reverse=True)
        for ordinal in extra[:1] if ordered else extra:
            if not pods[ordinal]["metadata"].get("deletionTimestamp"):
                await self.pod_writer.delete(sts, pods[ordinal])
        return busy or bool(extra)

    async def _roll(
        self, sts: dict[str, Any], pods: dict[int, dict[str, Any]], replicas: int, revision: str
    ) -> None:
        """RollingUpdate: delete the highest outdated pod at or above the partition (recreated next sync)."""
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        for ordinal in range(replicas - 1, partition - 1, -1):
            pod = pods.get(ordinal)
            if pod is not None and pod_revision(pod) != revision:
                await self.pod_writer.delete(sts, pod)
                return

    def _pod(self, sts: dict[str, Any], ordinal: int, revision: str) -> dict[str, Any]:
        name = f"{sts['metadata']['name']}-{ordinal}"
        labels = {REVISION_LABEL: revision, POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)}
        extra: dict[str, Any] = {"hostname": name}
        service = (sts.get("spec") or {}).get("serviceName")
        if service:
            extra["subdomain"] = service
        return pod_from_template(sts, name=name, labels=labels, **extra)

    async def _update_status(
        self, sts: dict[str, Any], pods: dict[int, dict[str, Any]], replicas: int, revision: str
    ) -> None:
        meta, status = sts["metadata"], dict(sts.get("status") or {})
        live = [p for p in pods.values() if not p["metadata"].get("deletionTimestamp")]
        updated = sum(pod_revision(p) == revision for p in live)
        current = status.get("currentRevision") or revision
        if updated == replicas == len(live):
            current = revision
        ready = sum(pod_ready(p) for p in live)
        new_status = {
            **status,
            "observedGeneration": meta.get("generation", 0),
            "replicas": len(live),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": sum(pod_revision(p) == current for p in live),
            "updatedReplicas": updated,
            "currentRevision": current,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        await self.write_status(sts, new_status)
