"""Server-internal controllers driven in-process (no HTTP): event TTL, CRD establishing, GC passes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.local.apiserver.objects import DeleteOptions, Objects
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.controllers.eventttl import EVENT_TTL_SECONDS
from t9k_provider.local.controllers.inserver import ServerControllers
from t9k_provider.local.machinery.jsonvalues import json_copy
from t9k_provider.local.storage.store import Store


def make(tmp_path: Path) -> tuple[Objects, ServerControllers, ServedResources]:
    registry = ServedResources()
    objects = Objects(Store(tmp_path / "store.db"), registry)
    ns = registry.lookup("", "v1", "namespaces")
    assert ns is not None
    objects.create(ns, "", {"metadata": {"name": "default"}})
    return objects, ServerControllers(objects, registry), registry


def test_events_expire_after_the_ttl(tmp_path: Path) -> None:
    objects, controllers, registry = make(tmp_path)
    events = registry.lookup("", "v1", "events")
    assert events is not None
    old = (datetime.now(timezone.utc) - timedelta(seconds=EVENT_TTL_SECONDS + 60)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    for name, last in (("old", old), ("fresh", None)):
        body = {
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "R",
            "message": "m",
            "type": "Normal",
        }
        if last:
            body["lastTimestamp"] = last
        objects.create(events, "default", body)
    # the TTL runs from the last activity, and creating the event is activity (as an etcd lease per write)
    assert controllers.events.expire(datetime.now(timezone.utc)) == 0
    series = {
        "metadata": {"name": "series"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "R",
        "message": "m",
        "type": "Normal",
        "lastTimestamp": (datetime.now(timezone.utc) + timedelta(seconds=600)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    objects.create(events, "default", series)
    later = datetime.now(timezone.utc) + timedelta(seconds=EVENT_TTL_SECONDS + 5)
    assert controllers.events.expire(later) == 2
    assert [e["metadata"]["name"] for e in objects.list(events, "default")] == ["series"]


def test_reconcile_establishes_crds_and_creates_default_service_accounts(tmp_path: Path) -> None:
    objects, controllers, registry = make(tmp_path)
    crds = registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crds is not None
    objects.create(
        crds,
        "",
        {
            "metadata": {"name": "things.x.dev"},
            "spec": {
                "group": "x.dev",
                "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        },
    )
    assert registry.lookup("x.dev", "v1", "things") is None
    controllers.reconcile()
    thing = registry.lookup("x.dev", "v1", "things")
    assert thing is not None and thing.kind == "Thing" and thing.singular == "thing"
    accounts = registry.lookup("", "v1", "serviceaccounts")
    assert accounts is not None
    assert [a["metadata"]["name"] for a in objects.list(accounts, "default")] == ["default"]
    assert registry.lookup("", "v1", "podtemplates") is not None


def _configmap(name: str, *owners: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owners:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": o["metadata"]["name"],
                "uid": o["metadata"]["uid"],
            }
            for o in owners
        ]
    return {"metadata": meta}


def test_gc_collects_dependents_of_a_deleted_owner_and_drops_dangling_references(tmp_path: Path) -> None:
    objects, controllers, registry = make(tmp_path)
    cms = registry.lookup("", "v1", "configmaps")
    assert cms is not None
    owner = objects.create(cms, "default", _configmap("owner"))
    other = objects.create(cms, "default", _configmap("other"))
    objects.create(cms, "default", _configmap("child", owner))
    objects.create(cms, "default", _configmap("half", owner, other))
    controllers.reconcile()
    assert len(objects.list(cms, "default")) == 4  # every owner alive: nothing collected
    objects.delete(cms, "default", "owner", DeleteOptions())
    controllers.reconcile()
    left = {o["metadata"]["name"]: o for o in objects.list(cms, "default")}
    assert sorted(left) == ["half", "other"]
    assert [r["name"] for r in left["half"]["metadata"]["ownerReferences"]] == ["other"]
    # a dependent written with a reference to an owner that does not exist is collected too
    objects.create(
        cms, "default", _configmap("dangling", {"metadata": {"name": "ghost", "uid": "no-such-uid"}})
    )
    controllers.reconcile()
    assert objects.store.get(("", "configmaps", "default", "dangling")) is None


def test_gc_pass_reads_only_what_writes_concerned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settled dependents cost nothing per pass, so passes stay cheap however many objects are stored."""
    objects, controllers, registry = make(tmp_path)
    cms = registry.lookup("", "v1", "configmaps")
    assert cms is not None
    owner = objects.create(cms, "default", _configmap("owner"))
    for i in range(50):
        objects.create(cms, "default", _configmap(f"dep-{i}", owner))
    controllers.reconcile()
    reads: list[object] = []
    real_get = objects.store.get
    monkeypatch.setattr(objects.store, "get", lambda key: reads.append(key) or real_get(key))
    controllers.garbage.sync()
    assert reads == []
    current = real_get(("", "configmaps", "default", "dep-7"))
    assert current is not None
    unowned = json_copy(current)
    del unowned["metadata"]["ownerReferences"]
    objects.write(cms, current, unowned)  # references dropped: no owner to check
    objects.create(cms, "default", _configmap("late", owner))
    reads.clear()  # the writes' own reads
    controllers.garbage.sync()
    assert reads == [("", "configmaps", "default", "late")]


def test_gc_checks_every_dependent_after_a_restart(tmp_path: Path) -> None:
    """Owners deleted while no controller ran (e.g. a crash between the two writes) are found at start."""
    objects, _, registry = make(tmp_path)
    cms = registry.lookup("", "v1", "configmaps")
    assert cms is not None
    owner = objects.create(cms, "default", _configmap("owner"))
    objects.create(cms, "default", _configmap("child", owner))
    objects.store.delete(("", "configmaps", "default", "owner"))  # under the controller's feet
    objects.store.close()
    registry = ServedResources()
    restarted = Objects(Store(tmp_path / "store.db"), registry)
    ServerControllers(restarted, registry).reconcile()
    assert restarted.store.get(("", "configmaps", "default", "child")) is None
