"""The Endpoints controller: a `v1/Endpoints` object per Service with a selector (same name, as the endpoints
controller of kube-controller-manager keeps it) for the clients that read them (`kubectl get endpoints`,
`kubectl describe service`); which pods a Service publishes is `machinery.endpoints`'s rule, which the
kubelet's hosts files follow too."""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import Informer, object_key
from t9k_provider.kube.resources import ENDPOINTS
from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.machinery import workloop
from t9k_provider.local.machinery.endpoints import (
    TERMINAL_PHASES,
    is_ready,
    publishes_not_ready,
    selects,
)


def _address(service: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    address: dict[str, Any] = {
        "ip": pod["status"]["podIP"],
        "targetRef": {
            "kind": "Pod",
            "namespace": meta.get("namespace", "default"),
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        },
    }
    if spec.get("nodeName"):
        address["nodeName"] = spec["nodeName"]
    if spec.get("hostname") and spec.get("subdomain") == service["metadata"]["name"]:
        address["hostname"] = spec["hostname"]
    return address


def _ports(service: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Service's ports as its pods serve them (a named targetPort resolved in the pods' ports)."""
    container_ports = {
        p["name"]: p["containerPort"]
        for pod in pods
        for c in (pod.get("spec") or {}).get("containers") or []
        for p in c.get("ports") or []
        if p.get("name")
    }
    out = []
    for port in (service.get("spec") or {}).get("ports") or []:
        target = port.get("targetPort", port.get("port"))
        number = target if isinstance(target, int) else container_ports.get(str(target))
        if number is None:
            continue
        entry = {"port": int(number), "protocol": port.get("protocol", "TCP")}
        if port.get("name"):
            entry["name"] = port["name"]
        out.append(entry)
    return out


def endpoint_subsets(service: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`subsets` of the Service's Endpoints from the pods of its namespace (one subset: the local cluster's
    pods of one Service serve the same ports)."""
    ready, not_ready, members = [], [], []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        status = pod.get("status") or {}
        if not selects(service, pod) or not status.get("podIP") or status.get("phase") in TERMINAL_PHASES:
            continue
        if pod["metadata"].get("deletionTimestamp") and not publishes_not_ready(service):
            continue
        members.append(pod)
        published = is_ready(pod) or publishes_not_ready(service)
        (ready if published else not_ready).append(_address(service, pod))
    if not members:
        return []
    subset: dict[str, Any] = {}
    if ready:
        subset["addresses"] = ready
    if not_ready:
        subset["notReadyAddresses"] = not_ready
    ports = _ports(service, members)
    if ports:
        subset["ports"] = ports
    return [subset]


class EndpointsController:
    """Keeps one Endpoints object per Service with a selector, level-triggered from the informers."""

    def __init__(self, kube: KubeApi, services: Informer, pods: Informer) -> None:
        self.kube = kube
        self.services = services
        self.pods = pods
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()

    def on_service(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self.queue.add(object_key(new or old or {}))

    def on_pod(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A pod that changed: every Service of its namespace that selects it (before or after) resyncs."""
        pods = [p for p in (old, new) if p is not None]
        namespace = object_key(pods[0])[0] if pods else ""
        for service in self.services.items():
            key = object_key(service)
            if key[0] == namespace and any(selects(service, p) for p in pods):
                self.queue.add(key)

    async def run(self) -> None:
        await self.services.synced.wait()
        await self.pods.synced.wait()
        await workloop.run(self.queue, self._sync_key, "endpoints")

    async def _sync_key(self, key: workloop.Key) -> None:
        namespace, name = key
        service = self.services.get(namespace, name)
        if service is None:
            try:
                await self.kube.delete(ENDPOINTS, namespace, name)
            except ApiError as exc:
                if exc.status != 404:
                    raise
            return
        if not (service.get("spec") or {}).get("selector"):
            return  # the user manages the Endpoints of a Service without selector
        pods = [p for p in self.pods.items() if object_key(p)[0] == namespace]
        subsets = endpoint_subsets(service, pods)
        try:
            current: dict[str, Any] | None = await self.kube.get(ENDPOINTS, namespace, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
            current = None
        labels = service["metadata"].get("labels") or {}
        body = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "subsets": subsets,
        }
        if current is None:
            await self.kube.create(ENDPOINTS, namespace, body)
        elif (current.get("subsets") or []) != subsets or (current["metadata"].get("labels") or {}) != labels:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await self.kube.replace(ENDPOINTS, namespace, name, body)
