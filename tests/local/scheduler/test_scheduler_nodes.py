"""The scheduler on two simulated nodes: a gang spans them, and a higher-priority gang preempts a lower one
whole (DisruptionTarget PreemptionByScheduler, a Preempted event naming the preemptor, nominatedNodeName),
while a pod of equal priority, or one whose class says `preemptionPolicy: Never`, only waits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.jobs.contract import LABEL_GROUP_NAME, T9K_SCHEDULER_NAME
from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.clusters import cluster_fixture
from tests.support.pods import pod_names

pytestmark = pytest.mark.cluster

cluster = cluster_fixture(
    nodes=2, kubelet="simulated", flink_operator=False, capacity={"cpus": "2", "memory": "4Gi"}
)


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture(scope="module")
def custom(cluster: LocalCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"n-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
    wait_for("namespace emptied", none_left(lambda: pod_names(core, name)))


def podgroup(custom: client.CustomObjectsApi, ns: str, name: str, priority: int, members: int = 2) -> None:
    body = {
        "apiVersion": "scheduler.tensorstack.dev/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": members, "queue": "default", "priority": priority},
    }
    custom.create_namespaced_custom_object("scheduler.tensorstack.dev", "v1beta1", ns, "podgroups", body)


def pod(name: str, cpu: str, group: str | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    body = {
        "containers": [{"name": "c", "image": "busybox:1", "resources": {"requests": {"cpu": cpu}}}],
        **spec,
    }
    if group:
        body["schedulerName"] = T9K_SCHEDULER_NAME
        meta["labels"] = {LABEL_GROUP_NAME: group}
    return {"metadata": meta, "spec": body}


def nodes_of(core: client.CoreV1Api, ns: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(ns).items if p.spec.node_name}


def test_a_gang_spans_nodes_and_a_higher_priority_gang_preempts_it_whole(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str
) -> None:
    podgroup(custom, ns, "train", priority=50)
    for i in range(2):
        core.create_namespaced_pod(ns, pod(f"train-{i}", "2", "train"))
    placed = wait_for("the gang bound", lambda: len(nodes_of(core, ns)) == 2 and nodes_of(core, ns))
    assert sorted(placed.values()) == ["t9k-local-node", "t9k-local-node-1"]  # 2 CPUs each: one per node
    watch_uids = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(ns).items}
    podgroup(custom, ns, "urgent", priority=80)
    for i in range(2):
        core.create_namespaced_pod(ns, pod(f"urgent-{i}", "1", "urgent"))
    wait_for("the urgent gang bound", lambda: {"urgent-0", "urgent-1"} <= nodes_of(core, ns).keys(), 60)
    # One node's room was enough, but the gang went whole: what is left of it is terminating (a victim on
    # the other node may still be in its grace period when the urgent gang binds on the freed node).
    train = [p for p in core.list_namespaced_pod(ns).items if p.metadata.name in ("train-0", "train-1")]
    assert all(p.metadata.deletion_timestamp for p in train), [p.metadata.name for p in train]
    events = core.list_namespaced_event(ns, field_selector="reason=Preempted").items
    preempted = {e.involved_object.uid: e.message for e in events}
    assert preempted.keys() == set(watch_uids.values()), preempted
    assert all(
        f"Preempted by PodGroup {ns}/urgent" in m and "(priority 80 > 50)" in m for m in preempted.values()
    )


def test_equal_priority_and_a_never_preempting_class_only_wait(
    cluster: LocalCluster, core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str
) -> None:
    scheduling = client.SchedulingV1Api(cluster.api_client())
    name = f"polite-{ns}"
    scheduling.create_priority_class({"metadata": {"name": name}, "value": 1000, "preemptionPolicy": "Never"})
    podgroup(custom, ns, "first", priority=50)
    for i in range(2):
        core.create_namespaced_pod(ns, pod(f"first-{i}", "2", "first"))
    wait_for("the first gang bound", lambda: len(nodes_of(core, ns)) == 2)
    podgroup(custom, ns, "peer", priority=50)
    for i in range(2):
        core.create_namespaced_pod(ns, pod(f"peer-{i}", "1", "peer"))
    core.create_namespaced_pod(ns, pod("polite", "1", priorityClassName=name))
    for waiting in ("peer-0", "polite"):
        condition = wait_for(
            f"{waiting} told why it waits",
            lambda w=waiting: next(
                (
                    c
                    for c in core.read_namespaced_pod(w, ns).status.conditions or []
                    if c.type == "PodScheduled"
                ),
                None,
            ),
        )
        assert condition.reason == "Unschedulable" and "Insufficient cpu" in condition.message
    assert core.read_namespaced_pod("polite", ns).spec.priority == 1000  # Priority admission
    assert sorted(nodes_of(core, ns)) == ["first-0", "first-1"]
    assert not core.list_namespaced_event(ns, field_selector="reason=Preempted").items
    scheduling.delete_priority_class(name)
