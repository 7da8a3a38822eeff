"""Whether a pending pod can ever be placed: it asks for more of an extended resource (GPUs, say) than any
node has. Waiting cannot help such a pod, unless a node that has more joins (a cluster autoscaler adding a
GPU node), so the wait treats it as a replica that cannot start: it fails after ``pod_error_timeout``, which
such a cluster raises or turns off.

Only extended resources (``vendor.domain/name``, counted in whole units) are judged: CPU and memory quantities
are left to ``startup_timeout``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from t9k_provider.kube.resources import parse_quantity, whole_units

#: How long what the nodes can give is trusted before the wait reads it again (nodes join and leave).
NODES_TTL_SECONDS = 60.0


def _extended(name: str) -> bool:
    return "/" in name and not name.startswith(("hugepages-", "requests.", "limits."))


def largest_allocatable(nodes: list[dict[str, Any]]) -> dict[str, int]:
    """The most of each extended resource one node can give (its ``status.allocatable``)."""
    largest: dict[str, int] = {}
    for node in nodes:
        for name, value in ((node.get("status") or {}).get("allocatable") or {}).items():
            count = whole_units(value)
            if _extended(name) and count is not None:
                largest[name] = max(largest.get(name, 0), count)
    return largest


def pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    """The pod's effective request of each resource: its containers' sum, or the largest init container's,
    whichever is more (a request defaults to its limit), as the scheduler and a queue count it."""

    def of(container: dict[str, Any]) -> dict[str, Decimal]:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {n: q for n, v in wanted.items() if (q := parse_quantity(v)) is not None}

    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, amount in of(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in of(container).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def _requests(pod: dict[str, Any]) -> dict[str, int]:
    """The pod's effective request of each extended resource (counted in whole units)."""
    return {n: int(q) for n, q in pod_requests(pod).items() if _extended(n) and q == q.to_integral_value()}


def unplaceable(pod: dict[str, Any], largest: dict[str, int]) -> str | None:
    """Why the scheduler can never place ``pod`` (it said Unschedulable, and it asks for more than any node
    has), in the scheduler's words too; None if it may yet be placed."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
    if not scheduled or scheduled.get("status") != "False" or scheduled.get("reason") != "Unschedulable":
        return None
    for name, count in sorted(_requests(pod).items()):
        have = largest.get(name, 0)
        if count > have:
            scheduler = scheduled.get("message") or "Unschedulable"
            return (
                f"pod {pod['metadata']['name']} can never be scheduled: it asks for {count} {name} and no "
                f"node has more than {have} ({scheduler})"
            )
    return None
