"""Garbage collection by owner references: a dependent whose owners are all gone is deleted (background), one
that lost some drops the dangling references; an owner deleted in the foreground waits for its blocking
dependents, one deleted with orphaning releases them first (kube-controller-manager's garbage collector)."""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.local.apiserver.objects import FOREGROUND, ORPHAN
from t9k_provider.local.controllers.serverside import Retries, ServerSide
from t9k_provider.local.machinery.jsonvalues import json_copy
from t9k_provider.local.storage.store import Event, Key


class GarbageCollector:
    def __init__(self, side: ServerSide) -> None:
        self.side = side
        # Dependents whose owners must be checked: every one at start, then those a write concerns.
        self._candidates: set[Key] = set()
        self._deleting: set[Key] = set()  # objects being deleted: their finalizers may be the collector's
        self.retries = Retries("garbage collector")
        self.check_all()

    def check_all(self) -> None:
        """Look at everything again (at start, and when a write could not be noted)."""
        store = self.side.store
        self._candidates.update(key for uid in store.owner_uids() for key in store.dependents(uid))
        for group, resource in store.resources():
            for obj in store.list(group, resource):
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    self._deleting.add((group, resource, meta.get("namespace", ""), meta["name"]))

    def note(self, event: Event) -> None:
        """What a write means for the next pass: an owner gone, references changed, a deletion begun."""
        meta = event.obj["metadata"]
        if event.type != "DELETED" and meta.get("deletionTimestamp"):
            self._deleting.add(event.key)
        else:
            self._deleting.discard(event.key)
        if event.type == "DELETED":
            self._candidates.update(self.side.store.dependents(meta.get("uid", "")))
        elif meta.get("ownerReferences") and (
            event.prev is None or event.prev["metadata"].get("ownerReferences") != meta["ownerReferences"]
        ):
            self._candidates.add(event.key)

    def due_in(self) -> float | None:
        return self.retries.due_in()

    def sync(self) -> None:
        """Checks only the dependents that a write may have orphaned (an owner deleted, references changed):
        a pass costs what changed, not what is stored. A candidate whose check failed (or is backing off)
        stays a candidate."""
        candidates, self._candidates = self._candidates, set()
        for key in sorted(candidates):
            if not self.retries.run(key, partial(self._check, key)):
                self._candidates.add(key)
        for key in sorted(self._deleting):
            self.retries.run(key, partial(self._finish_deleting, key))

    def _check(self, key: Key) -> None:
        obj = self.side.store.get(key)
        if obj is None:
            return
        refs = obj["metadata"].get("ownerReferences") or ()
        if not all(self._owner_alive(obj, ref) for ref in refs):
            self._orphan_or_delete(key, obj)

    def _finish_deleting(self, key: Key) -> None:
        obj = self.side.store.get(key)
        if obj is None:
            self._deleting.discard(key)
            return
        finalizers = obj["metadata"].get("finalizers") or ()
        if FOREGROUND in finalizers:
            self._foreground(key, obj)
        elif ORPHAN in finalizers:
            self._orphan(key, obj)

    def _owner_alive(self, dependent: dict[str, Any], ref: dict[str, Any]) -> bool:
        key = self.side.store.key_of_uid(ref.get("uid", ""))
        if key is None:
            return False
        namespace = dependent["metadata"].get("namespace", "")
        return not key[2] or key[2] == namespace

    def _orphan_or_delete(self, key: Key, obj: dict[str, Any]) -> None:
        """All owners gone: delete (background); some gone: drop the dangling references."""
        side = self.side
        res = side.resource(key[0], key[1])
        if res is None:
            return
        refs = obj["metadata"].get("ownerReferences") or []
        alive = [r for r in refs if self._owner_alive(obj, r)]
        if not alive:
            if not obj["metadata"].get("deletionTimestamp"):
                side.delete(f"gc {key}", res, key[2], key[3])
            return
        new = json_copy(obj)
        new["metadata"]["ownerReferences"] = alive
        side.attempt(f"gc refs {key}", side.objects.write, res, obj, new)

    def _foreground(self, key: Key, owner: dict[str, Any]) -> None:
        side, uid, blocking = self.side, owner["metadata"]["uid"], 0
        for dep_key in side.store.dependents(uid):
            dep = side.store.get(dep_key)
            res = side.resource(dep_key[0], dep_key[1])
            if dep is None or res is None:
                continue
            refs = [r for r in dep["metadata"].get("ownerReferences") or () if r.get("uid") == uid]
            if any(r.get("blockOwnerDeletion") for r in refs):
                blocking += 1
            if not dep["metadata"].get("deletionTimestamp"):
                side.delete(f"foreground {dep_key}", res, *dep_key[2:], propagation="Foreground")
        if blocking == 0:
            self._drop_finalizer(key, owner, FOREGROUND)

    def _orphan(self, key: Key, owner: dict[str, Any]) -> None:
        side, uid = self.side, owner["metadata"]["uid"]
        for dep_key in side.store.dependents(uid):
            dep = side.store.get(dep_key)
            res = side.resource(dep_key[0], dep_key[1])
            if dep is None or res is None:
                continue
            new = json_copy(dep)
            refs = [r for r in new["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            side.attempt(f"orphan {dep_key}", side.objects.write, res, dep, new)
        self._drop_finalizer(key, owner, ORPHAN)

    def _drop_finalizer(self, key: Key, obj: dict[str, Any], finalizer: str) -> None:
        side = self.side
        res = side.resource(key[0], key[1])
        if res is None:
            return
        new = json_copy(obj)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or () if f != finalizer]
        side.attempt(f"drop {finalizer} from {key}", side.objects.write, res, obj, new)
