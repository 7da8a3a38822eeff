"""Server-internal controllers driven in-process (no HTTP): event TTL, CRD establishing, GC passes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from t9k_provider.local.apiserver.controllers import EVENT_TTL_SECONDS, Controllers
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.resources import Registry
from t9k_provider.local.store import Store


def make(tmp_path: Path) -> tuple[Objects, Controllers, Registry]:
    registry = Registry()
    objects = Objects(Store(tmp_path / "store.db"), registry)
    ns = registry.lookup("", "v1", "namespaces")
    assert ns is not None
    objects.create(ns, "", {"metadata": {"name": "default"}})
    return objects, Controllers(objects, registry), registry


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
    assert controllers.expire_events(datetime.now(timezone.utc)) == 0
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
    assert controllers.expire_events(later) == 2
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
