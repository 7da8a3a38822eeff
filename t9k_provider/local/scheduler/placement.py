"""Where pods go and whom they preempt (pure): a batch of pods (one pod, or the waiting members of a gang)
placed on the nodes that pass the filters (`filters`) and have room (`fit`), the least allocated first as
kube-scheduler's default NodeResourcesFit score spreads them; and, when fewer than needed fit, the fewest,
lowest-priority victims whose going lets them fit (DefaultPreemption), a gang's members always together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from t9k_provider.jobs.contract import LABEL_GROUP_NAME
from t9k_provider.local.scheduler import filters, fit

Pod = dict[str, Any]
Node = dict[str, Any]


@dataclass
class Placement:
    """Which of the batch's pods go where (pod uid -> node name), and why the first left out could not."""

    nodes: dict[str, str] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)  # one entry per node that refused it (kube's counting)


def uid(pod: Pod) -> str:
    return str(pod["metadata"].get("uid", ""))


def place(batch: list[Pod], nodes: list[Node], used: dict[str, fit.Requests]) -> Placement:
    """Each pod of ``batch`` in turn on the least allocated node that takes it; ``used``: what the pods that
    use each node's room request (by node name)."""
    names = [n["metadata"]["name"] for n in nodes]
    rooms = {name: fit.free_room(n, used.get(name, Counter())) for name, n in zip(names, nodes, strict=True)}
    out = Placement()
    for pod in batch:
        requests = fit.pod_requests(pod)
        best: tuple[Decimal, str] | None = None
        reasons: list[str] = []
        for node in nodes:
            name = node["metadata"]["name"]
            why = filters.rejection(pod, node)
            lacking = [why] if why else fit.insufficient(requests, rooms[name])
            if lacking:
                reasons += lacking
                continue
            score = (_allocated_after(node, rooms[name], requests), name)
            best = score if best is None or score < best else best
        if best is None:
            out.reasons = out.reasons or reasons
            continue
        rooms[best[1]].subtract(requests)
        out.nodes[uid(pod)] = best[1]
    return out


def _allocated_after(node: Node, room: fit.Requests, requests: fit.Requests) -> Decimal:
    """The share of the node's cpu and memory in use once the pod is there (lower is better)."""
    allocatable = fit.allocatable(node)
    shares = [
        (allocatable[r] - room[r] + requests[r]) / allocatable[r]
        for r in ("cpu", "memory")
        if allocatable[r] > 0
    ]
    return sum(shares, Decimal(0)) / len(shares) if shares else Decimal(0)


@dataclass
class Preemption:
    """Pods to evict (whole gangs) so that the batch fits, and where its pods then go."""

    victims: list[Pod]
    placement: Placement


def preempt(
    batch: list[Pod],
    needed: int,
    nodes: list[Node],
    occupying: dict[str, list[Pod]],
    priority: Callable[[Pod], int],
    preemptible: Callable[[Pod], bool] = lambda _pod: True,
) -> Preemption | None:
    """The victims for ``batch`` (of whose pods ``needed`` must fit), among pods of lower priority than the
    batch's; None when even evicting all of them would not make it fit, or the batch may not preempt
    (``preemptionPolicy: Never``); pods ``preemptible`` refuses (their Queue says so) are never victims.
    Victims go in units: a pod, or every pod of its gang. Units are taken
    lowest priority (then youngest) first until the batch fits, then given back, highest first, where it
    still fits without them, so that as few as possible go."""
    own = priority(batch[0])
    if (batch[0].get("spec") or {}).get("preemptionPolicy") == "Never":
        return None
    units = _units([p for pods in occupying.values() for p in pods if preemptible(p)], own, priority)
    taken: list[list[Pod]] = []
    for unit in units:
        taken.append(unit)
        if len(place(batch, nodes, _requested(_without(occupying, taken))).nodes) >= needed:
            break
    else:
        return None
    for unit in sorted(taken, key=lambda u: -priority(u[0])):
        rest = [u for u in taken if u is not unit]
        if len(place(batch, nodes, _requested(_without(occupying, rest))).nodes) >= needed:
            taken = rest
    chosen = place(batch, nodes, _requested(_without(occupying, taken)))
    return Preemption([p for unit in taken for p in unit], chosen)


def _units(pods: Iterable[Pod], below: int, priority: Callable[[Pod], int]) -> list[list[Pod]]:
    """The preemptible pods (priority under ``below``, not already going), by gang, in eviction order."""
    groups: dict[str, list[Pod]] = {}
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or priority(pod) >= below:
            continue
        group = (meta.get("labels") or {}).get(LABEL_GROUP_NAME)
        key = f"group:{meta.get('namespace')}/{group}" if group else f"pod:{uid(pod)}"
        groups.setdefault(key, []).append(pod)
    newest = {
        key: max(p["metadata"].get("creationTimestamp", "") for p in unit) for key, unit in groups.items()
    }
    order = sorted(groups, key=lambda k: (priority(groups[k][0]), _descending(newest[k])))
    return [groups[key] for key in order]


def _descending(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def _requested(occupying: dict[str, list[Pod]]) -> dict[str, fit.Requests]:
    """What each node's pods request in all (by node name)."""
    return {node: fit.requested(pods) for node, pods in occupying.items()}


def _without(occupying: dict[str, list[Pod]], units: list[list[Pod]]) -> dict[str, list[Pod]]:
    gone = {uid(p) for unit in units for p in unit}
    return {node: [p for p in pods if uid(p) not in gone] for node, pods in occupying.items()}
