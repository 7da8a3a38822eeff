"""Binds unscheduled pods to the single node (default-scheduler, and the T9k scheduler simulated by it).

A pod is bound only where its requests fit the Node's allocatable (`fit`); otherwise it stays Pending with
``PodScheduled=False`` (reason Unschedulable) and a ``FailedScheduling`` event in kube-scheduler's words, and
is tried again when room frees (a pod on the node ends or goes) or the Node or a PodGroup changes, higher
priority first.

Pods of a T9k PodGroup (label `scheduler.tensorstack.dev/group-name`) are placed all together: nothing is
bound until `minMember` of them exist and that many fit at once (the T9k scheduler's gang rule), so two gangs
that do not both fit never interleave. Syncs run one at a time, and pods bound but not yet seen bound by the
informer are counted as placed (kube-scheduler's assumed pods), so room is never handed out twice.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.jobs.contract import LABEL_GROUP_NAME, T9K_SCHEDULER_NAME
from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import NODE_INDEX, Informer, by_label, object_key
from t9k_provider.kube.resources import PODGROUPS, PODS
from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.machinery import events, workloop
from t9k_provider.local.scheduler import fit

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
    def __init__(self, kube: KubeApi, pods: Informer, nodes: Informer, podgroups: Informer) -> None:
        self.kube = kube
        self.pods = pods
        self.nodes = nodes
        self.podgroups = podgroups
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self.assumed: dict[str, dict[str, Any]] = {}  # uid -> pod bound here, not yet seen bound

    def on_pod(self, old: dict[str, Any] | None, pod: dict[str, Any] | None) -> None:
        if pod is not None and schedulable(pod):
            self.queue.add(object_key(pod))
        if pod is None or (pod.get("spec") or {}).get("nodeName"):
            self.assumed.pop((old or pod or {}).get("metadata", {}).get("uid", ""), None)
        if old is not None and fit.occupies_node(old) and (pod is None or not fit.occupies_node(pod)):
            self._retry_pending()  # room freed

    def on_node_or_group(self, _old: dict[str, Any] | None, _new: dict[str, Any] | None) -> None:
        self._retry_pending()  # allocatable, or a PodGroup's minMember or priority, may have changed

    def _retry_pending(self) -> None:
        for pod in sorted((p for p in self.pods.items() if schedulable(p)), key=self._queue_order):
            self.queue.add(object_key(pod))

    def _queue_order(self, pod: dict[str, Any]) -> tuple[int, str]:
        """Higher priority first (the pod's ``spec.priority``, else its PodGroup's, the T9k job's
        ``t9kScheduler.priority``), then older first, as kube-scheduler's active queue orders pods."""
        priority = (pod.get("spec") or {}).get("priority")
        group = (pod["metadata"].get("labels") or {}).get(LABEL_GROUP_NAME)
        if priority is None and group:
            pg = self.podgroups.get(pod["metadata"].get("namespace", "default"), group) or {}
            priority = (pg.get("spec") or {}).get("priority")
        return (-int(priority or 0), pod["metadata"].get("creationTimestamp", ""))

    async def run(self) -> None:
        await self.nodes.synced.wait()
        await self.podgroups.synced.wait()
        await workloop.run(self.queue, self._sync, "scheduling pod")

    async def _sync(self, key: workloop.Key) -> None:
        pod = self.pods.get(*key)
        if pod is None or not schedulable(pod) or pod["metadata"].get("uid") in self.assumed:
            return
        node = self.nodes.get("", events.NODE_NAME)
        if node is None:  # not registered yet: its arrival retries every pending pod
            return
        group = (pod["metadata"].get("labels") or {}).get(LABEL_GROUP_NAME)
        if group:
            gang = await self._gang(pod, group)
            if gang is None:
                return
            batch, needed = gang
        else:
            batch, needed = [pod], 1
        room = fit.free_room(node, self._occupying())
        placed: list[dict[str, Any]] = []
        reasons: list[str] = []
        for member in batch:
            requests = fit.pod_requests(member)
            why = fit.insufficient(requests, room)
            if why:
                reasons = reasons or why
                continue
            room.subtract(requests)
            placed.append(member)
        if len(placed) < needed:
            message = fit.unschedulable_message(reasons)
            if group:
                message += f" PodGroup {group}: {len(placed)} of {needed} pods fit together."
            for member in batch:
                await self._unschedulable(member, message)
            return
        for member in placed:
            await self.bind(member)
        for member in batch:  # a gang already at its minimum places what fits, one pod at a time
            if all(member is not p for p in placed):
                why = fit.insufficient(fit.pod_requests(member), room)
                await self._unschedulable(member, fit.unschedulable_message(why))

    def _occupying(self) -> list[dict[str, Any]]:
        seen = self.pods.by_index(NODE_INDEX, events.NODE_NAME)
        uids = {p["metadata"].get("uid") for p in seen}
        return [p for p in seen if fit.occupies_node(p)] + [
            p for uid, p in self.assumed.items() if uid not in uids
        ]

    async def _gang(self, pod: dict[str, Any], group: str) -> tuple[list[dict[str, Any]], int] | None:
        """The group's pods waiting to be placed and how many must fit at once; None while fewer than
        ``minMember`` exist (a missing PodGroup asks for no minimum)."""
        ns = pod["metadata"].get("namespace", "default")
        pg = self.podgroups.get(ns, group) or await self._read_podgroup(ns, group)
        min_member = int((pg.get("spec") or {}).get("minMember") or 0)
        members = [
            p
            for p in self.pods.by_index(GROUP_INDEX, f"{ns}/{group}")
            if not p["metadata"].get("deletionTimestamp")
        ]
        if len(members) < min_member:
            return None
        placed = {p["metadata"].get("uid") for p in members if fit.occupies_node(p)} | self.assumed.keys()
        waiting = sorted(
            (p for p in members if schedulable(p) and p["metadata"].get("uid") not in placed),
            key=lambda p: p["metadata"]["name"],
        )
        running = sum(1 for p in members if p["metadata"].get("uid") in placed)
        return waiting, max(1, min_member - running)

    async def _read_podgroup(self, ns: str, group: str) -> dict[str, Any]:
        """A PodGroup the informer has not shown yet (its watch may lag the pods'): read it, {} if none."""
        try:
            return await self.kube.get(PODGROUPS, ns, group)
        except ApiError as exc:
            if exc.status == 404:
                return {}
            raise

    async def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        """Say why the pod waits: its PodScheduled condition, and an event whenever the reason changes."""
        status = pod.get("status") or {}
        current = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), {})
        if current.get("status") == "False" and current.get("message") == message:
            return
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
        others = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        meta = pod["metadata"]
        try:
            written = await self.kube.patch(
                PODS,
                meta.get("namespace", "default"),
                meta["name"],
                {"status": {"conditions": [*others, condition]}},
                subresource="status",
            )
        except ApiError as exc:
            if exc.status == 404:
                return
            raise
        self.pods.observe(written)
        await events.record(
            self.kube, pod, "FailedScheduling", message, component="default-scheduler", event_type="Warning"
        )

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
        seen = self.pods.get(ns, name)
        if seen is not None and not seen["spec"].get("nodeName"):  # else the informer is already ahead
            self.assumed[meta.get("uid", "")] = pod
        await events.record(
            self.kube,
            pod,
            "Scheduled",
            f"Successfully assigned {ns}/{name} to {events.NODE_NAME}",
            component="default-scheduler",
        )
