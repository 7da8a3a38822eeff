"""Services: a cluster IP allocated on create (and immutable), DNS-1035 names, kubectl columns."""

from __future__ import annotations

import ipaddress
from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import (
    IMMUTABLE,
    as_map,
    as_text,
    validate_labels,
    validate_port,
    validate_protocol,
)
from t9k_provider.local.apiserver.strategies.podspec import items
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.names import is_dns1123_label, name_is_dns1035_label
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.schema import is_ip
from t9k_provider.local.machinery.selectors import field_getter
from t9k_provider.local.machinery.strategicpatch import STATUS_WITH_CONDITIONS, MergeField
from t9k_provider.local.storage.store import Store

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/16")
KUBERNETES_SERVICE_IP = "10.96.0.1"
_SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]


class ServiceStrategy(Strategy):
    subresources = ("status",)
    return_deleted_object = True
    name_check = staticmethod(name_is_dns1035_label)
    merge_fields = {
        "spec": MergeField(node={"ports": MergeField("merge", "port")}),
        "status": STATUS_WITH_CONDITIONS,
    }
    field_selectors = {
        "spec.clusterIP": field_getter("spec", "clusterIP"),
        "spec.type": field_getter("spec", "type"),
    }
    columns = [
        NAME_COLUMN,
        column("Type"),
        column("Cluster-IP"),
        column("External-IP"),
        column("Port(s)"),
        AGE_COLUMN,
    ]

    def prepare_for_create(self, svc: dict[str, Any], store: Store) -> None:
        used = {(s.get("spec") or {}).get("clusterIP", "") for s in store.list("", "services")}
        spec = svc.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in items(spec.get("ports")):
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
        if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
            for ip in SERVICE_CIDR.hosts():
                if str(ip) != KUBERNETES_SERVICE_IP and str(ip) not in used:
                    spec["clusterIP"] = str(ip)
                    break
        if spec.get("clusterIP"):
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        svc["status"] = {"loadBalancer": {}}

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        spec = decoding.object_field(obj, "spec", "spec", out)
        kind = decoding.text_field(spec, "type", "spec.type", out)
        if kind and kind not in _SERVICE_TYPES:
            out.append(fe.not_supported("spec.type", kind, _SERVICE_TYPES))
        ports = decoding.object_items(spec, "ports", "spec.ports", out)
        cluster_ip = decoding.text_field(spec, "clusterIP", "spec.clusterIP", out)
        headless = cluster_ip == "None"
        if cluster_ip and not headless and not is_ip(cluster_ip):
            detail = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
            out.append(fe.invalid("spec.clusterIP", cluster_ip, detail))
        if not spec.get("ports") and kind != "ExternalName" and not headless:
            out.append(fe.required("spec.ports"))
        names: set[str] = set()
        for base, port in ports:
            name = decoding.text_field(port, "name", f"{base}.name", out)
            if len(ports) > 1 and not name:
                out.append(fe.required(f"{base}.name"))
            elif name:
                out += [fe.invalid(f"{base}.name", name, m) for m in is_dns1123_label(name)]
                if name in names:
                    out.append(fe.duplicate(f"{base}.name", name))
                names.add(name)
            validate_port(port, "port", f"{base}.port", out)
            validate_protocol(port, f"{base}.protocol", out)
            if not isinstance(port.get("targetPort"), str):
                validate_port(port, "targetPort", f"{base}.targetPort", out, required=False)
        validate_labels(spec, "selector", "spec.selector", out)

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        old_ip = as_text(as_map(old.get("spec")).get("clusterIP"))
        new_ip = as_text(as_map(new.get("spec")).get("clusterIP"))
        if old_ip and new_ip and old_ip != new_ip:
            out.append(fe.invalid("spec.clusterIP", new_ip, IMMUTABLE))

    def cells(self, svc: dict[str, Any]) -> list[Any]:
        meta, spec = svc["metadata"], svc.get("spec") or {}
        ports = ",".join(
            f"{p.get('port')}/{p.get('protocol', 'TCP')}"
            for p in spec.get("ports") or ()
            if isinstance(p, dict)
        )
        return [
            meta["name"],
            spec.get("type", ""),
            spec.get("clusterIP") or "<none>",
            "<none>",
            ports or "<none>",
            age(meta.get("creationTimestamp")),
        ]


def kubernetes_service(port: int) -> dict[str, Any]:
    """``default/kubernetes``, the Service that names the API server (no selector: its Endpoints are kept
    by the server itself)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    }


RESOURCE = Resource.builtin("", "Service", ServiceStrategy(), short_names=["svc"], categories=["all"])
