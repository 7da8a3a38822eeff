"""The scheduler against the Node's capacity on a running local cluster (simulated kubelet): pods wait with
kube-scheduler's message until room frees or the Node grows, and PodGroup gangs are placed whole or not at
all."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.jobs.contract import LABEL_GROUP_NAME, T9K_SCHEDULER_NAME
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.clusters import cluster_fixture
from tests.support.pods import pod_names

pytestmark = pytest.mark.cluster

TWO_CPUS = "0/1 nodes are available: 1 Insufficient cpu."


cluster = cluster_fixture(kubelet="simulated", flink_operator=False, capacity={"cpus": "2", "memory": "4Gi"})


@pytest.fixture(scope="module")
def custom(cluster: LocalCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"s-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)  # frees the node's room for the next test
    wait_for("namespace gone", none_left(lambda: pod_names(core, name)))


@pytest.fixture(scope="module")
def untouchable(cluster: LocalCluster) -> str:
    """A PriorityClass above every gang here: its pods are never preempted by them."""
    scheduling = client.SchedulingV1Api(cluster.api_client())
    scheduling.create_priority_class({"metadata": {"name": "untouchable"}, "value": 1000})
    return "untouchable"


def pod(name: str, cpu: str, group: str | None = None, priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox:1", "resources": {"requests": {"cpu": cpu}}}],
        "terminationGracePeriodSeconds": 0,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: dict[str, Any] = {"name": name}
    if group:
        spec["schedulerName"] = T9K_SCHEDULER_NAME
        meta["labels"] = {LABEL_GROUP_NAME: group}
    return {"metadata": meta, "spec": spec}


def bound(core: client.CoreV1Api, ns: str) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(ns).items if p.spec.node_name}


def scheduled_condition(core: client.CoreV1Api, ns: str, name: str) -> client.V1PodCondition | None:
    conditions = core.read_namespaced_pod_status(name, ns).status.conditions or ()
    return next((c for c in conditions if c.type == "PodScheduled"), None)


def set_node_cpus(core: client.CoreV1Api, cpus: str) -> None:
    body = {"status": {"capacity": {"cpu": cpus}, "allocatable": {"cpu": cpus}}}
    core.patch_node_status(FIRST_NODE, body)


def test_node_advertises_the_capacity_it_was_given(core: client.CoreV1Api) -> None:
    status = core.read_node(FIRST_NODE).status
    assert status.capacity["cpu"] == "2" and status.allocatable["memory"] == "4Gi"
    assert status.allocatable["pods"] == "110"


def test_pod_waits_with_the_schedulers_message_until_capacity_is_raised(
    core: client.CoreV1Api, ns: str
) -> None:
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"p{i}", "1"))
    wait_for("two pods bound", lambda: len(bound(core, ns)) == 2)
    (waiting,) = {"p0", "p1", "p2"} - bound(core, ns)
    cond = wait_for("PodScheduled=False", lambda: scheduled_condition(core, ns, waiting))
    assert (cond.status, cond.reason, cond.message) == ("False", "Unschedulable", TWO_CPUS)
    events = wait_for(
        "FailedScheduling event",
        lambda: [e for e in core.list_namespaced_event(ns).items if e.reason == "FailedScheduling"],
    )
    assert events[0].involved_object.name == waiting and events[0].message == TWO_CPUS
    assert events[0].type == "Warning"
    time.sleep(1)
    assert len(bound(core, ns)) == 2, "the third pod must keep waiting while nothing changes"
    set_node_cpus(core, "3")
    try:
        wait_for("third pod bound once the node grows", lambda: len(bound(core, ns)) == 3)
        assert scheduled_condition(core, ns, waiting).status == "True"
    finally:
        set_node_cpus(core, "2")


def test_pod_is_bound_when_a_pod_on_the_node_goes(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, pod("big", "2"))
    wait_for("big bound", lambda: bound(core, ns) == {"big"})
    core.create_namespaced_pod(ns, pod("next", "1"))
    wait_for("next waits", lambda: scheduled_condition(core, ns, "next"))
    core.delete_namespaced_pod("big", ns, grace_period_seconds=0)
    wait_for("next bound once big is gone", lambda: "next" in bound(core, ns))


def create_podgroup(custom: client.CustomObjectsApi, ns: str, name: str, priority: int = 0) -> None:
    body = {
        "apiVersion": "scheduler.tensorstack.dev/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 2, "queue": "default", "priority": priority},
    }
    custom.create_namespaced_custom_object("scheduler.tensorstack.dev", "v1beta1", ns, "podgroups", body)


def test_two_gangs_that_do_not_both_fit_never_interleave(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str
) -> None:
    for group in ("a", "b"):
        create_podgroup(custom, ns, group)
    # interleaved creation: a0, b0, a1, b1; each gang needs 2 CPUs and the node has 2
    for i in range(2):
        for group in ("a", "b"):
            core.create_namespaced_pod(ns, pod(f"{group}{i}", "1", group))
    first = wait_for("one gang bound", lambda: bound(core, ns))
    time.sleep(1)
    assert bound(core, ns) in ({"a0", "a1"}, {"b0", "b1"}), bound(core, ns)
    loser = "b" if "a0" in first else "a"
    cond = wait_for("losing gang told why", lambda: scheduled_condition(core, ns, f"{loser}0"))
    assert cond.message.startswith(TWO_CPUS)
    for i in range(2):
        core.delete_namespaced_pod(f"{'ab'.replace(loser, '')}{i}", ns, grace_period_seconds=0)
    wait_for("the other gang bound whole", lambda: bound(core, ns) == {f"{loser}0", f"{loser}1"})


def test_freed_room_goes_to_the_higher_priority_gang(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str, untouchable: str
) -> None:
    core.create_namespaced_pod(ns, pod("hog", "2", priority_class=untouchable))
    wait_for("hog bound", lambda: bound(core, ns) == {"hog"})
    create_podgroup(custom, ns, "low", priority=10)
    create_podgroup(custom, ns, "high", priority=90)
    for group in ("low", "high"):  # the low-priority gang is older
        for i in range(2):
            core.create_namespaced_pod(ns, pod(f"{group}{i}", "1", group))
            time.sleep(0.05)
    for name in ("low0", "low1", "high0", "high1"):
        wait_for(f"{name} waits", lambda name=name: scheduled_condition(core, ns, name))
    core.delete_namespaced_pod("hog", ns, grace_period_seconds=0)
    wait_for("the high-priority gang bound", lambda: bound(core, ns) == {"high0", "high1"})
    time.sleep(1)
    assert bound(core, ns) == {"high0", "high1"}
