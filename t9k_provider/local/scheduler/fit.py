"""Whether pods fit on the node, as kube-scheduler's NodeResourcesFit judges it: pure functions of pod specs
and the Node's allocatable, so the scheduler's rule is tested without a cluster.

A pod's request is its effective request (``resource.PodRequests``): the larger of the sum of its containers
(plus restartable init containers, the sidecars, which keep running) and each plain init container on its
own (plus the sidecars started before it), plus ``spec.overhead``. Only non-terminated pods on the node use
room.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from t9k_provider.local.machinery.quantity import parse_quantity

Requests = Counter[str]  # resource name -> exact amount (cpu in cores, memory in bytes)
PODS = "pods"  # the allocatable entry that counts pods, one per pod


def _container_requests(container: dict[str, Any]) -> Requests:
    resources = container.get("resources") or {}
    named = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}  # defaulted per name
    out: Requests = Counter()
    for name, value in named.items():
        amount = parse_quantity(value)
        if amount is not None:
            out[name] = amount
    return out


def _max(a: Requests, b: Requests) -> Requests:
    return Counter({name: max(a[name], b[name]) for name in a.keys() | b.keys()})


def pod_requests(pod: dict[str, Any]) -> Requests:
    """The pod's effective request of every resource it names, and one of ``pods``."""
    spec = pod.get("spec") or {}
    total: Requests = Counter()
    for container in spec.get("containers") or ():
        total.update(_container_requests(container))
    sidecars: Requests = Counter()
    init_peak: Requests = Counter()
    for container in spec.get("initContainers") or ():
        own = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            sidecars.update(own)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, own + sidecars)
    total.update(sidecars)
    effective = _max(total, init_peak)
    for name, value in (spec.get("overhead") or {}).items():
        amount = parse_quantity(value)
        if amount is not None:
            effective[name] += amount
    effective[PODS] = Decimal(1)
    return effective


def occupies_node(pod: dict[str, Any]) -> bool:
    """Bound and not terminated: its requests use the node's room (a deleting pod still does)."""
    phase = (pod.get("status") or {}).get("phase", "Pending")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in ("Succeeded", "Failed")


def parse_requests(quantities: dict[str, Any]) -> Requests:
    """A resource list (``{"cpu": "500m", ...}``) as exact amounts; what does not parse counts as absent."""
    out: Requests = Counter()
    for name, value in quantities.items():
        amount = parse_quantity(value)
        if amount is not None:
            out[name] = amount
    return out


def allocatable(node: dict[str, Any]) -> Requests:
    return parse_requests((node.get("status") or {}).get("allocatable") or {})


def requested(pods: Iterable[dict[str, Any]]) -> Requests:
    """What the pods request in all."""
    total: Requests = Counter()
    for pod in pods:
        total.update(pod_requests(pod))
    return total


def free_room(node: dict[str, Any], used: Requests) -> Requests:
    """What the node has left after ``used`` (may go negative if allocatable shrank)."""
    room = allocatable(node)
    room.subtract(used)
    return room


def insufficient(requests: Requests, room: Requests) -> list[str]:
    """kube-scheduler's reasons the pod does not fit in `room`, empty when it does. A resource the node
    does not advertise has no room (as upstream: an extended resource the node lacks is insufficient)."""
    reasons = []
    for name, amount in sorted(requests.items()):
        if amount > 0 and amount > room[name]:
            reasons.append("Too many pods" if name == PODS else f"Insufficient {name}")
    return reasons


def unschedulable_message(reasons: list[str], nodes: int = 1) -> str:
    """``FitError.Error()``: "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory." """
    counts = sorted(f"{n} {reason}" for reason, n in Counter(reasons).items())
    return f"0/{nodes} nodes are available: {', '.join(counts)}."
