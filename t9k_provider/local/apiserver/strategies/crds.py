"""CustomResourceDefinitions: schema checks, immutable group and scope, and the cleanup finalizer a delete
adds (the CRD controller removes it once every custom resource is gone)."""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import IMMUTABLE, as_map, as_text
from t9k_provider.local.apiserver.strategies.crdchecks import check_crd
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.printing import NAME_COLUMN, column
from t9k_provider.local.storage.store import Store

CRD_GROUP = "apiextensions.k8s.io"
CRD_PLURAL = "customresourcedefinitions"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"


class CustomResourceDefinitionStrategy(Strategy):
    namespaced = False
    subresources = ("status",)
    tracks_generation = True
    return_deleted_object = True
    columns = [NAME_COLUMN, column("Created At", "date")]

    def prepare_for_create(self, crd: dict[str, Any], store: Store) -> None:
        crd["status"] = {"conditions": [], "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []}

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        out += check_crd(obj)

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        old_spec, new_spec = as_map(old.get("spec")), as_map(new.get("spec"))
        for key in ("scope", "group"):
            if as_text(old_spec.get(key)) != as_text(new_spec.get(key)):
                out.append(fe.invalid(f"spec.{key}", as_text(new_spec.get(key)), IMMUTABLE))

    def prepare_for_delete(self, crd: dict[str, Any], finalizers: list[str]) -> None:
        if CRD_CLEANUP in finalizers:
            return
        finalizers.append(CRD_CLEANUP)
        status = crd.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "Terminating"]
        conditions.append(
            {
                "type": "Terminating",
                "status": "True",
                "reason": "InstanceDeletionPending",
                "message": "CustomResourceDefinition marked for deletion; "
                "CustomResource deletion will begin soon",
                "lastTransitionTime": now_rfc3339(),
            }
        )
        status["conditions"] = conditions

    def cells(self, crd: dict[str, Any]) -> list[Any]:
        return [crd["metadata"]["name"], crd["metadata"].get("creationTimestamp")]


RESOURCE = Resource.builtin(
    CRD_GROUP,
    "CustomResourceDefinition",
    CustomResourceDefinitionStrategy(),
    short_names=["crd", "crds"],
    categories=["api-extensions"],
)
