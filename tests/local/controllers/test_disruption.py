"""The disruption controller: its pure rules (expected and desired counts, healthy pods, evictions standing,
the status and its DisruptionAllowed condition, the fail-safe), and its passes driven in-process on a store:
the scale of Deployments, ReplicaSets, StatefulSets and custom resources, what a write marks, disruptedPods
that expire. Through a running cluster and kubectl: ``tests/local/apiserver/test_api_disruption.py``."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.objects import DeleteOptions, Objects
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.controllers.crds import CrdController
from t9k_provider.local.controllers.disruption import (
    DELETION_TIMEOUT,
    DisruptionController,
    SyncFailed,
    budget_status,
    count_healthy,
    disrupted_pods,
    expected_counts,
    fail_safe,
    scaled,
)
from t9k_provider.local.controllers.serverside import ServerSide
from t9k_provider.local.storage.store import Store

NOW = 1_800_000_000.0
_SCALE = {"specReplicasPath": ".spec.workers", "statusReplicasPath": ".status.workers"}
_SCHEMA = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
NS = "default"
APP = {"app": "web"}


def pod(name: str, ready: bool = True, owner: str | None = None, **meta: Any) -> dict[str, Any]:
    refs = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner, "controller": True}]
    return {
        "metadata": {"name": name, "namespace": NS, **({"ownerReferences": refs} if owner else {}), **meta},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def budget(spec: dict[str, Any], status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "b", "namespace": NS, "generation": generation},
        "spec": spec,
        "status": status or {},
    }


def scales(**replicas: int) -> Any:
    """A scale lookup over ReplicaSets named (and uid'ed) by keyword."""

    def scale_of(ref: dict[str, Any], _namespace: str) -> tuple[str, int] | None:
        name = ref["name"]
        return (name, replicas[name]) if name in replicas else None

    return scale_of


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the rules -------------------------------------------------------------------------------------------


def test_percentages_round_up_and_counts_stay() -> None:
    assert [scaled("50%", 3), scaled("10%", 1), scaled("0%", 5), scaled(2, 10)] == [2, 1, 0, 2]


def test_an_integer_min_available_expects_the_selected_pods() -> None:
    pods = [pod("a", owner="rs"), pod("b")]  # no scale is read: unmanaged pods count too
    assert expected_counts(budget({"minAvailable": 3}), pods, scales()) == (2, 3)


def test_percentages_and_max_unavailable_expect_the_controllers_scale() -> None:
    pods = [pod("a", owner="rs1"), pod("b", owner="rs1"), pod("c", owner="rs2"), pod("bare")]
    scale_of = scales(rs1=4, rs2=2)
    assert expected_counts(budget({"minAvailable": "50%"}), pods, scale_of) == (6, 3)
    assert expected_counts(budget({"maxUnavailable": 1}), pods, scale_of) == (6, 5)
    assert expected_counts(budget({"maxUnavailable": "100%"}), pods, scale_of) == (6, 0)
    assert expected_counts(budget({"maxUnavailable": 9}), pods, scale_of) == (6, 0)
    assert expected_counts(budget({}), pods, scale_of) == (0, 0)
    with pytest.raises(SyncFailed, match='found no controllers for pod "a"'):
        expected_counts(budget({"maxUnavailable": 1}), pods, scales(rs2=2))


def test_healthy_pods_are_ready_not_deleting_and_not_just_evicted() -> None:
    pods = [
        pod("ready"),
        pod("unready", ready=False),
        pod("deleting", deletionTimestamp=stamp(NOW)),
        pod("evicted"),
    ]
    assert count_healthy(pods, {"evicted": stamp(NOW)}) == 1


def test_an_eviction_stands_until_its_pod_goes_or_the_timeout() -> None:
    recorded = {
        "fresh": stamp(NOW - 10),
        "old": stamp(NOW - DELETION_TIMEOUT - 1),
        "deleting": stamp(NOW - 10),
        "gone": stamp(NOW - 10),
    }
    pods = [pod("fresh"), pod("old"), pod("deleting", deletionTimestamp=stamp(NOW))]
    kept, recheck = disrupted_pods(budget({}, {"disruptedPods": recorded}), pods, NOW)
    assert kept == {"fresh": recorded["fresh"]} and recheck == NOW - 10 + DELETION_TIMEOUT
    assert disrupted_pods(budget({}), pods, NOW) == ({}, None)


def test_the_status_allows_what_the_healthy_pods_exceed() -> None:
    pods = [pod("a", owner="rs"), pod("b", owner="rs"), pod("c", owner="rs", ready=False)]
    status, recheck = budget_status(budget({"maxUnavailable": 1}), pods, scales(rs=3), NOW)
    condition = status.pop("conditions")
    assert status == {
        "observedGeneration": 1,
        "disruptionsAllowed": 0,
        "currentHealthy": 2,
        "desiredHealthy": 2,
        "expectedPods": 3,
    }
    assert recheck is None
    assert [(c["type"], c["status"], c["reason"], c["observedGeneration"]) for c in condition] == [
        ("DisruptionAllowed", "False", "InsufficientPods", 1)
    ]
    allowing, _ = budget_status(budget({"minAvailable": 1}), pods, scales(), NOW)
    assert allowing["disruptionsAllowed"] == 1
    assert (
        allowing["conditions"][0]["status"] == "True"
        and allowing["conditions"][0]["reason"] == "SufficientPods"
    )
    # a status already up to date is returned as it is (no write)
    current = budget({"minAvailable": 1}, allowing)
    assert budget_status(current, pods, scales(), NOW)[0] is current["status"]


def test_a_budget_expecting_no_pod_allows_nothing() -> None:
    status, _ = budget_status(budget({"maxUnavailable": 1}), [], scales(), NOW)
    assert (status["expectedPods"], status["disruptionsAllowed"]) == (0, 0)


def test_fail_safe_allows_nothing_and_says_why() -> None:
    status = fail_safe(budget({}, {"disruptionsAllowed": 2, "observedGeneration": 1}), SyncFailed("no scale"))
    condition = status.pop("conditions")[0]
    assert status == {"disruptionsAllowed": 0, "observedGeneration": 1}
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "SyncFailed",
        "no scale",
    )


# -- passes on a store -----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Cluster:
    def __init__(self, tmp_path: Path) -> None:
        self.registry = ServedResources()
        self.objects = Objects(Store(tmp_path / "store.db"), self.registry)
        self.side = ServerSide(self.objects, self.registry)
        self.clock = Clock()
        self.controller = DisruptionController(self.side, self.clock)
        self.objects.store.subscribe(self.controller.note)
        self.objects.create(self.res("", "namespaces"), "", {"metadata": {"name": NS}})

    def res(self, group: str, plural: str) -> Resource:
        found = self.registry.lookup(group, "v1", plural)
        assert found is not None
        return found

    def res_custom(self, plural: str) -> Resource:
        found = self.registry.lookup("x.dev", "v1", plural)
        assert found is not None
        return found

    def create(self, group: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.objects.create(self.res(group, plural), NS, body)

    def workload(
        self, plural: str, kind: str, name: str, replicas: int, owner: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if owner is not None:
            meta["ownerReferences"] = [ref(owner)]
        template = {"metadata": {"labels": APP}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        spec = {"replicas": replicas, "selector": {"matchLabels": APP}, "template": template}
        return {
            **self.create("apps", plural, {"metadata": meta, "spec": spec}),
            "kind": kind,
            "apiVersion": "apps/v1",
        }

    def pod(self, name: str, owner: dict[str, Any] | None = None, ready: bool = True) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": APP}
        if owner is not None:
            meta["ownerReferences"] = [ref(owner)]
        created = self.create(
            "", "pods", {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "b"}]}}
        )
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "lastTransitionTime": stamp(NOW),
        }
        return self.objects.write_status(
            self.res("", "pods"), created, {"phase": "Running", "conditions": [condition]}
        )

    def budget(self, spec: dict[str, Any]) -> None:
        self.create(
            "policy",
            "poddisruptionbudgets",
            {"metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": APP}, **spec}},
        )

    def status(self) -> dict[str, Any]:
        found = self.objects.store.get(("policy", "poddisruptionbudgets", NS, "b"))
        assert found is not None
        return found["status"]


def ref(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path)


def test_a_deployments_pods_expect_its_replicas_and_a_scale_change_is_seen(cluster: Cluster) -> None:
    deployment = cluster.workload("deployments", "Deployment", "web", 3)
    rs = cluster.workload("replicasets", "ReplicaSet", "web-1", 2, owner=deployment)
    cluster.pod("web-1-a", owner=rs)
    cluster.pod("web-1-b", owner=rs)
    cluster.budget({"maxUnavailable": 1})
    cluster.controller.sync()
    assert cluster.status()["expectedPods"] == 3 and cluster.status()["disruptionsAllowed"] == 0
    res = cluster.res("apps", "deployments")
    current = cluster.objects.store.get(("apps", "deployments", NS, "web"))
    assert current is not None
    cluster.objects.write(res, current, {**current, "spec": {**current["spec"], "replicas": 2}})
    cluster.controller.sync()  # the Deployment's write marked the namespace
    assert (cluster.status()["expectedPods"], cluster.status()["disruptionsAllowed"]) == (2, 1)
    assert cluster.status()["conditions"][0]["reason"] == "SufficientPods"


def test_replicasets_and_statefulsets_give_their_own_scale(cluster: Cluster) -> None:
    rs = cluster.workload("replicasets", "ReplicaSet", "rs", 2)
    sts = cluster.workload("statefulsets", "StatefulSet", "db", 3)
    for name, owner in (("a", rs), ("b", rs), ("db-0", sts), ("db-1", sts), ("db-2", sts)):
        cluster.pod(name, owner=owner)
    cluster.budget({"minAvailable": "50%"})
    cluster.controller.sync()
    status = cluster.status()
    assert (status["expectedPods"], status["desiredHealthy"], status["currentHealthy"]) == (5, 3, 5)
    assert status["disruptionsAllowed"] == 2


def test_a_pod_whose_controller_is_gone_or_scaleless_fails_safe(cluster: Cluster) -> None:
    rs = cluster.workload("replicasets", "ReplicaSet", "rs", 1)
    cluster.pod("a", owner=rs)
    cluster.budget({"maxUnavailable": 1})
    cluster.controller.sync()
    assert cluster.status()["disruptionsAllowed"] == 1
    cluster.objects.delete(cluster.res("apps", "replicasets"), NS, "rs", DeleteOptions())
    cluster.controller.sync()
    status = cluster.status()
    condition = status["conditions"][0]
    assert status["disruptionsAllowed"] == 0
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "SyncFailed",
        'found no controllers for pod "a"',
    )


def test_a_custom_controller_counts_by_its_scale_subresource(cluster: Cluster) -> None:
    crds = cluster.res("apiextensions.k8s.io", "customresourcedefinitions")
    for plural, kind, subresources in (("trainers", "Trainer", {"scale": _SCALE}), ("plain", "Plain", {})):
        version = {
            "name": "v1",
            "served": True,
            "storage": True,
            "subresources": subresources,
            "schema": _SCHEMA,
        }
        spec = {
            "group": "x.dev",
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [version],
        }
        cluster.objects.create(crds, "", {"metadata": {"name": f"{plural}.x.dev"}, "spec": spec})
    CrdController(cluster.side).sync()
    trainers = cluster.objects.create(
        cluster.res_custom("trainers"), NS, {"metadata": {"name": "t"}, "spec": {"workers": 4}}
    )
    cluster.pod("t-0", owner={**trainers, "apiVersion": "x.dev/v1", "kind": "Trainer"})
    cluster.budget({"maxUnavailable": "25%"})
    cluster.controller.sync()
    assert (cluster.status()["expectedPods"], cluster.status()["desiredHealthy"]) == (4, 3)
    plain = cluster.objects.create(cluster.res_custom("plain"), NS, {"metadata": {"name": "p"}})
    cluster.pod("p-0", owner={**plain, "apiVersion": "x.dev/v1", "kind": "Plain"})
    cluster.controller.sync()
    assert (
        cluster.status()["conditions"][0]["message"] == "plain.x.dev does not implement the scale subresource"
    )


def test_an_eviction_entry_counts_its_pod_out_until_it_expires(cluster: Cluster) -> None:
    for name in ("a", "b"):
        cluster.pod(name)
    cluster.budget({"minAvailable": 1})
    cluster.controller.sync()
    assert cluster.status()["disruptionsAllowed"] == 1
    # what an eviction that could not delete its pod would leave: the entry, the allowance spent
    res = cluster.res("policy", "poddisruptionbudgets")
    current = cluster.objects.store.get(("policy", "poddisruptionbudgets", NS, "b"))
    assert current is not None
    spent = {**current["status"], "disruptionsAllowed": 0, "disruptedPods": {"a": stamp(NOW)}}
    cluster.objects.write_status(res, current, spent)
    cluster.controller.sync()
    assert cluster.status()["currentHealthy"] == 1 and cluster.status()["disruptedPods"] == {"a": stamp(NOW)}
    cluster.clock.now = NOW + DELETION_TIMEOUT + 1
    cluster.controller.sync()  # nothing was written: the expiry alone brings the namespace back
    assert cluster.status()["currentHealthy"] == 2 and "disruptedPods" not in cluster.status()
    assert cluster.status()["disruptionsAllowed"] == 1


def test_a_pass_looks_only_at_namespaces_written_to(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.pod("a")
    cluster.budget({"minAvailable": 1})
    cluster.controller.sync()
    cluster.controller.sync()  # the status it wrote marked the namespace once more: nothing changes
    listed: list[tuple[str, str, str | None]] = []
    store_list = cluster.objects.store.list

    def counting(group: str, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        listed.append((group, resource, namespace))
        return store_list(group, resource, namespace)

    monkeypatch.setattr(cluster.objects.store, "list", counting)
    cluster.controller.sync()
    assert listed == []  # settled: a pass reads nothing
    cluster.create("", "configmaps", {"metadata": {"name": "c"}})
    cluster.controller.sync()
    assert listed == []  # a ConfigMap changes no budget
    cluster.pod("b")
    cluster.controller.sync()
    assert ("", "pods", NS) in listed and cluster.status()["currentHealthy"] == 2
    cluster.controller.sync()  # after its own status write
    listed.clear()
    cluster.objects.create(cluster.res("", "namespaces"), "", {"metadata": {"name": "other"}})
    pod = {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "b"}]}}
    cluster.objects.create(cluster.res("", "pods"), "other", pod)
    listed.clear()  # what the pod's admission read; the pass comes next
    cluster.controller.sync()
    assert listed == [("policy", "poddisruptionbudgets", "other")]  # no budget there: its pods are not read
