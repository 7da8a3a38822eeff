"""APIService registration and availability: a local APIService per served group/version (kube-apiserver's
autoregistration: built-in ones ``onstart``, those of CRDs ``true``, removed with their CRD), and every
APIService's Available condition."""

from __future__ import annotations

from t9k_provider.local.apiserver.served import BUILTIN
from t9k_provider.local.apiserver.strategies.apiservices import (
    AUTOMANAGED,
    local_api_service,
    with_availability,
)
from t9k_provider.local.apiserver.strategies.apiservices import RESOURCE as API_SERVICES
from t9k_provider.local.controllers.serverside import ServerSide


class ApiServiceController:
    def __init__(self, side: ServerSide) -> None:
        self.side = side
        self._builtin_versions = {(r.group, r.version) for r in BUILTIN}

    def sync(self) -> None:
        side = self.side
        res = side.registry.lookup(API_SERVICES.group, API_SERVICES.version, API_SERVICES.plural)
        assert res is not None
        served = {
            f"{v}.{g}": (g, v) for g, versions in side.registry.group_versions().items() for v in versions
        }
        for name, (group, version) in served.items():
            if side.store.get((res.group, res.plural, "", name)) is None:
                service = local_api_service(group, version, (group, version) in self._builtin_versions)
                side.attempt(f"apiservice {name}", side.objects.create, res, "", service)
        for obj in side.store.list(res.group, res.plural):
            meta = obj["metadata"]
            if (meta.get("labels") or {}).get(AUTOMANAGED) == "true" and meta["name"] not in served:
                if not meta.get("deletionTimestamp"):
                    side.delete(f"apiservice {meta['name']}", res, "", meta["name"])
                continue
            status = with_availability(obj)
            if status is not None:
                side.attempt(f"apiservice {meta['name']}", side.objects.write_status, res, obj, status)
