"""Binds unscheduled pods to the single node (default-scheduler, and the T9k scheduler simulated by it).

Pods of a T9k PodGroup (label `scheduler.tensorstack.dev/group-name`) are bound all together once
`minMember` of them exist: the gang rule of the T9k scheduler, cheap here because there is one node with
unlimited room.
"""

from __future__ import annotations

import logging
from typing import Any

from t9k_provider.local.kubelet import events
from t9k_provider.local.kubelet.kube import ApiError, Informer, Kube, WorkQueue

log = logging.getLogger(__name__)

SCHEDULERS = ("default-scheduler", "t9k-scheduler")
GROUP_LABEL = "scheduler.tensorstack.dev/group-name"
PODGROUP_API = "/apis/scheduler.tensorstack.dev/v1beta1"


def schedulable(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and spec.get("schedulerName", "default-scheduler") in SCHEDULERS
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


class Scheduler:
    def __init__(self, kube: Kube, pods: Informer) -> None:
        self.kube = kube
        self.pods = pods
        self.queue = WorkQueue()

    def on_pod(self, key: tuple[str, str]) -> None:
        pod = self.pods.cache.get(key)
        if pod is not None and schedulable(pod):
            self.queue.add(key)

    async def run(self) -> None:
        while True:
            for key in await self.queue.get_all():
                pod = self.pods.cache.get(key)
                if pod is None or not schedulable(pod):
                    continue
                try:
                    await self._schedule(pod)
                except (ApiError, OSError) as exc:
                    log.warning("scheduling %s/%s failed: %s", *key, exc)
                    self.queue.add_after(key, 1.0)

    async def _schedule(self, pod: dict[str, Any]) -> None:
        group = (pod["metadata"].get("labels") or {}).get(GROUP_LABEL)
        if group and not await self._gang_ready(pod, group):
            return
        await self.bind(pod)

    async def _gang_ready(self, pod: dict[str, Any], group: str) -> bool:
        """True once the PodGroup's minMember pods exist (a missing PodGroup does not block)."""
        ns = pod["metadata"].get("namespace", "default")
        try:
            pg = await self.kube.get(f"{PODGROUP_API}/namespaces/{ns}/podgroups/{group}")
        except ApiError as exc:
            if exc.status == 404:
                return True
            raise
        min_member = int((pg.get("spec") or {}).get("minMember") or 0)
        members = [
            p
            for p in self.pods.items()
            if p["metadata"].get("namespace") == ns
            and (p["metadata"].get("labels") or {}).get(GROUP_LABEL) == group
            and not p["metadata"].get("deletionTimestamp")
        ]
        if len(members) >= min_member:
            for other in members:
                key = (ns, other["metadata"]["name"])
                if other is not pod and schedulable(other):
                    self.queue.add(key)
            return True
        return False

    async def bind(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": meta.get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": events.NODE_NAME},
        }
        try:
            await self.kube.create(f"/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
        except ApiError as exc:
            if exc.status in (404, 409):  # deleted meanwhile, or already bound
                return
            raise
        await events.record(
            self.kube,
            pod,
            "Scheduled",
            f"Successfully assigned {ns}/{name} to {events.NODE_NAME}",
            component="default-scheduler",
        )
