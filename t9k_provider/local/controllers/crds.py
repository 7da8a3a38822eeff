"""CRD establishing and naming: a CRD whose names clash with another's is not accepted; an accepted one is
served (the registry learns its resources) and Established; a deleted one's objects are deleted before its
cleanup finalizer is dropped."""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.strategies.crds import CRD_CLEANUP, CRD_GROUP, CRD_PLURAL
from t9k_provider.local.apiserver.strategies.custom import resources_from_crd
from t9k_provider.local.controllers.serverside import Retries, ServerSide
from t9k_provider.local.machinery.jsonvalues import json_copy

# The conditions of a CRD whose names were accepted: (type, reason, message).
_ACCEPTED = (
    ("NamesAccepted", "NoConflicts", "no conflicts found"),
    ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
)


def _condition(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_rfc3339(),
    }


class CrdController:
    def __init__(self, side: ServerSide) -> None:
        self.side = side
        self._revisions: dict[str, str] = {}  # the revision each CRD was last served at
        self.retries = Retries("crd controller")

    def _crd_resource(self) -> Resource:
        res = self.side.registry.lookup(CRD_GROUP, "v1", CRD_PLURAL)
        assert res is not None
        return res

    def due_in(self) -> float | None:
        return self.retries.due_in()

    def sync(self) -> None:
        side, crd_res = self.side, self._crd_resource()
        live = set()
        for crd in side.store.list(CRD_GROUP, CRD_PLURAL):
            name = crd["metadata"]["name"]
            live.add(name)
            self.retries.run(name, partial(self._sync_crd, crd_res, crd))
        for name in side.registry.crd_names():
            if name not in live:
                side.registry.drop_crd(name)
                self._revisions.pop(name, None)

    def _sync_crd(self, crd_res: Resource, crd: dict[str, Any]) -> None:
        side, name = self.side, crd["metadata"]["name"]
        if crd["metadata"].get("deletionTimestamp"):
            self._clean_up(crd_res, crd)
            return
        status = crd.get("status") or {}
        established = any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        if established and self._revisions.get(name) == crd["metadata"]["resourceVersion"]:
            return
        new_status, clash = self._status(name, crd)
        if new_status != status:
            crd = (
                side.attempt(f"crd {name} status", side.objects.write_status, crd_res, crd, new_status) or crd
            )
        if not clash:
            side.registry.set_crd(name, resources_from_crd(crd))
        self._revisions[name] = crd["metadata"]["resourceVersion"]

    def _status(self, name: str, crd: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The CRD's status (conditions, stored and accepted names), and the name clash if there is one."""
        spec, status = crd.get("spec") or {}, crd.get("status") or {}
        names = dict(spec.get("names") or {})
        names.setdefault("singular", names.get("kind", "").lower())
        names.setdefault("listKind", f"{names.get('kind', '')}List")
        clash = self.side.registry.conflicts(
            name, spec.get("group", ""), names.get("plural", ""), names.get("kind", "")
        )
        conditions = {c.get("type"): c for c in status.get("conditions") or ()}
        if clash:
            conditions["NamesAccepted"] = _condition("NamesAccepted", "False", "NameConflict", clash)
            not_accepted = _condition("Established", "False", "NotAccepted", "not all names are accepted")
            conditions.setdefault("Established", not_accepted)
        else:
            for ctype, reason, message in _ACCEPTED:
                if conditions.get(ctype, {}).get("status") != "True":
                    conditions[ctype] = _condition(ctype, "True", reason, message)
        storage = [v["name"] for v in spec.get("versions") or () if v.get("storage")]
        stored = list(status.get("storedVersions") or ())
        stored += [v for v in storage if v not in stored]
        new_status = {**status, "conditions": list(conditions.values()), "storedVersions": stored}
        if not clash:
            new_status["acceptedNames"] = names
        return new_status, clash

    def _clean_up(self, crd_res: Resource, crd: dict[str, Any]) -> None:
        side, spec = self.side, crd.get("spec") or {}
        plural = ((crd.get("status") or {}).get("acceptedNames") or {}).get("plural") or (
            spec.get("names") or {}
        ).get("plural", "")
        group = spec.get("group", "")
        res = side.resource(group, plural)
        if res is not None:
            for obj in side.store.list(group, plural):
                if not obj["metadata"].get("deletionTimestamp"):
                    meta = obj["metadata"]
                    side.delete(f"delete {plural}", res, meta.get("namespace", ""), meta["name"])
        if not side.store.list(group, plural) and CRD_CLEANUP in (crd["metadata"].get("finalizers") or ()):
            new = json_copy(crd)
            new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != CRD_CLEANUP]
            side.attempt("finish crd deletion", side.objects.write, crd_res, crd, new)
