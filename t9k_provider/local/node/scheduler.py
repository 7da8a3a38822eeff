"""Binds unscheduled pods to the single node (default-scheduler, and the T9k scheduler simulated by it).

Pods of a T9k PodGroup (label `scheduler.tensorstack.dev/group-name`) are bound all together once
`minMember` of them exist: the gang rule of the T9k scheduler, cheap here because there is one node with
unlimited room.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.jobs.contract import LABEL_GROUP_NAME, T9K_SCHEDULER_NAME
from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import Informer, by_label, object_key
from t9k_provider.kube.resources import PODGROUPS, PODS
from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.node import events, workloop

SCHEDULERS = ("default-scheduler", T9K_SCHEDULER_NAME)
GROUP_INDEX = "pod-group"  # pods by "<namespace>/<PodGroup name>"
POD_INDEXERS = {GROUP_INDEX: by_label(LABEL_GROUP_NAME)}  # what the pod informer must index for the scheduler


def schedulable(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and spec.get("schedulerName", "default-scheduler") in SCHEDULERS
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


class Scheduler:
    def __init__(self, kube: KubeApi, pods: Informer) -> None:
        self.kube = kube
        self.pods = pods
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()

    def on_pod(self, _old: dict[str, Any] | None, pod: dict[str, Any] | None) -> None:
        if pod is not None and schedulable(pod):
            self.queue.add(object_key(pod))

    async def run(self) -> None:
        await workloop.run(self.queue, self._sync, "scheduling pod")

    async def _sync(self, key: workloop.Key) -> None:
        pod = self.pods.get(*key)
        if pod is None or not schedulable(pod):
            return
        group = (pod["metadata"].get("labels") or {}).get(LABEL_GROUP_NAME)
        if group and not await self._gang_ready(pod, group):
            return
        await self.bind(pod)

    async def _gang_ready(self, pod: dict[str, Any], group: str) -> bool:
        """True once the PodGroup's minMember pods exist (a missing PodGroup does not block)."""
        ns = pod["metadata"].get("namespace", "default")
        try:
            pg = await self.kube.get(PODGROUPS, ns, group)
        except ApiError as exc:
            if exc.status == 404:
                return True
            raise
        min_member = int((pg.get("spec") or {}).get("minMember") or 0)
        members = [
            p
            for p in self.pods.by_index(GROUP_INDEX, f"{ns}/{group}")
            if not p["metadata"].get("deletionTimestamp")
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
            await self.kube.create(PODS, ns, binding, name=name, subresource="binding")
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
