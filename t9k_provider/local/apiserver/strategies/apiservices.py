"""apiregistration.k8s.io/v1 APIServices: stored and validated as kube-aggregator does (the name is
``<version>.<group>``, priorities in range, a service reference or none for a local group/version).

The server controllers register a local APIService for each served group/version, CRDs' included, as
kube-apiserver's ``autoregister`` controller does. Nothing is proxied: a service-backed APIService is stored,
and reported unavailable (the server controllers set its ``Available`` condition).
"""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import as_map, validate_port
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.names import is_dns1035_label, is_dns1123_subdomain, name_is_path_segment
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.strategicpatch import STATUS_WITH_CONDITIONS
from t9k_provider.local.storage.store import Store

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"


class APIServiceStrategy(Strategy):
    namespaced = False
    subresources = ("status",)
    name_check = staticmethod(name_is_path_segment)
    merge_fields = {"status": STATUS_WITH_CONDITIONS}
    columns = [NAME_COLUMN, column("Service"), column("Available"), AGE_COLUMN]

    def prepare_for_create(self, obj: dict[str, Any], store: Store) -> None:
        service = as_map(obj.get("spec")).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)
        obj["status"] = {}

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        spec = decoding.object_field(obj, "spec", "spec", out)
        group = decoding.text_field(spec, "group", "spec.group", out)
        version = decoding.text_field(spec, "version", "spec.version", out)
        required = f"{version}.{group}"
        name = obj["metadata"].get("name", "")
        if name != required:
            out.append(
                fe.invalid("metadata.name", name, f'must be `spec.version+"."+spec.group`: "{required}"')
            )
        if not group and version != "v1":
            out.append(
                fe.required("spec.group", "only v1 may have an empty group and it better be legacy kube")
            )
        if group:
            out += [fe.invalid("spec.group", group, m) for m in is_dns1123_subdomain(group)]
        out += [fe.invalid("spec.version", version, m) for m in is_dns1035_label(version)]
        for key, top in (("groupPriorityMinimum", 20000), ("versionPriority", 1000)):
            value = decoding.int_field(spec, key, f"spec.{key}", out) or 0
            if not 0 < value <= top:
                out.append(fe.invalid(f"spec.{key}", value, f"must be positive and less than {top}"))
        skip_tls = spec.get("insecureSkipTLSVerify") is True
        service = spec.get("service")
        if service is None:
            if spec.get("caBundle"):
                out.append(fe.forbidden("spec.caBundle", "local APIServices may not have a caBundle"))
            if skip_tls:
                detail = "local APIServices may not have insecureSkipTLSVerify"
                out.append(fe.forbidden("spec.insecureSkipTLSVerify", detail))
            return
        service = decoding.object_field(spec, "service", "spec.service", out)
        for key in ("namespace", "name"):
            decoding.required_text(service, key, f"spec.service.{key}", out)
        validate_port(service, "port", "spec.service.port", out)
        if skip_tls and spec.get("caBundle"):
            out.append(
                fe.invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present")
            )

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        meta, service = obj["metadata"], as_map(obj.get("spec")).get("service")
        available = next(
            (c for c in as_map(obj.get("status")).get("conditions") or () if c.get("type") == "Available"),
            None,
        )
        shown = "Unknown"
        if available is not None:
            shown = str(available.get("status"))
            if shown != "True" and available.get("reason"):
                shown += f" ({available['reason']})"
        return [
            meta["name"],
            f"{service.get('namespace')}/{service.get('name')}" if isinstance(service, dict) else "Local",
            shown,
            age(meta.get("creationTimestamp")),
        ]


def availability(obj: dict[str, Any]) -> dict[str, Any]:
    """The ``Available`` condition an APIService has here: local ones are, proxied ones never are."""
    if as_map(obj.get("spec")).get("service") is None:
        status, reason, message = "True", "Local", "Local APIServices are always available"
    else:
        status, reason = "False", "ServiceNotProxied"
        message = "the local cluster does not proxy API groups to services"
    return {"type": "Available", "status": status, "reason": reason, "message": message}


def with_availability(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The status ``obj`` should have, or None when its condition already says so."""
    wanted = availability(obj)
    status = as_map(obj.get("status"))
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    current = next((c for c in conditions if c.get("type") == "Available"), {})
    if all(current.get(k) == v for k, v in wanted.items()):
        return None
    others = [c for c in conditions if c.get("type") != "Available"]
    return {**status, "conditions": [*others, {**wanted, "lastTransitionTime": now_rfc3339()}]}


def local_api_service(group: str, version: str, builtin: bool) -> dict[str, Any]:
    """The APIService kube-apiserver registers for a group/version it serves itself (a built-in one at
    start, ``onstart``; a CRD's while it is served, ``true``)."""
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}", "labels": {AUTOMANAGED: "onstart" if builtin else "true"}},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": 18000, "versionPriority": 15},
    }


RESOURCE = Resource.builtin("apiregistration.k8s.io", "APIService", APIServiceStrategy())
