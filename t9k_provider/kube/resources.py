"""Built-in resource types the controller and the node agents read and write, and how a resource quantity
is read (the local cluster's scheduler and kubelet, and the provider's wait, count the same way)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation


@dataclass(frozen=True)
class ResourceType:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        if subresource is not None:
            base += f"/{subresource}"
        return base


PODS = ResourceType("v1", "Pod", "pods")
SERVICES = ResourceType("v1", "Service", "services")
ENDPOINTS = ResourceType("v1", "Endpoints", "endpoints")
CONFIGMAPS = ResourceType("v1", "ConfigMap", "configmaps")
SECRETS = ResourceType("v1", "Secret", "secrets")
SERVICEACCOUNTS = ResourceType("v1", "ServiceAccount", "serviceaccounts")
EVENTS = ResourceType("v1", "Event", "events")
NODES = ResourceType("v1", "Node", "nodes", namespaced=False)
NAMESPACES = ResourceType("v1", "Namespace", "namespaces", namespaced=False)
JOBS = ResourceType("batch/v1", "Job", "jobs")
DEPLOYMENTS = ResourceType("apps/v1", "Deployment", "deployments")
REPLICASETS = ResourceType("apps/v1", "ReplicaSet", "replicasets")
STATEFULSETS = ResourceType("apps/v1", "StatefulSet", "statefulsets")
DAEMONSETS = ResourceType("apps/v1", "DaemonSet", "daemonsets")
LEASES = ResourceType("coordination.k8s.io/v1", "Lease", "leases")
PODGROUPS = ResourceType("scheduler.tensorstack.dev/v1beta1", "PodGroup", "podgroups")
QUEUES = ResourceType("scheduler.tensorstack.dev/v1beta1", "Queue", "queues", namespaced=False)

#: The extended resource the NVIDIA device plugin advertises: what a replica asks for, a node gives, the
#: kubelet hands out and the provider counts, spelled once.
GPU = "nvidia.com/gpu"


def whole_units(value: object) -> int | None:
    """An extended resource's quantity (``2``, ``"2"``) as its count; None when it is not a whole number
    (extended resources are counted in whole units only)."""
    try:
        return int(str(value))
    except ValueError:
        return None


_SHAPE = re.compile(r"([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)\Z")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT = re.compile(r"[eE]([-+]?[0-9]+)\Z")


def parse_quantity(value: str | int | float) -> Decimal | None:
    """The exact value of a quantity such as ``"500m"``, ``"1.5Gi"`` or ``2``; None if malformed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _SHAPE.match(value)
    if match is None:
        return None
    number, suffix = match.groups()
    if number.count(".") > 1 or number.strip("+-") in ("", "."):
        return None
    try:
        base = Decimal(number)
    except InvalidOperation:
        return None
    if suffix in _BINARY:
        return base * (Decimal(1024) ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return base.scaleb(_DECIMAL[suffix])
    exponent = _EXPONENT.match(suffix)
    if exponent is None:
        return None
    return base.scaleb(int(exponent.group(1)))
