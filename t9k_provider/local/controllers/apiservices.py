"""APIService registration and availability: a local APIService per served group/version (kube-apiserver's
autoregistration: built-in ones ``onstart``, those of CRDs ``true``, removed with their CRD), and every
APIService's Available condition."""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.served import BUILTIN
from t9k_provider.local.apiserver.strategies.apiservices import (
    AUTOMANAGED,
    local_api_service,
    with_availability,
)
from t9k_provider.local.apiserver.strategies.apiservices import RESOURCE as API_SERVICES
from t9k_provider.local.controllers.serverside import Retries, ServerSide


class ApiServiceController:
    def __init__(self, side: ServerSide) -> None:
        self.side = side
        self._builtin_versions = {(r.group, r.version) for r in BUILTIN}
        self.retries = Retries("apiservice controller")

    def due_in(self) -> float | None:
        return self.retries.due_in()

    def sync(self) -> None:
        side = self.side
        res = side.registry.lookup(API_SERVICES.group, API_SERVICES.version, API_SERVICES.plural)
        assert res is not None
        served = {
            f"{v}.{g}": (g, v) for g, versions in side.registry.group_versions().items() for v in versions
        }
        for name, (group, version) in served.items():
            if side.store.get((res.group, res.plural, "", name)) is None:
                self.retries.run(name, partial(self._register, res, name, group, version))
        for obj in side.store.list(res.group, res.plural):
            self.retries.run(obj["metadata"]["name"], partial(self._sync_service, res, obj, served))

    def _register(self, res: Resource, name: str, group: str, version: str) -> None:
        service = local_api_service(group, version, (group, version) in self._builtin_versions)
        self.side.attempt(f"apiservice {name}", self.side.objects.create, res, "", service)

    def _sync_service(self, res: Resource, obj: dict[str, Any], served: dict[str, tuple[str, str]]) -> None:
        side, meta = self.side, obj["metadata"]
        if (meta.get("labels") or {}).get(AUTOMANAGED) == "true" and meta["name"] not in served:
            if not meta.get("deletionTimestamp"):
                side.delete(f"apiservice {meta['name']}", res, "", meta["name"])
            return
        status = with_availability(obj)
        if status is not None:
            side.attempt(f"apiservice {meta['name']}", side.objects.write_status, res, obj, status)
