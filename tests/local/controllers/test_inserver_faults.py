"""The API server's own controllers under failures of one object's step: the failure is logged with the
object's key, the other objects are handled in the same pass, and the failed one is tried again after a
backoff until it succeeds (`serverside.Retries`). A write whose change the garbage collector fails to note
still succeeds, and nothing is lost.

The failures are injected into one step (a bug or an unexpected error cannot be produced otherwise); the
controllers run in-process on a real store, as in test_inserver.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.local.apiserver.objects import DeleteOptions, Objects
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.controllers import crds as crd_controller
from t9k_provider.local.controllers import namespaces as namespace_controller
from t9k_provider.local.controllers.eventttl import EVENT_TTL_SECONDS
from t9k_provider.local.controllers.inserver import ServerControllers
from t9k_provider.local.storage.store import Store
from t9k_provider.testing import wait_for


def make(tmp_path: Path) -> tuple[Objects, ServerControllers, ServedResources]:
    registry = ServedResources()
    objects = Objects(Store(tmp_path / "store.db"), registry)
    ns = registry.lookup("", "v1", "namespaces")
    assert ns is not None
    objects.create(ns, "", {"metadata": {"name": "default"}})
    return objects, ServerControllers(objects, registry), registry


def failing(times: int, when: Callable[..., bool], real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, except that its first ``times`` calls for which ``when(*args)`` holds raise."""
    left = [times]

    def call(*args: Any, **kwargs: Any) -> Any:
        if left[0] and when(*args, **kwargs):
            left[0] -= 1
            raise RuntimeError("injected failure")
        return real(*args, **kwargs)

    return call


def messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def crd(plural: str) -> dict[str, Any]:
    kind = plural[:-1].replace("-", "").capitalize()
    return {
        "metadata": {"name": f"{plural}.x.dev"},
        "spec": {
            "group": "x.dev",
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def test_a_crd_that_fails_holds_up_no_other_and_is_established_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    objects, controllers, registry = make(tmp_path)
    crds = registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crds is not None
    objects.create(crds, "", crd("apples"))
    objects.create(crds, "", crd("pears"))
    real = crd_controller.resources_from_crd
    broken = failing(2, lambda c: c["metadata"]["name"] == "apples.x.dev", real)
    monkeypatch.setattr(crd_controller, "resources_from_crd", broken)

    controllers.reconcile()
    assert registry.lookup("x.dev", "v1", "pears") is not None, "the pass went on past the failing CRD"
    assert registry.lookup("x.dev", "v1", "apples") is None
    failed = messages(caplog, "crd controller apples.x.dev: failed, retrying in")
    assert len(failed) == 1

    def established() -> bool:
        controllers.reconcile()
        return registry.lookup("x.dev", "v1", "apples") is not None

    wait_for("apples established after its failures", established, 10, 0.05)
    assert len(messages(caplog, "crd controller apples.x.dev: failed")) == 2


def test_the_task_passes_when_a_backoff_ends_and_never_while_nothing_is_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ServerControllers.run` keeps no timer of its own (an idle cluster's server stays idle): once settled,
    it makes no pass while nothing changes; a CRD whose step failed once is established when its backoff ends,
    though nothing was written meanwhile."""
    objects, controllers, registry = make(tmp_path)
    crds = registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crds is not None
    passes: list[int] = []  # the store's revision as each pass began
    real_pass = controllers.reconcile
    monkeypatch.setattr(
        controllers, "reconcile", lambda: (passes.append(objects.store.revision), real_pass())
    )
    real = crd_controller.resources_from_crd
    monkeypatch.setattr(crd_controller, "resources_from_crd", failing(1, lambda c: True, real))

    async def scenario() -> int:
        task = asyncio.create_task(controllers.run())
        # settled: the last pass began at the current revision, so it wrote nothing (the default objects are
        # written by the first passes); a pass never runs while this coroutine does (one event loop)
        for _ in range(200):
            await asyncio.sleep(0.05)
            if passes and passes[-1] == objects.store.revision:
                break
        settled = len(passes)
        await asyncio.sleep(2.0)
        idle = len(passes) - settled
        objects.create(crds, "", crd("apples"))  # its first step fails: the retry needs a pass of its own
        for _ in range(100):
            if registry.lookup("x.dev", "v1", "apples") is not None:
                break
            await asyncio.sleep(0.05)
        task.cancel()
        return idle

    assert asyncio.run(scenario()) == 0, "passes while nothing changed and nothing was due"
    assert registry.lookup("x.dev", "v1", "apples") is not None, "no pass when its backoff ended"


def test_a_namespace_that_fails_holds_up_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    objects, controllers, registry = make(tmp_path)
    namespaces, accounts = (
        registry.lookup("", "v1", "namespaces"),
        registry.lookup("", "v1", "serviceaccounts"),
    )
    assert namespaces is not None and accounts is not None
    for name in ("ant", "bee"):
        objects.create(namespaces, "", {"metadata": {"name": name}})
    real = namespace_controller.default_service_account
    monkeypatch.setattr(
        namespace_controller, "default_service_account", failing(1, lambda ns: ns == "ant", real)
    )

    controllers.reconcile()
    assert [a["metadata"]["name"] for a in objects.list(accounts, "bee")] == ["default"]
    assert objects.list(accounts, "ant") == []
    assert messages(caplog, "namespace controller ant: failed, retrying in")

    def served() -> bool:
        controllers.reconcile()
        return bool(objects.list(accounts, "ant"))

    wait_for("ant's default ServiceAccount", served, 10, 0.05)


def _configmap(name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"]}
        meta["ownerReferences"] = [{**ref, "uid": owner["metadata"]["uid"]}]
    return {"metadata": meta}


def test_a_dependent_whose_collection_fails_is_collected_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    objects, controllers, registry = make(tmp_path)
    cms = registry.lookup("", "v1", "configmaps")
    assert cms is not None
    owner = objects.create(cms, "default", _configmap("owner"))
    for name in ("first", "second"):
        objects.create(cms, "default", _configmap(name, owner))
    controllers.reconcile()
    broken = failing(1, lambda _res, _ns, name, _opts: name == "second", objects.delete)
    monkeypatch.setattr(objects, "delete", broken)
    objects.delete(cms, "default", "owner", DeleteOptions())

    controllers.reconcile()
    assert [o["metadata"]["name"] for o in objects.list(cms, "default")] == ["second"]

    def collected() -> bool:
        controllers.reconcile()
        return objects.store.get(("", "configmaps", "default", "second")) is None

    wait_for("second collected after its failure: it stayed a candidate", collected, 10, 0.05)
    assert messages(caplog, "garbage collector configmaps default/second: failed, retrying in")


def test_a_write_the_collector_fails_to_note_succeeds_and_is_collected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    objects, controllers, registry = make(tmp_path)
    cms = registry.lookup("", "v1", "configmaps")
    assert cms is not None
    owner = objects.create(cms, "default", _configmap("owner"))
    objects.create(cms, "default", _configmap("child", owner))
    controllers.reconcile()
    monkeypatch.setattr(
        controllers.garbage, "note", failing(1, lambda _event: True, controllers.garbage.note)
    )

    objects.delete(cms, "default", "owner", DeleteOptions())  # the client's write succeeds
    assert messages(caplog, "garbage collector: noting")
    controllers.reconcile()
    assert objects.store.get(("", "configmaps", "default", "child")) is None


def test_an_event_whose_expiry_fails_holds_up_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    objects, controllers, registry = make(tmp_path)
    events = registry.lookup("", "v1", "events")
    assert events is not None
    old = (datetime.now(timezone.utc) - timedelta(seconds=EVENT_TTL_SECONDS + 60)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    for name in ("e1", "e2"):
        body = {
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "R",
            "message": "m",
            "type": "Normal",
            "lastTimestamp": old,
        }
        objects.create(events, "default", body)
    later = datetime.now(timezone.utc) + timedelta(seconds=EVENT_TTL_SECONDS + 5)
    monkeypatch.setattr(
        objects, "delete", failing(1, lambda _res, _ns, name, _opts: name == "e1", objects.delete)
    )

    assert controllers.events.expire(later) == 1
    assert [e["metadata"]["name"] for e in objects.list(events, "default")] == ["e1"]
    assert messages(caplog, "event expiry events default/e1: failed, retrying in")

    def expired() -> bool:
        controllers.events.expire(later)
        return objects.list(events, "default") == []

    wait_for("e1 expired after its failure", expired, 10, 0.05)
