"""Namespace lifecycle: each live namespace has its ``default`` ServiceAccount and the ``kube-root-ca.crt``
ConfigMap (kube-controller-manager's serviceaccount and root-CA publisher controllers); a deleted namespace's
objects are deleted before its ``kubernetes`` finalizer is dropped (the namespace controller)."""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.strategies.configdata import ROOT_CA_CONFIG_MAP, root_ca_config_map
from t9k_provider.local.apiserver.strategies.namespaces import KUBERNETES_FINALIZER
from t9k_provider.local.apiserver.strategies.serviceaccounts import default_service_account
from t9k_provider.local.controllers.serverside import Retries, ServerSide
from t9k_provider.local.machinery.jsonvalues import json_copy


class NamespaceController:
    def __init__(self, side: ServerSide, root_ca: str = "") -> None:
        self.side = side
        self.root_ca = root_ca  # the CA bundle published in every namespace; none when empty
        self.retries = Retries("namespace controller")

    def due_in(self) -> float | None:
        return self.retries.due_in()

    def sync(self) -> None:
        side = self.side
        ns_res = side.registry.lookup("", "v1", "namespaces")
        sa_res = side.registry.lookup("", "v1", "serviceaccounts")
        assert ns_res is not None and sa_res is not None
        for ns in side.store.list("", "namespaces"):
            self.retries.run(ns["metadata"]["name"], partial(self._sync_namespace, ns_res, sa_res, ns))

    def _sync_namespace(self, ns_res: Resource, sa_res: Resource, ns: dict[str, Any]) -> None:
        side, name = self.side, ns["metadata"]["name"]
        if not ns["metadata"].get("deletionTimestamp"):
            if side.store.get(("", "serviceaccounts", name, "default")) is None:
                sa = default_service_account(name)
                side.attempt("default service account", side.objects.create, sa_res, name, sa)
            self._publish_root_ca(name)
            return
        if self._delete_contents(name) == 0 and KUBERNETES_FINALIZER in (
            (ns.get("spec") or {}).get("finalizers") or ()
        ):
            new = json_copy(ns)
            new["spec"]["finalizers"] = [f for f in new["spec"]["finalizers"] if f != KUBERNETES_FINALIZER]
            side.attempt(f"finalize namespace {name}", side.objects.write, ns_res, ns, new)

    def _delete_contents(self, namespace: str) -> int:
        """Delete what the namespace holds; how many objects are left in it."""
        side, remaining = self.side, 0
        for group, resource in side.registry.namespaced_storage():
            items = side.store.list(group, resource, namespace)
            remaining += len(items)
            res = side.resource(group, resource)
            if res is None:
                continue
            for obj in items:
                if not obj["metadata"].get("deletionTimestamp"):
                    side.delete(f"delete {resource} in {namespace}", res, namespace, obj["metadata"]["name"])
        return remaining

    def _publish_root_ca(self, namespace: str) -> None:
        if not self.root_ca:
            return
        side = self.side
        res = side.registry.lookup("", "v1", "configmaps")
        assert res is not None
        wanted = root_ca_config_map(namespace, self.root_ca)
        current = side.store.get(("", "configmaps", namespace, ROOT_CA_CONFIG_MAP))
        if current is None:
            side.attempt("publish kube-root-ca.crt", side.objects.create, res, namespace, wanted)
        elif current.get("data") != wanted["data"]:
            new = json_copy(current)
            new["data"] = wanted["data"]
            side.attempt("update kube-root-ca.crt", side.objects.write, res, current, new)
