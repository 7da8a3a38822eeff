"""Which pods a Service publishes: the rule the Endpoints controller and the kubelet's hosts files share.

A pod is an endpoint of a Service whose selector matches it while it has an IP and is not finished; it is
a ready address while its Ready condition is True (readiness probes pass), a not-ready one otherwise, and
`publishNotReadyAddresses` publishes it either way.
"""

from __future__ import annotations

from typing import Any

TERMINAL_PHASES = ("Succeeded", "Failed")


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def selects(service: dict[str, Any], pod: dict[str, Any]) -> bool:
    """The Service's selector matches the pod (a Service without selector selects nothing)."""
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def publishes_not_ready(service: dict[str, Any]) -> bool:
    return bool((service.get("spec") or {}).get("publishNotReadyAddresses"))


def is_endpoint(service: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Does the Service publish the pod's address (for name resolution: ready, or not-ready published)?"""
    return selects(service, pod) and (publishes_not_ready(service) or is_ready(pod))
