"""Acceptance: finalizers, graceful pod deletion, garbage collection, namespaces, deletecollection."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from t9k_provider.testing import LocalCluster

pytestmark = pytest.mark.cluster


def eventually(check: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def gone(read: Callable[[], object]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            read()
        except ApiException as exc:
            return exc.status == 404
        return False

    return check


def owner_ref(obj: object, **extra: object) -> dict:
    meta = obj.metadata  # type: ignore[attr-defined]
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "uid": meta.uid, **extra}


def test_finalizers_hold_the_object_until_removed(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "f", "finalizers": ["example.com/keep"]}})
    status, _, pending = cluster.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/f")
    assert status == 200 and pending["kind"] == "ConfigMap"  # the object, not a Status
    assert pending["metadata"]["deletionTimestamp"] and pending["metadata"]["deletionGracePeriodSeconds"] == 0
    _, _, again = cluster.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/f")  # a no-op
    assert again["metadata"]["resourceVersion"] == pending["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_config_map("f", ns, {"metadata": {"finalizers": ["example.com/keep", "new"]}})
    assert (
        exc.value.status == 422 and "no new finalizers can be added" in json.loads(exc.value.body)["message"]
    )
    core.patch_namespaced_config_map("f", ns, {"metadata": {"finalizers": None}})
    assert gone(lambda: core.read_namespaced_config_map("f", ns))()


def test_delete_preconditions(core: client.CoreV1Api, ns: str) -> None:
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "pre"}})
    with pytest.raises(ApiException) as exc:
        core.delete_namespaced_config_map(
            "pre", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="other"))
        )
    assert exc.value.status == 409
    core.delete_namespaced_config_map(
        "pre",
        ns,
        body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(
                uid=cm.metadata.uid, resource_version=cm.metadata.resource_version
            )
        ),
    )


def test_unscheduled_pod_is_deleted_at_once(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(
        ns, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    deleted = core.delete_namespaced_pod("p", ns)
    assert deleted.kind == "Pod" and deleted.metadata.name == "p"  # pods return the deleted object
    assert gone(lambda: core.read_namespaced_pod("p", ns))()


def test_scheduled_pod_deletion_is_graceful_until_the_kubelet_finishes(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "g"},
            "spec": {"terminationGracePeriodSeconds": 20, "containers": [{"name": "c", "image": "x"}]},
        },
    )
    cluster.request(
        "POST",
        f"/api/v1/namespaces/{ns}/pods/g/binding",
        {"metadata": {"name": "g"}, "target": {"kind": "Node", "name": "t9k-local-node"}},
    )
    pending = core.delete_namespaced_pod("g", ns, grace_period_seconds=10)
    assert pending.metadata.deletion_grace_period_seconds == 10
    assert core.read_namespaced_pod("g", ns).metadata.deletion_timestamp is not None
    shorter = core.delete_namespaced_pod("g", ns, grace_period_seconds=5)
    assert shorter.metadata.deletion_grace_period_seconds == 5
    # the kubelet's final delete: grace 0 with a uid precondition
    core.delete_namespaced_pod(
        "g",
        ns,
        body=client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=pending.metadata.uid)
        ),
    )
    assert gone(lambda: core.read_namespaced_pod("g", ns))()


def test_terminal_pod_has_no_grace(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(
        ns, {"metadata": {"name": "t"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    cluster.request(
        "POST",
        f"/api/v1/namespaces/{ns}/pods/t/binding",
        {"metadata": {"name": "t"}, "target": {"kind": "Node", "name": "t9k-local-node"}},
    )
    core.patch_namespaced_pod_status("t", ns, {"status": {"phase": "Succeeded"}})
    core.delete_namespaced_pod("t", ns)
    assert gone(lambda: core.read_namespaced_pod("t", ns))()


def test_background_garbage_collection(core: client.CoreV1Api, ns: str) -> None:
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "child", "ownerReferences": [owner_ref(owner)]}}
    )
    core.create_namespaced_secret(ns, {"metadata": {"name": "child", "ownerReferences": [owner_ref(owner)]}})
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Background")
    eventually(gone(lambda: core.read_namespaced_config_map("child", ns)))
    eventually(gone(lambda: core.read_namespaced_secret("child", ns)))


def test_foreground_deletion_waits_for_blocking_dependents(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "fg"}})
    core.create_namespaced_config_map(
        ns,
        {
            "metadata": {
                "name": "dep",
                "finalizers": ["example.com/hold"],
                "ownerReferences": [owner_ref(owner, blockOwnerDeletion=True)],
            }
        },
    )
    _, _, pending = cluster.request(
        "DELETE", f"/api/v1/namespaces/{ns}/configmaps/fg", {"propagationPolicy": "Foreground"}
    )
    assert "foregroundDeletion" in pending["metadata"]["finalizers"]
    eventually(lambda: core.read_namespaced_config_map("dep", ns).metadata.deletion_timestamp is not None)
    time.sleep(0.5)
    assert core.read_namespaced_config_map("fg", ns).metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("dep", ns, {"metadata": {"finalizers": None}})
    eventually(gone(lambda: core.read_namespaced_config_map("fg", ns)))


def test_orphan_deletion_keeps_dependents(core: client.CoreV1Api, ns: str) -> None:
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "orph"}})
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "kept", "ownerReferences": [owner_ref(owner)]}}
    )
    core.delete_namespaced_config_map("orph", ns, body=client.V1DeleteOptions(propagation_policy="Orphan"))
    eventually(gone(lambda: core.read_namespaced_config_map("orph", ns)))
    kept = core.read_namespaced_config_map("kept", ns)
    assert not kept.metadata.owner_references


def test_dangling_owner_references_are_collected(core: client.CoreV1Api, ns: str) -> None:
    alive = core.create_namespaced_config_map(ns, {"metadata": {"name": "alive"}})
    core.create_namespaced_config_map(
        ns,
        {
            "metadata": {
                "name": "dangling",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())}
                ],
            }
        },
    )
    core.create_namespaced_config_map(
        ns,
        {
            "metadata": {
                "name": "half",
                "ownerReferences": [
                    owner_ref(alive),
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())},
                ],
            }
        },
    )
    eventually(gone(lambda: core.read_namespaced_config_map("dangling", ns)))
    eventually(lambda: len(core.read_namespaced_config_map("half", ns).metadata.owner_references) == 1)


def test_cluster_scoped_owner_of_namespaced_dependents(core: client.CoreV1Api, ns: str) -> None:
    owner_ns = core.create_namespace({"metadata": {"name": f"own-{uuid.uuid4().hex[:6]}"}})
    core.create_namespaced_config_map(
        ns,
        {
            "metadata": {
                "name": "by-ns",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "name": owner_ns.metadata.name,
                        "uid": owner_ns.metadata.uid,
                    }
                ],
            }
        },
    )
    time.sleep(1.5)
    assert core.read_namespaced_config_map("by-ns", ns).metadata.name == "by-ns"


def test_namespace_lifecycle(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    name = f"life-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    eventually(lambda: bool(core.list_namespaced_service_account(name).items))  # `default` SA appears
    core.create_namespaced_config_map(name, {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    _, _, deleting = cluster.request("DELETE", f"/api/v1/namespaces/{name}")
    assert deleting["status"]["phase"] == "Terminating" and deleting["spec"]["finalizers"] == ["kubernetes"]
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map(name, {"metadata": {"name": "late"}})
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"].endswith(
        f"unable to create new content in namespace {name} because it is being terminated"
    )
    eventually(lambda: core.read_namespaced_config_map("held", name).metadata.deletion_timestamp is not None)
    assert core.read_namespace(name).status.phase == "Terminating"
    core.patch_namespaced_config_map("held", name, {"metadata": {"finalizers": None}})
    eventually(gone(lambda: core.read_namespace(name)))


def test_delete_collection_with_selector(core: client.CoreV1Api, ns: str) -> None:
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": {"app": app}}})
    core.delete_collection_namespaced_config_map(ns, label_selector="app=x")
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["c", "kube-root-ca.crt"]
