"""The node lifecycle controller and its taint-based eviction, as kube-controller-manager runs them
(pkg/controller/nodelifecycle, pkg/controller/tainteviction).

Every ``MONITOR_PERIOD`` it looks at each Node: one whose kubelet neither renewed its Lease
(``kube-node-lease/<node>``) nor posted its status for ``grace`` seconds (``--node-monitor-grace-period``,
50 s as in Kubernetes 1.32; ``STARTUP_GRACE`` while its kubelet never renewed the Lease), counted by this
controller's clock from when it last saw either change, gets its conditions set to ``Unknown`` ("Kubelet
stopped posting node status."),
its pods marked not Ready, and the taint ``node.kubernetes.io/unreachable`` (NoSchedule and NoExecute); a
Node whose Ready condition is False gets ``node.kubernetes.io/not-ready``, a cordoned one
``node.kubernetes.io/unschedulable:NoSchedule`` (TaintNodesByCondition); the taints go when the cause does.
A pod on a Node with a NoExecute taint it does not tolerate is deleted at once, one that tolerates it for
``tolerationSeconds`` that long after the taint was added (the API server gives every pod 300 s for
not-ready and unreachable, DefaultTolerationSeconds), each first marked ``DisruptionTarget=True``, reason
``DeletionByTaintManager``. With no kubelet to confirm, such a pod stays Terminating until its node returns.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import NODE_INDEX, Informer
from t9k_provider.kube.resources import NODES, PODS
from t9k_provider.kube.timestamps import now_rfc3339, parse_timestamp
from t9k_provider.local.machinery import events
from t9k_provider.local.machinery.statuswrites import patch_status
from t9k_provider.local.machinery.taints import tolerates

log = logging.getLogger(__name__)

COMPONENT = "node-controller"
MONITOR_PERIOD = 1.0  # kube-controller-manager's --node-monitor-period is 5 s; a local cluster can afford 1 s
DEFAULT_GRACE = 50.0
STARTUP_GRACE = 60.0  # kube-controller-manager's --node-startup-grace-period
LEASE_NAMESPACE = "kube-node-lease"
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
MANAGED = (UNREACHABLE, NOT_READY, UNSCHEDULABLE)
STATUS_UNKNOWN = "Kubelet stopped posting node status."
NODE_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


def _time(value: Any) -> float | None:
    if not value:
        return None
    try:
        return parse_timestamp(str(value)).timestamp()
    except ValueError:
        return None


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == kind), {})


@dataclass(frozen=True)
class Probe:
    """What the controller last heard from a node's kubelet (its Lease's ``renewTime`` and its Ready
    heartbeat, as written) and when it first saw that, by its own clock: kube-controller-manager's
    ``probeTimestamp``. Silence is counted from it, never from the timestamps' values, so a controller that
    starts (or a cluster started again after a long stop, its Leases old) gives every node a whole grace."""

    heard: tuple[Any, Any]
    at: float


def probed(previous: Probe | None, node: dict[str, Any], lease: dict[str, Any] | None, now: float) -> Probe:
    """``previous`` while the kubelet said nothing new, else what it said now."""
    heard = (
        ((lease or {}).get("spec") or {}).get("renewTime"),
        condition(node, "Ready").get("lastHeartbeatTime"),
    )
    return previous if previous is not None and previous.heard == heard else Probe(heard, now)


def stopped_reporting(
    node: dict[str, Any], lease: dict[str, Any] | None, probe: Probe, now: float, grace: float
) -> bool:
    """Whether the kubelet has been silent for longer than its grace (and the node still says otherwise):
    ``grace``, or ``STARTUP_GRACE`` for a kubelet that never renewed the node's Lease (the server registers
    the Nodes when it starts, the kubelets come up after; upstream's ``--node-startup-grace-period``)."""
    if condition(node, "Ready").get("status") == "Unknown":
        return False
    return now - probe.at > (grace if lease is not None else max(grace, STARTUP_GRACE))


def unknown_conditions(node: dict[str, Any], now: str) -> list[dict[str, Any]]:
    """The node's conditions as the controller writes them for a silent kubelet: every one Unknown."""
    out = []
    for kind in NODE_CONDITIONS:
        current = condition(node, kind)
        changed = current.get("status") != "Unknown"
        out.append(
            {
                **current,
                "type": kind,
                "status": "Unknown",
                "reason": "NodeStatusUnknown",
                "message": STATUS_UNKNOWN,
                "lastHeartbeatTime": current.get("lastHeartbeatTime") or now,
                "lastTransitionTime": now if changed else current.get("lastTransitionTime", now),
            }
        )
    conditions = (node.get("status") or {}).get("conditions") or ()
    return out + [c for c in conditions if c.get("type") not in NODE_CONDITIONS]


def wanted_taints(node: dict[str, Any], now: str) -> list[dict[str, Any]]:
    """The node's taints with the managed ones as its conditions and ``spec.unschedulable`` say; a taint
    that stays keeps the time it was added (the taint manager counts tolerations from it)."""
    current = list((node.get("spec") or {}).get("taints") or [])
    ready = condition(node, "Ready").get("status")
    want: set[tuple[str, str]] = set()
    if ready == "Unknown":
        want |= {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
    elif ready == "False":
        want |= {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")}
    if (node.get("spec") or {}).get("unschedulable"):
        want.add((UNSCHEDULABLE, "NoSchedule"))
    kept = [t for t in current if t.get("key") not in MANAGED or (t["key"], t.get("effect")) in want]
    have = {(t["key"], t.get("effect")) for t in kept}
    added = [
        {"key": key, "effect": effect, **({"timeAdded": now} if effect == "NoExecute" else {})}
        for key, effect in sorted(want - have)
    ]
    return kept + added


def eviction_time(pod: dict[str, Any], taints: list[dict[str, Any]], now: float) -> float | None:
    """When the taint manager deletes ``pod`` for the node's NoExecute ``taints``: now for one it does not
    tolerate, else the earliest end of a bounded toleration counted from the taint's ``timeAdded``; None
    when it tolerates them all for ever (or there are none)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    due: float | None = None
    for taint in (t for t in taints if t.get("effect") == "NoExecute"):
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            return now
        bounds = [t["tolerationSeconds"] for t in matching if t.get("tolerationSeconds") is not None]
        if len(bounds) < len(matching):
            continue  # one tolerates it for ever
        added = _time(taint.get("timeAdded")) or now
        end = added + max(0.0, float(min(bounds)))
        due = end if due is None else min(due, end)
    return due


class NodeLifecycleController:
    """Watches Nodes, their Leases and the pods on them; writes conditions and taints, evicts by taint."""

    def __init__(
        self, kube: KubeApi, nodes: Informer, leases: Informer, pods: Informer, grace: float = DEFAULT_GRACE
    ) -> None:
        """``pods`` must be indexed by node (NODE_INDEX); ``leases`` watch kube-node-lease."""
        self.kube = kube
        self.nodes = nodes
        self.leases = leases
        self.pods = pods
        self.grace = grace
        self.evicting: set[str] = set()  # uids deleted by taint, not yet seen terminating
        self.probes: dict[str, Probe] = {}  # by node

    async def run(self) -> None:
        for informer in (self.nodes, self.leases, self.pods):
            await informer.synced.wait()
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            nodes = self.nodes.items()
            names = {n["metadata"]["name"] for n in nodes}
            self.probes = {name: p for name, p in self.probes.items() if name in names}  # nodes deleted
            for node in nodes:
                name = node["metadata"]["name"]
                try:
                    await self.sync(node)
                except (ApiError, OSError) as exc:
                    log.warning("node %s: sync failed, retrying in %.0fs: %s", name, MONITOR_PERIOD, exc)
                except Exception:
                    log.exception("node %s: sync failed, retrying in %.0fs", name, MONITOR_PERIOD)
            await asyncio.sleep(max(0.0, MONITOR_PERIOD - (loop.time() - now)))

    async def sync(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        wall = time.time()
        lease = self.leases.get(LEASE_NAMESPACE, name)
        self.probes[name] = probe = probed(self.probes.get(name), node, lease, wall)
        if stopped_reporting(node, lease, probe, wall, self.grace):
            node = await self._mark_unknown(node)
        taints = wanted_taints(node, now_rfc3339())
        if taints != list((node.get("spec") or {}).get("taints") or []):
            node = await self.kube.patch(NODES, None, name, {"spec": {"taints": taints}})
            self.nodes.observe(node)
        await self._evict(node, taints, wall)

    async def _mark_unknown(self, node: dict[str, Any]) -> dict[str, Any]:
        name = node["metadata"]["name"]
        log.warning("node %s: %s", name, STATUS_UNKNOWN)
        now = now_rfc3339()
        patch = {"status": {"conditions": unknown_conditions(node, now)}}
        written = await self.kube.patch(NODES, None, name, patch, subresource="status", strategic=True)
        self.nodes.observe(written)
        node_ref = {**written, "apiVersion": "v1", "kind": "Node"}
        await events.record(
            self.kube, {**node_ref, "metadata": {**written["metadata"], "namespace": "default"}},
            "NodeNotReady", f"Node {name} status is now: NodeNotReady", component=COMPONENT,
        )  # fmt: skip
        for pod in self.pods.by_index(NODE_INDEX, name):
            await self._mark_pod_not_ready(pod, now)
        return written

    async def _mark_pod_not_ready(self, pod: dict[str, Any], now: str) -> None:
        """MarkPodsNotReady: the pod's Ready condition False, so its Services stop sending it traffic."""
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        ready = condition(pod, "Ready")
        if ready.get("status") == "False":
            return
        mark = {"type": "Ready", "status": "False", "lastProbeTime": None, "lastTransitionTime": now}
        await patch_status(self.kube, PODS, pod, {"conditions": [mark]}, self.pods, strategic=True)

    async def _evict(self, node: dict[str, Any], taints: list[dict[str, Any]], now: float) -> None:
        for pod in self.pods.by_index(NODE_INDEX, node["metadata"]["name"]):
            meta = pod["metadata"]
            ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if meta.get("deletionTimestamp") or ended:
                self.evicting.discard(meta.get("uid", ""))
                continue
            due = eviction_time(pod, taints, now)
            if due is None or due > now or meta.get("uid") in self.evicting:
                continue
            await self._delete_for_taint(pod)

    async def _delete_for_taint(self, pod: dict[str, Any]) -> None:
        """Record the eviction, then mark and delete the pod: the event first, as Kubernetes' taint
        manager emits it, so whoever sees the pod deleted also finds why."""
        meta = pod["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        message = f"Marking for deletion Pod {ns}/{name}"
        component = "taint-eviction-controller"
        await events.record(self.kube, pod, "TaintManagerEviction", message, component=component)
        mark = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
            "lastTransitionTime": now_rfc3339(),
        }
        if not await patch_status(self.kube, PODS, pod, {"conditions": [mark]}, self.pods, strategic=True):
            return
        try:
            await self.kube.delete(PODS, ns, name, uid=meta.get("uid"))
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise
            return
        self.evicting.add(meta.get("uid", ""))
