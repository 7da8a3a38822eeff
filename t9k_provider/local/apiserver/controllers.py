"""Server-internal controllers: CRD establishing and naming, namespace lifecycle (with each namespace's
``default`` ServiceAccount and ``kube-root-ca.crt``), garbage collection, APIService registration and
availability, ClusterRole aggregation.

They run as one asyncio task woken by store events (and every second), and act through the same write
pipeline as clients, so finalizers, watch events and validation apply to their writes too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timezone
from typing import Any

from t9k_provider.kube.timestamps import now_rfc3339, parse_time
from t9k_provider.local.apiserver import errors
from t9k_provider.local.apiserver.objects import FOREGROUND, ORPHAN, DeleteOptions, Objects
from t9k_provider.local.apiserver.registry import BUILTIN, Registry
from t9k_provider.local.apiserver.resources import Resource
from t9k_provider.local.apiserver.strategies import rbac
from t9k_provider.local.apiserver.strategies.apiservices import (
    AUTOMANAGED,
    local_api_service,
    with_availability,
)
from t9k_provider.local.apiserver.strategies.apiservices import RESOURCE as API_SERVICES
from t9k_provider.local.apiserver.strategies.configdata import ROOT_CA_CONFIG_MAP, root_ca_config_map
from t9k_provider.local.apiserver.strategies.crds import CRD_CLEANUP, CRD_GROUP, CRD_PLURAL
from t9k_provider.local.apiserver.strategies.custom import resources_from_crd
from t9k_provider.local.apiserver.strategies.namespaces import KUBERNETES_FINALIZER
from t9k_provider.local.apiserver.strategies.serviceaccounts import default_service_account
from t9k_provider.local.machinery.jsonvalues import json_copy
from t9k_provider.local.storage.store import Event, Key

log = logging.getLogger(__name__)
EVENT_TTL_SECONDS = 3600
EVENT_SWEEP_SECONDS = 60
MIN_PASS_INTERVAL = 0.05

# The conditions of a CRD whose names were accepted: (type, reason, message).
_CRD_ACCEPTED = (
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


class Controllers:
    def __init__(self, objects: Objects, registry: Registry, root_ca: str = "") -> None:
        self.objects = objects
        self.root_ca = root_ca  # the CA bundle published in every namespace; none when empty
        self.store = objects.store
        self.registry = registry
        self._wake = asyncio.Event()
        self._deleting: set[Key] = set()
        # Dependents whose owners must be checked: every one at start, then those a write concerns.
        self._orphan_candidates: set[Key] = {
            key for uid in self.store.owner_uids() for key in self.store.dependents(uid)
        }
        self._crd_revisions: dict[str, str] = {}
        self._builtin_versions = {(r.group, r.version) for r in BUILTIN}
        for group, resource in self.store.resources():
            for obj in self.store.list(group, resource):
                if obj["metadata"].get("deletionTimestamp"):
                    self._deleting.add(
                        (group, resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                    )
        self.store.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        meta = event.obj["metadata"]
        if event.type != "DELETED" and meta.get("deletionTimestamp"):
            self._deleting.add(event.key)
        else:
            self._deleting.discard(event.key)
        if event.type == "DELETED":
            self._orphan_candidates.update(self.store.dependents(meta.get("uid", "")))
        elif meta.get("ownerReferences") and (
            event.prev is None or event.prev["metadata"].get("ownerReferences") != meta["ownerReferences"]
        ):
            self._orphan_candidates.add(event.key)
        self._wake.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_expiry = loop.time()
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 1.0)
            self._wake.clear()
            self.reconcile()
            if loop.time() >= next_expiry:
                next_expiry = loop.time() + EVENT_SWEEP_SECONDS
                self._try("expire events", self.expire_events, datetime.now(timezone.utc))
            # At most ~20 passes a second: a write burst is handled in batches.
            await asyncio.sleep(MIN_PASS_INTERVAL)

    def reconcile(self) -> None:
        """One pass of every controller; each step is independent and logs (never raises) its failures."""
        for step in (
            self.sync_crds,
            self.sync_namespaces,
            self.collect_garbage,
            self.sync_api_services,
            self.aggregate_cluster_roles,
        ):
            try:
                step()
            except Exception:
                log.exception("controller step %s failed", step.__name__)

    def _resource(self, group: str, resource: str) -> Resource | None:
        served = self.registry.storage_versions(group, resource)
        return served[0] if served else None

    def _crd_resource(self) -> Resource:
        res = self.registry.lookup(CRD_GROUP, "v1", CRD_PLURAL)
        assert res is not None
        return res

    def _try(self, what: str, action: Any, *args: Any) -> Any:
        try:
            return action(*args)
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                log.warning("%s: %s", what, exc.message)
            return None

    def _delete(self, what: str, res: Resource, namespace: str, name: str, **options: Any) -> None:
        """Delete, as ``_try`` does: the object may have gone or changed meanwhile."""
        self._try(what, self.objects.delete, res, namespace, name, DeleteOptions(**options))

    # -- CRDs ----------------------------------------------------------------------------------------------

    def sync_crds(self) -> None:
        crd_res = self._crd_resource()
        live = set()
        for crd in self.store.list(CRD_GROUP, CRD_PLURAL):
            name = crd["metadata"]["name"]
            live.add(name)
            if crd["metadata"].get("deletionTimestamp"):
                self._clean_up_crd(crd_res, crd)
                continue
            status = crd.get("status") or {}
            established = any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in status.get("conditions") or ()
            )
            if established and self._crd_revisions.get(name) == crd["metadata"]["resourceVersion"]:
                continue
            spec = crd.get("spec") or {}
            names = dict(spec.get("names") or {})
            names.setdefault("singular", names.get("kind", "").lower())
            names.setdefault("listKind", f"{names.get('kind', '')}List")
            clash = self.registry.conflicts(
                name, spec.get("group", ""), names.get("plural", ""), names.get("kind", "")
            )
            conditions = {c.get("type"): c for c in status.get("conditions") or ()}
            if clash:
                conditions["NamesAccepted"] = _condition("NamesAccepted", "False", "NameConflict", clash)
                not_accepted = _condition("Established", "False", "NotAccepted", "not all names are accepted")
                conditions.setdefault("Established", not_accepted)
            else:
                for ctype, reason, message in _CRD_ACCEPTED:
                    if conditions.get(ctype, {}).get("status") != "True":
                        conditions[ctype] = _condition(ctype, "True", reason, message)
            storage = [v["name"] for v in spec.get("versions") or () if v.get("storage")]
            stored = list(status.get("storedVersions") or ())
            stored += [v for v in storage if v not in stored]
            new_status = {**status, "conditions": list(conditions.values()), "storedVersions": stored}
            if not clash:
                new_status["acceptedNames"] = names
            if new_status != status:
                crd = (
                    self._try(f"crd {name} status", self.objects.write_status, crd_res, crd, new_status)
                    or crd
                )
            if not clash:
                self.registry.set_crd(name, resources_from_crd(crd))
            self._crd_revisions[name] = crd["metadata"]["resourceVersion"]
        for name in self.registry.crd_names():
            if name not in live:
                self.registry.drop_crd(name)
                self._crd_revisions.pop(name, None)

    def _clean_up_crd(self, crd_res: Resource, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        plural = ((crd.get("status") or {}).get("acceptedNames") or {}).get("plural") or (
            spec.get("names") or {}
        ).get("plural", "")
        group = spec.get("group", "")
        res = self._resource(group, plural)
        remaining = self.store.list(group, plural)
        if res is not None:
            for obj in remaining:
                if not obj["metadata"].get("deletionTimestamp"):
                    meta = obj["metadata"]
                    self._delete(f"delete {plural}", res, meta.get("namespace", ""), meta["name"])
        if not self.store.list(group, plural) and CRD_CLEANUP in (crd["metadata"].get("finalizers") or ()):
            new = json_copy(crd)
            new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != CRD_CLEANUP]
            self._try("finish crd deletion", self.objects.write, crd_res, crd, new)

    # -- namespaces ----------------------------------------------------------------------------------------

    def sync_namespaces(self) -> None:
        ns_res = self.registry.lookup("", "v1", "namespaces")
        sa_res = self.registry.lookup("", "v1", "serviceaccounts")
        assert ns_res is not None and sa_res is not None
        for ns in self.store.list("", "namespaces"):
            name = ns["metadata"]["name"]
            if not ns["metadata"].get("deletionTimestamp"):
                if self.store.get(("", "serviceaccounts", name, "default")) is None:
                    self._try(
                        "default service account",
                        self.objects.create,
                        sa_res,
                        name,
                        default_service_account(name),
                    )
                self._publish_root_ca(name)
                continue
            remaining = 0
            for group, resource in self.registry.namespaced_storage():
                items = self.store.list(group, resource, name)
                remaining += len(items)
                res = self._resource(group, resource)
                if res is None:
                    continue
                for obj in items:
                    if not obj["metadata"].get("deletionTimestamp"):
                        self._delete(f"delete {resource} in {name}", res, name, obj["metadata"]["name"])
            if remaining == 0 and KUBERNETES_FINALIZER in ((ns.get("spec") or {}).get("finalizers") or ()):
                new = json_copy(ns)
                new["spec"]["finalizers"] = [
                    f for f in new["spec"]["finalizers"] if f != KUBERNETES_FINALIZER
                ]
                self._try(f"finalize namespace {name}", self.objects.write, ns_res, ns, new)

    def _publish_root_ca(self, namespace: str) -> None:
        if not self.root_ca:
            return
        res = self.registry.lookup("", "v1", "configmaps")
        assert res is not None
        wanted = root_ca_config_map(namespace, self.root_ca)
        current = self.store.get(("", "configmaps", namespace, ROOT_CA_CONFIG_MAP))
        if current is None:
            self._try("publish kube-root-ca.crt", self.objects.create, res, namespace, wanted)
        elif current.get("data") != wanted["data"]:
            new = json_copy(current)
            new["data"] = wanted["data"]
            self._try("update kube-root-ca.crt", self.objects.write, res, current, new)

    # -- RBAC ----------------------------------------------------------------------------------------------

    def aggregate_cluster_roles(self) -> None:
        roles = self.store.list(rbac.GROUP, rbac.CLUSTER_ROLES.plural)
        for role in roles:
            rules = rbac.aggregated_rules(role, roles)
            if rules is None or rules == (role.get("rules") or []):
                continue
            new = json_copy(role)
            new["rules"] = rules
            self._try(
                f"aggregate clusterrole {role['metadata']['name']}",
                self.objects.write,
                rbac.CLUSTER_ROLES,
                role,
                new,
            )

    # -- APIServices ---------------------------------------------------------------------------------------

    def sync_api_services(self) -> None:
        """A local APIService per served group/version (kube-apiserver's autoregistration: built-in ones
        ``onstart``, those of CRDs ``true``, removed with their CRD), and every APIService's availability."""
        res = self.registry.lookup(API_SERVICES.group, API_SERVICES.version, API_SERVICES.plural)
        assert res is not None
        served = {
            f"{v}.{g}": (g, v) for g, versions in self.registry.group_versions().items() for v in versions
        }
        for name, (group, version) in served.items():
            if self.store.get((res.group, res.plural, "", name)) is None:
                service = local_api_service(group, version, (group, version) in self._builtin_versions)
                self._try(f"apiservice {name}", self.objects.create, res, "", service)
        for obj in self.store.list(res.group, res.plural):
            meta = obj["metadata"]
            if (meta.get("labels") or {}).get(AUTOMANAGED) == "true" and meta["name"] not in served:
                if not meta.get("deletionTimestamp"):
                    self._delete(f"apiservice {meta['name']}", res, "", meta["name"])
                continue
            status = with_availability(obj)
            if status is not None:
                self._try(f"apiservice {meta['name']}", self.objects.write_status, res, obj, status)

    # -- event TTL -----------------------------------------------------------------------------------------

    def expire_events(self, now: datetime) -> int:
        """Delete events whose last activity is older than the TTL (kube-apiserver's --event-ttl, 1 h)."""
        res = self._resource("", "events")
        assert res is not None
        expired = 0
        for event in self.store.list("", "events"):
            series = event.get("series") or {}
            stamps = [
                event.get("lastTimestamp"),
                event.get("eventTime"),
                series.get("lastObservedTime"),
                event["metadata"].get("creationTimestamp"),
            ]
            last = max((t for t in map(parse_time, stamps) if t), default=None)
            if last is not None and (now - last).total_seconds() > EVENT_TTL_SECONDS:
                meta = event["metadata"]
                self.objects.delete(res, meta.get("namespace", ""), meta["name"], DeleteOptions())
                expired += 1
        return expired

    # -- garbage collection --------------------------------------------------------------------------------

    def _owner_alive(self, dependent: dict[str, Any], ref: dict[str, Any]) -> bool:
        key = self.store.key_of_uid(ref.get("uid", ""))
        if key is None:
            return False
        namespace = dependent["metadata"].get("namespace", "")
        return not key[2] or key[2] == namespace

    def collect_garbage(self) -> None:
        """Checks only the dependents that a write may have orphaned (an owner deleted, references changed):
        a pass costs what changed, not what is stored."""
        candidates, self._orphan_candidates = self._orphan_candidates, set()
        for key in sorted(candidates):
            obj = self.store.get(key)
            if obj is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or ()
            if not all(self._owner_alive(obj, ref) for ref in refs):
                self._orphan_or_delete(key, obj)
        for key in sorted(self._deleting):
            obj = self.store.get(key)
            if obj is None:
                self._deleting.discard(key)
                continue
            finalizers = obj["metadata"].get("finalizers") or ()
            if FOREGROUND in finalizers:
                self._foreground(key, obj)
            elif ORPHAN in finalizers:
                self._orphan(key, obj)

    def _orphan_or_delete(self, key: Key, obj: dict[str, Any]) -> None:
        """All owners gone: delete (background); some gone: drop the dangling references."""
        res = self._resource(key[0], key[1])
        if res is None:
            return
        refs = obj["metadata"].get("ownerReferences") or []
        alive = [r for r in refs if self._owner_alive(obj, r)]
        if not alive:
            if not obj["metadata"].get("deletionTimestamp"):
                self._delete(f"gc {key}", res, key[2], key[3])
            return
        new = json_copy(obj)
        new["metadata"]["ownerReferences"] = alive
        self._try(f"gc refs {key}", self.objects.write, res, obj, new)

    def _foreground(self, key: Key, owner: dict[str, Any]) -> None:
        uid = owner["metadata"]["uid"]
        blocking = 0
        for dep_key in self.store.dependents(uid):
            dep = self.store.get(dep_key)
            res = self._resource(dep_key[0], dep_key[1])
            if dep is None or res is None:
                continue
            refs = [r for r in dep["metadata"].get("ownerReferences") or () if r.get("uid") == uid]
            if any(r.get("blockOwnerDeletion") for r in refs):
                blocking += 1
            if not dep["metadata"].get("deletionTimestamp"):
                self._delete(f"foreground {dep_key}", res, *dep_key[2:], propagation="Foreground")
        if blocking == 0:
            self._drop_finalizer(key, owner, FOREGROUND)

    def _orphan(self, key: Key, owner: dict[str, Any]) -> None:
        uid = owner["metadata"]["uid"]
        for dep_key in self.store.dependents(uid):
            dep = self.store.get(dep_key)
            res = self._resource(dep_key[0], dep_key[1])
            if dep is None or res is None:
                continue
            new = json_copy(dep)
            refs = [r for r in new["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._try(f"orphan {dep_key}", self.objects.write, res, dep, new)
        self._drop_finalizer(key, owner, ORPHAN)

    def _drop_finalizer(self, key: Key, obj: dict[str, Any], finalizer: str) -> None:
        res = self._resource(key[0], key[1])
        if res is None:
            return
        new = json_copy(obj)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or () if f != finalizer]
        self._try(f"drop {finalizer} from {key}", self.objects.write, res, obj, new)
