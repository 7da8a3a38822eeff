"""The apps/v1 ReplicaSet controller: as many live pods as ``spec.replicas``, made from the template and owned
by the ReplicaSet; orphans its selector matches are adopted and owned pods it no longer matches released, as
``pkg/controller/replicaset`` does; status counts replicas, fully labeled, ready and available pods."""

from __future__ import annotations

import time
from typing import Any

from t9k_provider.kube.api import ApiError
from t9k_provider.kube.informer import OWNER_INDEX, controller_ref, object_key
from t9k_provider.kube.resources import PODS, REPLICASETS
from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.controllers.owned import PodOwnerController, owner_reference, pod_from_template
from t9k_provider.local.controllers.podstate import pod_active, pod_ready, ready_since
from t9k_provider.local.machinery.selectors import SelectorError, label_selector_from_spec

COMPONENT = "replicaset-controller"
BURST = 100  # pods created or deleted in one sync, as upstream's slow-start batches allow at most


def available_at(pod: dict[str, Any], min_ready: int) -> float | None:
    """When a ready pod counts as available (``minReadySeconds`` after it became Ready); None if not ready."""
    since = ready_since(pod)
    return None if since is None else since + min_ready


class ReplicaSetController(PodOwnerController):
    """Owners: ReplicaSets; children: pods."""

    resource = REPLICASETS
    component = COMPONENT

    def on_child(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Its owner recounts; an orphan may concern every ReplicaSet of its namespace."""
        super().on_child(old, new)
        for pod in (old, new):
            if pod is not None and controller_ref(pod) is None:
                ns = object_key(pod)[0]
                for rs in self.owners.items():
                    if object_key(rs)[0] == ns:
                        self.queue.add(object_key(rs))

    async def sync(self, rs: dict[str, Any]) -> None:
        spec = rs.get("spec") or {}
        try:
            selector = label_selector_from_spec(spec.get("selector"))
        except SelectorError:
            return  # the API server validated it: nothing to do for a selector it let through
        owned = await self._claim(rs, selector)
        active = [p for p in owned if pod_active(p)]
        diff = int(spec.get("replicas", 1)) - len(active)
        if diff > 0:
            for _ in range(min(diff, BURST)):
                active.append(await self.pod_writer.create(rs, pod_from_template(rs)))
        elif diff < 0:
            for pod in sorted(active, key=_deletion_rank)[: min(-diff, BURST)]:
                await self.pod_writer.delete(rs, pod)
                active.remove(pod)
        await self._update_status(rs, active)

    async def _claim(self, rs: dict[str, Any], selector: Any) -> list[dict[str, Any]]:
        """Pods this ReplicaSet controls after adopting matching orphans and releasing owned mismatches."""
        meta = rs["metadata"]
        ns, uid = meta.get("namespace", ""), meta["uid"]
        owned = []
        for pod in self.children.by_index(OWNER_INDEX, uid):
            labels = pod["metadata"].get("labels") or {}
            if selector.matches(labels) or pod["metadata"].get("deletionTimestamp"):
                owned.append(pod)
            else:
                refs = [r for r in pod["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
                await self._set_owners(pod, refs)
        for pod in self.children.items():
            pmeta = pod["metadata"]
            if pmeta.get("namespace") != ns or controller_ref(pod) is not None or not pod_active(pod):
                continue
            if selector.matches(pmeta.get("labels") or {}):
                refs = [*(pmeta.get("ownerReferences") or ()), owner_reference(rs)]
                adopted = await self._set_owners(pod, refs)
                if adopted is not None:
                    owned.append(adopted)
        return owned

    async def _set_owners(self, pod: dict[str, Any], refs: list[dict[str, Any]]) -> dict[str, Any] | None:
        pmeta = pod["metadata"]
        patch = {"metadata": {"ownerReferences": refs, "resourceVersion": pmeta["resourceVersion"]}}
        try:
            updated = await self.kube.patch(PODS, pmeta.get("namespace", ""), pmeta["name"], patch)
        except ApiError as exc:
            if exc.status in (404, 409):
                return None  # changed meanwhile: the next sync decides again
            raise
        self.children.observe(updated)
        return updated

    async def _update_status(self, rs: dict[str, Any], active: list[dict[str, Any]]) -> None:
        meta, spec = rs["metadata"], rs.get("spec") or {}
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = time.time()
        available, next_check = 0, None
        for pod in active:
            at = available_at(pod, min_ready)
            if at is not None and at <= now:
                available += 1
            elif at is not None:
                next_check = min(next_check or at, at)
        labels = [p["metadata"].get("labels") or {} for p in active]
        status = {
            **(rs.get("status") or {}),
            "replicas": len(active),
            "fullyLabeledReplicas": sum(
                all(lb.get(k) == v for k, v in template_labels.items()) for lb in labels
            ),
            "readyReplicas": sum(pod_ready(p) for p in active),
            "availableReplicas": available,
            "observedGeneration": meta.get("generation", 0),
        }
        if next_check is not None:
            self.queue.add_after(object_key(rs), next_check - now + 0.05)
        await self.write_status(rs, status)


def _deletion_rank(pod: dict[str, Any]) -> tuple[bool, bool, bool, float]:
    """Pods to delete first (``controller.ActivePods`` order): unscheduled, not running, not ready, newest."""
    status, created = pod.get("status") or {}, pod["metadata"].get("creationTimestamp")
    return (
        bool((pod.get("spec") or {}).get("nodeName")),
        status.get("phase") == "Running",
        pod_ready(pod),
        -parse_timestamp(created).timestamp() if created else 0.0,
    )
