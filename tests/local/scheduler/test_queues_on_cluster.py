"""Queues on a running cluster (simulated kubelet, simulated GPUs): whole gangs admitted within the quota, the
others waiting with their position in the PodGroup's status and their pods' message, a closed, missing or
deleted Queue, a namespace the Queue refuses, a Queue's nodes, and maxDuration; a Queue whose fields do not
validate, and a T9k Job naming a missing or closed Queue, refused."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.jobs.contract import LABEL_GROUP_NAME, T9K_SCHEDULER_NAME
from t9k_provider.kube.resources import GPU
from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.clusters import cluster_fixture
from tests.support.pods import pod_names

pytestmark = pytest.mark.cluster

GROUP, VERSION = "scheduler.tensorstack.dev", "v1beta1"

cluster = cluster_fixture(
    nodes=2, kubelet="simulated", flink_operator=False, capacity={"cpus": "8", "memory": "16Gi", "gpus": "4"}
)


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture(scope="module")
def custom(cluster: LocalCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"q-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"team": "ml"}}})
    yield name
    core.delete_namespace(name)
    wait_for("namespace emptied", none_left(lambda: pod_names(core, name)))


@pytest.fixture
def queue(custom: client.CustomObjectsApi) -> Iterator[Any]:
    """Creates Queues (named uniquely) and deletes them at the end."""
    made: list[str] = []

    def create(prefix: str = "gpu", **spec: Any) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        custom.create_cluster_custom_object(GROUP, VERSION, "queues", body)
        made.append(name)
        return name

    yield create
    for name in made:
        with contextlib.suppress(client.ApiException):  # a test deleted it already
            custom.delete_cluster_custom_object(GROUP, VERSION, "queues", name)


def gang(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    ns: str,
    name: str,
    queue: str,
    gpus: int = 1,
    priority: int = 0,
) -> None:
    """A PodGroup of two pods asking ``gpus`` GPU each."""
    pg = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": name},
          "spec": {"minMember": 2, "queue": queue, "priority": priority}}  # fmt: skip
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "podgroups", pg)
    for i in range(2):
        limits = {GPU: str(gpus)} if gpus else {}
        container = {
            "name": "c",
            "image": "busybox:1",
            "resources": {"requests": {"cpu": "1", **limits}, "limits": limits},
        }
        pod = {"metadata": {"name": f"{name}-{i}", "labels": {LABEL_GROUP_NAME: name}},
               "spec": {"schedulerName": T9K_SCHEDULER_NAME, "containers": [container]}}  # fmt: skip
        core.create_namespaced_pod(ns, pod)


def podgroup(custom: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(GROUP, VERSION, ns, "podgroups", name)


def admitted(custom: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any]:
    status = podgroup(custom, ns, name).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Admitted"), {})


def bound(core: client.CoreV1Api, ns: str) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(ns).items if p.spec.node_name}


def test_a_queue_of_two_gpus_admits_one_of_three_gangs_whole_and_the_others_wait_in_line(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str, queue: Any
) -> None:
    name = queue(quota={"requests": {GPU: 2}})
    for job in ("first", "second", "third"):
        gang(core, custom, ns, job, name)
    wait_for("the first gang bound whole", lambda: bound(core, ns) == {"first-0", "first-1"})
    for job, position, reason in (("second", 1, "QuotaExceeded"), ("third", 2, "WaitingInQueue")):
        status = wait_for(
            f"{job} waits",
            lambda j=job: (s := podgroup(custom, ns, j).get("status") or {}).get("queuePosition") and s,
        )
        assert status["phase"] == "Pending" and status["queuePosition"] == position
        assert admitted(custom, ns, job)["reason"] == reason
    assert (
        admitted(custom, ns, "second")["message"]
        == f"queue {name}: quota exceeded: needs {GPU} 2, 0 of 2 free"
    )
    # The pods' conditions and the Queue's status are writes of their own, after the PodGroups'.
    scheduled = wait_for(
        "third-0's PodScheduled condition",
        lambda: next(
            (
                c
                for c in core.read_namespaced_pod("third-0", ns).status.conditions or ()
                if c.type == "PodScheduled"
            ),
            None,
        ),
    )
    assert scheduled.status == "False" and f"queue {name}: waiting behind 1 job(s)" in scheduled.message
    expected = {"allocated": {"cpu": "2", GPU: "2", "pods": "2"}, "admitted": 1, "pending": 2}
    queue_status = wait_for(
        "the Queue's status",
        lambda: (
            (s := custom.get_cluster_custom_object(GROUP, VERSION, "queues", name).get("status")) == expected
            and s
        ),
    )
    assert queue_status == expected
    wait_for(
        "the first PodGroup Running", lambda: podgroup(custom, ns, "first")["status"]["phase"] == "Running"
    )
    # The first job ends: its PodGroup and pods go, and the second is admitted, then the third stays first.
    custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "podgroups", "first")
    for i in range(2):
        core.delete_namespaced_pod(f"first-{i}", ns, grace_period_seconds=0)
    wait_for("the second gang bound", lambda: bound(core, ns) == {"second-0", "second-1"})
    wait_for(
        "the third first in line",
        lambda: (podgroup(custom, ns, "third").get("status") or {}).get("queuePosition") == 1,
    )


def test_a_later_higher_priority_gang_is_admitted_first(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str, queue: Any
) -> None:
    name = queue(quota={"requests": {GPU: 2}}, closed=True)  # closed while both arrive
    gang(core, custom, ns, "early", name)
    gang(core, custom, ns, "urgent", name, priority=80)
    wait_for(
        "both told the queue is closed",
        lambda: (
            admitted(custom, ns, "urgent").get("reason") == "QueueClosed"
            and admitted(custom, ns, "early").get("reason") == "QueueClosed"
        ),
    )
    assert admitted(custom, ns, "early")["message"] == f"queue {name} is closed: it admits no new job"
    custom.patch_cluster_custom_object(GROUP, VERSION, "queues", name, {"spec": {"closed": False}})
    wait_for("the urgent gang bound", lambda: bound(core, ns) == {"urgent-0", "urgent-1"})
    assert admitted(custom, ns, "early")["reason"] == "QuotaExceeded"


def test_a_missing_or_deleted_queue_admits_nothing_new_and_what_runs_goes_on(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str, queue: Any
) -> None:
    gang(core, custom, ns, "orphan", "no-such-queue", gpus=0)
    wait_for(
        "told the queue is missing", lambda: admitted(custom, ns, "orphan").get("reason") == "QueueNotFound"
    )
    name = queue(quota={"requests": {GPU: 2}})
    gang(core, custom, ns, "running", name)
    gang(core, custom, ns, "waiting", name)
    wait_for("one runs", lambda: bound(core, ns) == {"running-0", "running-1"})
    custom.delete_cluster_custom_object(GROUP, VERSION, "queues", name)
    wait_for(
        "the waiting one told its queue is gone",
        lambda: admitted(custom, ns, "waiting").get("reason") == "QueueNotFound",
    )
    assert bound(core, ns) == {"running-0", "running-1"}
    assert all(core.read_namespaced_pod(f"running-{i}", ns).status.phase == "Running" for i in range(2))


def test_a_queue_keeps_out_namespaces_its_selector_refuses_and_places_on_its_nodes(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str, queue: Any
) -> None:
    refusing = queue(namespaceSelector={"matchLabels": {"team": "infra"}})
    gang(core, custom, ns, "refused", refusing, gpus=0)
    wait_for("refused", lambda: admitted(custom, ns, "refused").get("reason") == "NamespaceNotAllowed")
    second = "t9k-local-node-1"
    pinned = queue(nodeSelector={"matchLabels": {"kubernetes.io/hostname": second}})
    gang(core, custom, ns, "pinned", pinned, gpus=0)
    wait_for("pinned bound", lambda: {"pinned-0", "pinned-1"} <= bound(core, ns))
    assert {core.read_namespaced_pod(f"pinned-{i}", ns).spec.node_name for i in range(2)} == {second}


def test_a_gang_that_runs_past_its_queues_max_duration_is_marked(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str, queue: Any
) -> None:
    name = queue(maxDuration="2s")
    gang(core, custom, ns, "long", name, gpus=0)
    wait_for("long bound", lambda: bound(core, ns) == {"long-0", "long-1"})

    def marked() -> dict[str, Any] | None:
        conditions = (podgroup(custom, ns, "long").get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "MaxDurationExceeded"), None)

    condition = wait_for("the PodGroup marked", marked, 30)
    assert condition["status"] == "True" and f"queue {name}'s maxDuration (2s)" in condition["message"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"quota": {"requests": {GPU: -1}}}, "spec.quota.requests"),
        ({"quota": {"requests": {"cpu": "lots"}}}, "spec.quota.requests"),
        ({"closed": "yes"}, "spec.closed"),
        ({"priority": 101}, "spec.priority"),
        ({"priority": "high"}, "spec.priority"),
        ({"maxDuration": "1.5h"}, "spec.maxDuration"),
    ],
    ids=[
        "negative-quota",
        "unparsable-quota",
        "closed-not-bool",
        "priority-over-100",
        "priority-text",
        "duration",
    ],
)
def test_a_queue_whose_field_does_not_validate_is_refused_naming_it(
    custom: client.CustomObjectsApi, spec: dict[str, Any], field: str
) -> None:
    name = f"bad-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    with pytest.raises(client.ApiException) as refused:
        custom.create_cluster_custom_object(GROUP, VERSION, "queues", body)
    assert refused.value.status == 422 and field in json.loads(refused.value.body)["message"]


def test_a_job_naming_a_missing_or_closed_queue_is_refused_when_created(
    custom: client.CustomObjectsApi, ns: str, queue: Any
) -> None:
    closed = queue(closed=True)
    for name, said in (("no-such-queue", "queue no-such-queue does not exist"),
                       (closed, f"queue {closed} is closed: it accepts no new job")):  # fmt: skip
        container = {"name": "c", "image": "busybox:1", "command": ["true"]}
        job = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "j"},
               "spec": {"scheduler": {"t9kScheduler": {"queue": name}}, "replicaSpecs": [
                   {"type": "worker", "template": {"spec": {"containers": [container]}}}]}}  # fmt: skip
        with pytest.raises(client.ApiException) as refused:
            custom.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", job)
        message = json.loads(refused.value.body)["message"]
        assert refused.value.status == 400, message
        assert message == f'GenericJob "j" is refused: {said} (spec.scheduler.t9kScheduler.queue)'
    custom.patch_cluster_custom_object(GROUP, VERSION, "queues", closed, {"spec": {"closed": False}})
    job["spec"]["scheduler"]["t9kScheduler"]["queue"] = closed
    custom.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", job)
