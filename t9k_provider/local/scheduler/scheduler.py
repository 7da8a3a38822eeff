"""Binds unscheduled pods to the cluster's nodes (default-scheduler, and the T9k scheduler simulated by it).

A pod is bound to a node that passes the filters (`filters`: cordon, taints, node selector and affinity) and
has room (`fit`), the least allocated one first (`placement`); otherwise it stays Pending with
``PodScheduled=False`` (reason Unschedulable) and a ``FailedScheduling`` event in kube-scheduler's words,
and is tried again when room frees (a pod ends or goes) or a Node or PodGroup changes, higher priority first.

Pods of a T9k PodGroup (label `scheduler.tensorstack.dev/group-name`) are placed all together, across nodes
if need be: nothing is bound until `minMember` of them exist and that many fit at once (the T9k scheduler's
gang rule), so two gangs that do not both fit never interleave. Syncs run one at a time, and pods bound but
not yet seen bound by the informer are counted as placed (kube-scheduler's assumed pods), so room is never
handed out twice.

A pod or gang that fits nowhere preempts pods of lower priority (`Scheduler.priority`) whose going lets
it fit, whole gangs at a time, never half of one (`placement.preempt`): each victim gets
``DisruptionTarget=True`` (reason PreemptionByScheduler) and a ``Preempted`` event, and is deleted
gracefully; the preemptor's ``status.nominatedNodeName`` says where it will go, and the room it waits for
is kept from pods of lower priority. No second preemption is decided while victims still terminate.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from t9k_provider.jobs.contract import LABEL_GROUP_NAME, T9K_SCHEDULER_NAME
from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import NODE_INDEX, Informer, by_label, object_key
from t9k_provider.kube.resources import PODGROUPS, PODS
from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.machinery import events, workloop
from t9k_provider.local.machinery.statuswrites import patch_status
from t9k_provider.local.scheduler import fit, placement
from t9k_provider.local.scheduler.admission import GROUP_INDEX, Admission, queue_name
from t9k_provider.local.scheduler.usage import NodeUsage

SCHEDULER = "default-scheduler"
SCHEDULERS = (SCHEDULER, T9K_SCHEDULER_NAME)
NOMINATED_INDEX = "nominated"  # pods by status.nominatedNodeName


def by_nominated_node(pod: dict[str, Any]) -> list[str]:
    node = (pod.get("status") or {}).get("nominatedNodeName")
    return [node] if node else []


#: What the pod informer must index for the scheduler.
POD_INDEXERS = {GROUP_INDEX: by_label(LABEL_GROUP_NAME), NOMINATED_INDEX: by_nominated_node}
PREEMPTED = "PreemptionByScheduler"


def schedulable(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and spec.get("schedulerName", SCHEDULER) in SCHEDULERS
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


def _preempted(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "DisruptionTarget" and c.get("reason") == PREEMPTED for c in conditions)


class Scheduler:
    """``queues`` and ``namespaces`` (informers of Queues and Namespaces): PodGroups are admitted by their
    Queue before any pod of theirs is placed (`admission`); without them, Queues are not enforced."""

    def __init__(
        self,
        kube: KubeApi,
        pods: Informer,
        nodes: Informer,
        podgroups: Informer,
        queues: Informer | None = None,
        namespaces: Informer | None = None,
    ) -> None:
        self.kube = kube
        self.pods = pods
        self.nodes = nodes
        self.podgroups = podgroups
        self.admission = (
            Admission(kube, pods, podgroups, queues, namespaces)
            if queues is not None and namespaces is not None
            else None
        )
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self.assumed: dict[str, dict[str, Any]] = {}  # uid -> pod bound here (its nodeName set), not yet seen
        self.usage = NodeUsage()

    def on_pod(self, old: dict[str, Any] | None, pod: dict[str, Any] | None) -> None:
        self.usage.on_pod(old, pod)
        if pod is not None and schedulable(pod):
            self.queue.add(object_key(pod))
        if pod is None or (pod.get("spec") or {}).get("nodeName"):
            self.assumed.pop((old or pod or {}).get("metadata", {}).get("uid", ""), None)
        if old is not None and fit.occupies_node(old) and (pod is None or not fit.occupies_node(pod)):
            self._retry_pending()  # room freed

    def on_node_or_group(self, _old: dict[str, Any] | None, _new: dict[str, Any] | None) -> None:
        self._retry_pending()  # allocatable, taints, a PodGroup's minMember or priority may have changed

    def _retry_pending(self) -> None:
        for pod in sorted((p for p in self.pods.items() if schedulable(p)), key=self._queue_order):
            self.queue.add(object_key(pod))

    def priority(self, pod: dict[str, Any]) -> int:
        """The pod's priority: its PriorityClass's (``spec.priority``, which admission sets) when it names
        one, else its PodGroup's (the T9k job's ``t9kScheduler.priority``), else ``spec.priority``."""
        spec = pod.get("spec") or {}
        group = (pod["metadata"].get("labels") or {}).get(LABEL_GROUP_NAME)
        if group and not spec.get("priorityClassName"):
            pg = self.podgroups.get(pod["metadata"].get("namespace", "default"), group) or {}
            if (pg.get("spec") or {}).get("priority") is not None:
                return int(pg["spec"]["priority"])
        return int(spec.get("priority") or 0)

    def _queue_order(self, pod: dict[str, Any]) -> tuple[int, str]:
        """Higher priority first, then older first, as kube-scheduler's active queue orders pods."""
        return (-self.priority(pod), pod["metadata"].get("creationTimestamp", ""))

    def preemptible(self, pod: dict[str, Any]) -> bool:
        """Whether the pod may be a victim: not when its PodGroup's Queue says ``preemptible: false``."""
        group = (pod["metadata"].get("labels") or {}).get(LABEL_GROUP_NAME)
        pg = self.podgroups.get(pod["metadata"].get("namespace", "default"), group) if group else None
        queue = self.admission.queue(queue_name(pg)) if self.admission is not None and pg else None
        return queue is None or queue.preemptible

    async def run(self) -> None:
        await self.nodes.synced.wait()
        await self.podgroups.synced.wait()
        if self.admission is not None:
            await self.admission.queues.synced.wait()
            await self.admission.namespaces.synced.wait()
        await workloop.run(self.queue, self._sync, "scheduling pod")

    async def _sync(self, key: workloop.Key) -> None:
        pod = self.pods.get(*key)
        if pod is None or not schedulable(pod) or pod["metadata"].get("uid") in self.assumed:
            return
        nodes = sorted(self.nodes.items(), key=lambda n: n["metadata"]["name"])
        if not nodes:  # none registered yet: a Node's arrival retries every pending pod
            return
        group = (pod["metadata"].get("labels") or {}).get(LABEL_GROUP_NAME)
        if group:
            gang = await self._gang(pod, group)
            if gang is None:
                return
            batch, needed, pg = gang
            if self.admission is not None and queue_name(pg):
                verdict = await self.admission.admit(pg)
                if not verdict.admitted:  # waits whole in its Queue: no pod of it is placed
                    for member in batch:
                        await self._unschedulable(member, verdict.message)
                    return
                queue = self.admission.queue(queue_name(pg))
                nodes = [n for n in nodes if queue is None or queue.allows_node(n)]
        else:
            batch, needed = [pod], 1
        own, members = self.priority(pod), {placement.uid(p) for p in batch}
        plan = placement.place(batch, nodes, self._used(own, members))
        if len(plan.nodes) < needed:
            await self._unplaced(batch, needed, group, nodes, self._occupying(own, members), plan)
            return
        for member in batch:
            if (node := plan.nodes.get(placement.uid(member))) is not None:
                await self.bind(member, node)
        for member in batch:  # a gang already at its minimum places what fits, one pod at a time
            if placement.uid(member) not in plan.nodes:
                await self._unschedulable(member, fit.unschedulable_message(plan.reasons, len(nodes)))

    async def _unplaced(
        self,
        batch: list[dict[str, Any]],
        needed: int,
        group: str | None,
        nodes: list[dict[str, Any]],
        occupying: dict[str, list[dict[str, Any]]],
        plan: placement.Placement,
    ) -> None:
        """Too few of the batch fit: preempt where lower-priority pods hold the room; say why it waits."""
        message = fit.unschedulable_message(plan.reasons, len(nodes))
        if group:
            message += f" PodGroup {group}: {len(plan.nodes)} of {needed} pods fit together."
        if any(_preempted(p) for pods in occupying.values() for p in pods):
            message += " Waiting for preempted pods to terminate."
        else:
            preemption = placement.preempt(batch, needed, nodes, occupying, self.priority, self.preemptible)
            if preemption is not None:
                await self._preempt(batch, preemption)
                message += f" Preempting {len(preemption.victims)} pod(s) of lower priority."
        for member in batch:
            await self._unschedulable(member, message)

    def _used(self, priority: int, batch: set[str]) -> dict[str, fit.Requests]:
        """What `_occupying`'s pods request on each node, from the running totals (`usage`) and the few pods
        they do not hold yet: assumed ones, and pending ones nominated there."""
        names = [node["metadata"]["name"] for node in self.nodes.items()]
        used = {name: self.usage.used(name) for name in names}
        for pod in self.assumed.values():
            if not self.usage.counts(pod):
                used.setdefault(pod["spec"]["nodeName"], Counter()).update(fit.pod_requests(pod))
        for node, pods in self._nominated(priority, batch).items():
            total = used.setdefault(node, Counter())
            for pod in pods:
                total.update(fit.pod_requests(pod))
        return used

    def _nominated(self, priority: int, batch: set[str]) -> dict[str, list[dict[str, Any]]]:
        """Pending pods nominated to a node by a preemption, not of the batch nor of lower priority than it:
        the room their victims leave is kept for them."""
        out: dict[str, list[dict[str, Any]]] = {}
        for node in self.nodes.items():
            name = node["metadata"]["name"]
            for pod in self.pods.by_index(NOMINATED_INDEX, name):
                if schedulable(pod) and placement.uid(pod) not in batch and self.priority(pod) >= priority:
                    out.setdefault(name, []).append(pod)
        return out

    def _occupying(self, priority: int, batch: set[str]) -> dict[str, list[dict[str, Any]]]:
        """The pods that use each node's room: bound ones that have not ended, assumed ones, and pending ones
        nominated there by a preemption and not of lower priority (their room is kept for them)."""
        out: dict[str, list[dict[str, Any]]] = {}
        seen: set[str] = set()
        for node in self.nodes.items():
            name = node["metadata"]["name"]
            bound = self.pods.by_index(NODE_INDEX, name)
            seen |= {placement.uid(p) for p in bound}
            out[name] = [p for p in bound if fit.occupies_node(p)]
        for uid, pod in self.assumed.items():
            if uid not in seen:
                out.setdefault(pod["spec"]["nodeName"], []).append(pod)
        for node, pods in self._nominated(priority, batch).items():
            out.setdefault(node, []).extend(pods)
        return out

    async def _gang(
        self, pod: dict[str, Any], group: str
    ) -> tuple[list[dict[str, Any]], int, dict[str, Any]] | None:
        """The group's pods waiting to be placed, how many must fit at once, and the PodGroup ({} if none);
        None while fewer than ``minMember`` exist (a missing PodGroup asks for no minimum)."""
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
        placed = {placement.uid(p) for p in members if fit.occupies_node(p)} | self.assumed.keys()
        waiting = sorted(
            (p for p in members if schedulable(p) and placement.uid(p) not in placed),
            key=lambda p: p["metadata"]["name"],
        )
        running = sum(1 for p in members if placement.uid(p) in placed)
        return waiting, max(1, min_member - running), pg

    async def _read_podgroup(self, ns: str, group: str) -> dict[str, Any]:
        """A PodGroup the informer has not shown yet (its watch may lag the pods'): read it, {} if none."""
        try:
            return await self.kube.get(PODGROUPS, ns, group)
        except ApiError as exc:
            if exc.status == 404:
                return {}
            raise

    async def _preempt(self, batch: list[dict[str, Any]], preemption: placement.Preemption) -> None:
        """Evict the victims (DisruptionTarget, then a graceful delete) and nominate the batch's nodes."""
        first = batch[0]
        own = self.priority(first)
        group = (first["metadata"].get("labels") or {}).get(LABEL_GROUP_NAME)
        ns = first["metadata"].get("namespace", "default")
        who = f"PodGroup {ns}/{group}" if group else f"pod {ns}/{first['metadata']['name']}"
        for victim in preemption.victims:
            why = f"{SCHEDULER}: preempting to accommodate a higher priority pod ({who}, priority {own} > "
            why += f"{self.priority(victim)})"
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": PREEMPTED,
                "message": why,
                "lastTransitionTime": now_rfc3339(),
            }
            if not await patch_status(
                self.kube, PODS, victim, {"conditions": [condition]}, self.pods, strategic=True
            ):
                continue
            meta = victim["metadata"]
            try:
                await self.kube.delete(
                    PODS, meta.get("namespace", "default"), meta["name"], uid=meta.get("uid")
                )
            except ApiError as exc:
                if exc.status not in (404, 409):
                    raise
            node = (victim.get("spec") or {}).get("nodeName", "")
            message = f"Preempted by {who} on node {node} (priority {own} > {self.priority(victim)})"
            await events.record(self.kube, victim, "Preempted", message, component=SCHEDULER)
        for member in batch:
            nominated = preemption.placement.nodes.get(placement.uid(member))
            if nominated and (member.get("status") or {}).get("nominatedNodeName") != nominated:
                await patch_status(
                    self.kube, PODS, member, {"nominatedNodeName": nominated}, self.pods, strategic=True
                )

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
        if not await patch_status(
            self.kube, PODS, pod, {"conditions": [condition]}, self.pods, strategic=True
        ):
            return
        await events.record(
            self.kube, pod, "FailedScheduling", message, component=SCHEDULER, event_type="Warning"
        )

    async def bind(self, pod: dict[str, Any], node: str) -> None:
        meta = pod["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": meta.get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            await self.kube.create(PODS, ns, binding, name=name, subresource="binding")
        except ApiError as exc:
            if exc.status in (404, 409):  # deleted meanwhile, or already bound
                return
            raise
        seen = self.pods.get(ns, name)
        if seen is not None and not seen["spec"].get("nodeName"):  # else the informer is already ahead
            self.assumed[meta.get("uid", "")] = {**pod, "spec": {**pod["spec"], "nodeName": node}}
        await events.record(
            self.kube, pod, "Scheduled", f"Successfully assigned {ns}/{name} to {node}", component=SCHEDULER
        )
