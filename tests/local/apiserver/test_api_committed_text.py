"""Responses and watch frames reuse the JSON an object was committed as: it must stay that object's JSON."""

from __future__ import annotations

import json
from pathlib import Path

from t9k_provider.local.apiserver.objects import STATUS_WRITE, DeleteOptions, Objects
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.controllers.inserver import ServerControllers
from t9k_provider.local.storage.store import Store


def test_every_write_path_leaves_each_stored_object_equal_to_its_text(tmp_path: Path) -> None:
    registry = ServedResources()
    store = Store(tmp_path / "store.db")
    objects = Objects(store, registry)
    ns, pods, cms = (registry.lookup("", "v1", r) for r in ("namespaces", "pods", "configmaps"))
    assert ns is not None and pods is not None and cms is not None
    objects.create(ns, "", {"metadata": {"name": "default"}})
    controllers = ServerControllers(objects, registry)
    pod = {
        "metadata": {"name": "p", "finalizers": ["x/y"]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    created = objects.create(pods, "default", pod)
    assert objects.text(pods, created) == json.dumps(created, separators=(",", ":"))
    objects.patch(pods, "default", "p", b'{"metadata":{"labels":{"a":"1"}}}', "application/merge-patch+json")
    objects.patch(
        pods,
        "default",
        "p",
        b'{"status":{"phase":"Running"}}',
        "application/merge-patch+json",
        STATUS_WRITE,
    )
    objects.patch(
        pods,
        "default",
        "p",
        b'{"spec":{"containers":[{"name":"c","image":"j"}]}}',
        "application/strategic-merge-patch+json",
    )
    objects.apply(pods, "default", "p", b"metadata:\n  annotations:\n    b: '2'\n")
    current = objects.get(pods, "default", "p")
    objects.write_status(pods, current, {"phase": "Succeeded"})
    objects.create(cms, "default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    objects.update(cms, "default", "c", {"metadata": {"name": "c"}, "data": {"k": "w"}})
    objects.delete(pods, "default", "p", DeleteOptions(grace_period=0))  # held by its finalizer
    controllers.reconcile()
    for group, resource in store.resources():
        for obj in store.list(group, resource):
            meta = obj["metadata"]
            text = store.text((group, resource, meta.get("namespace", ""), meta["name"]), obj)
            assert text is not None and json.loads(text) == obj, meta["name"]
    held = objects.get(pods, "default", "p")
    assert held["metadata"]["deletionTimestamp"] and held["spec"]["containers"][0]["image"] == "j"
    assert json.loads(objects.text(pods, held)) == held
    assert objects.text(pods, created) == json.dumps(
        created, separators=(",", ":")
    )  # a stale object: encoded
