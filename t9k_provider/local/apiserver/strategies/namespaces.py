"""Namespaces: DNS-1123 label names, the ``kubernetes`` spec finalizer, Terminating until finalized; and the
namespace lifecycle every namespaced write passes (no new content in a missing or terminating namespace)."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.names import is_qualified_name, name_is_dns_label
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.selectors import field_getter
from t9k_provider.local.machinery.strategicpatch import STATUS_WITH_CONDITIONS
from t9k_provider.local.storage.store import Store

BOOT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: the spec finalizer the namespace controller removes once the namespace is empty
KUBERNETES_FINALIZER = "kubernetes"


class NamespaceStrategy(Strategy):
    namespaced = False
    subresources = ("status", "finalize")
    name_check = staticmethod(name_is_dns_label)
    merge_fields = {"status": STATUS_WITH_CONDITIONS}
    field_selectors = {"status.phase": field_getter("status", "phase")}
    columns = [NAME_COLUMN, column("Status"), AGE_COLUMN]

    def prepare_for_create(self, ns: dict[str, Any], store: Store) -> None:
        meta = ns["metadata"]
        labels = meta.setdefault("labels", {})
        if isinstance(labels, dict):  # anything else is left for validation to report
            labels["kubernetes.io/metadata.name"] = meta.get("name", "")
        ns["spec"] = {"finalizers": [KUBERNETES_FINALIZER]}
        ns["status"] = {"phase": "Active"}

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        """``spec.finalizers`` entries are standard (``kubernetes``) or domain-qualified names."""
        path = "spec.finalizers"
        for name in decoding.string_items(
            decoding.object_field(obj, "spec", "spec", out), "finalizers", path, out
        ):
            out += [fe.invalid(path, name, m) for m in is_qualified_name(name)]
            if "/" not in name and name != KUBERNETES_FINALIZER:
                detail = "name is neither a standard finalizer name nor is it fully qualified"
                out.append(fe.invalid(path, name, detail))

    def prepare_for_delete(self, ns: dict[str, Any], finalizers: list[str]) -> None:
        ns.setdefault("status", {})["phase"] = "Terminating"

    def deletion_pending(self, ns: dict[str, Any]) -> bool:
        """A deleted namespace stays until the namespace controller has emptied and finalized it."""
        return bool((ns.get("spec") or {}).get("finalizers"))

    def cells(self, ns: dict[str, Any]) -> list[Any]:
        meta = ns["metadata"]
        return [meta["name"], (ns.get("status") or {}).get("phase", ""), age(meta.get("creationTimestamp"))]


def admit(store: Store, res: Resource, namespace: str) -> None:
    """NamespaceLifecycle admission of a create in ``namespace``: 404 when missing, 403 when terminating."""
    if not res.namespaced:
        return
    ns = store.get(("", "namespaces", "", namespace))
    if ns is None:
        raise errors.not_found("namespaces", "", namespace)
    if ns["metadata"].get("deletionTimestamp"):
        raise errors.forbidden(
            f'{res.plural} "" is forbidden: unable to create new content in namespace {namespace} '
            "because it is being terminated",
            namespace,
            res.plural,
            res.group,
        )


def boot_namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


RESOURCE = Resource.builtin("", "Namespace", NamespaceStrategy(), short_names=["ns"])
