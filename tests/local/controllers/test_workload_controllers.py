"""The node agents' ReplicaSet and Deployment controllers, with the simulated kubelet (pods start at once;
``minReadySeconds`` makes availability lag so a rollout goes in steps)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.clusters import cluster_fixture

pytestmark = pytest.mark.cluster

cluster = cluster_fixture(kubelet="simulated", flink_operator=False)


@pytest.fixture(scope="module")
def apps(cluster: LocalCluster) -> client.AppsV1Api:
    return client.AppsV1Api(cluster.api_client())


def workload(name: str, image: str = "busybox:1", **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": image, "command": ["sleep", "60"]}]},
            },
            **spec,
        },
    }


def live_pods(core: client.CoreV1Api, ns: str, selector: str = "") -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(ns, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())


def test_replicaset_keeps_its_count_adopts_and_releases(
    core: client.CoreV1Api, apps: client.AppsV1Api, ns: str
) -> None:
    rs = apps.create_namespaced_replica_set(ns, workload("rs", replicas=3))
    uid = rs.metadata.uid

    def status_is(replicas: int) -> bool:
        s = apps.read_namespaced_replica_set("rs", ns).status
        return (s.replicas, s.ready_replicas, s.available_replicas, s.fully_labeled_replicas) == (
            replicas,
        ) * 4

    wait_for("3 ready replicas", lambda: status_is(3))
    pods = live_pods(core, ns)
    assert len(pods) == 3
    for pod in pods:
        (ref,) = pod.metadata.owner_references
        assert (ref.kind, ref.name, ref.uid, ref.controller) == ("ReplicaSet", "rs", uid, True)
        assert pod.metadata.name.startswith("rs-")
    assert apps.read_namespaced_replica_set("rs", ns).status.observed_generation == 1

    core.delete_namespaced_pod(pods[0].metadata.name, ns)
    wait_for(
        "a replacement",
        lambda: status_is(3) and pods[0].metadata.name not in {p.metadata.name for p in live_pods(core, ns)},
    )

    # an orphan the selector matches is adopted (and, being one too many, one pod goes)
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "orphan", "labels": {"app": "rs"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1", "command": ["sleep", "60"]}]},
        },
    )
    wait_for("three pods again", lambda: len(live_pods(core, ns)) == 3 and status_is(3))
    assert all(p.metadata.owner_references[0].uid == uid for p in live_pods(core, ns))

    # a pod relabelled out of the selector is released, and replaced
    kept = live_pods(core, ns)[0].metadata.name
    core.patch_namespaced_pod(kept, ns, {"metadata": {"labels": {"app": "gone"}}})
    wait_for("release", none_left(lambda: core.read_namespaced_pod(kept, ns).metadata.owner_references))
    wait_for("replacement", lambda: len(live_pods(core, ns, "app=rs")) == 3 and status_is(3))

    apps.patch_namespaced_replica_set_scale("rs", ns, {"spec": {"replicas": 1}})
    wait_for("scale down", lambda: len(live_pods(core, ns, "app=rs")) == 1 and status_is(1))
    apps.patch_namespaced_replica_set_scale("rs", ns, {"spec": {"replicas": 0}})
    wait_for("scale to zero", none_left(lambda: [p.metadata.name for p in live_pods(core, ns, "app=rs")]))
    # the status follows the pods' deletion in a later write
    wait_for("status at zero", lambda: apps.read_namespaced_replica_set("rs", ns).status.replicas == 0)


def test_rolling_update_honours_surge_and_unavailability(
    core: client.CoreV1Api, apps: client.AppsV1Api, ns: str
) -> None:
    replicas, surge, unavailable = 4, 1, 1
    body = workload(
        "web",
        replicas=replicas,
        minReadySeconds=1,
        strategy={
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
        },
    )
    apps.create_namespaced_deployment(ns, body)

    def rolled_out(generation: int) -> bool:
        d = apps.read_namespaced_deployment("web", ns)
        s = d.status
        return (s.observed_generation or 0) >= generation and (
            s.updated_replicas,
            s.replicas,
            s.available_replicas,
        ) == (replicas,) * 3

    wait_for("the first rollout", lambda: rolled_out(1))
    apps.patch_namespaced_deployment(
        "web", ns, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}
    )
    most, fewest_ready, images = 0, replicas, set()
    deadline = time.monotonic() + 60
    while not rolled_out(2):
        assert time.monotonic() < deadline, "the rollout did not finish"
        pods = live_pods(core, ns)
        most = max(most, len(pods))
        fewest_ready = min(fewest_ready, sum(ready(p) for p in pods))
        images |= {p.spec.containers[0].image for p in pods}
        time.sleep(0.05)
    assert most <= replicas + surge
    assert fewest_ready >= replicas - unavailable
    assert images == {"busybox:1", "busybox:2"}  # both versions ran side by side: a rolling update
    assert {p.spec.containers[0].image for p in live_pods(core, ns)} == {"busybox:2"}

    d = apps.read_namespaced_deployment("web", ns)
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    conditions = {c.type: (c.status, c.reason) for c in d.status.conditions}
    assert conditions == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    sets = {
        rs.metadata.annotations["deployment.kubernetes.io/revision"]: rs
        for rs in apps.list_namespaced_replica_set(ns).items
    }
    assert sorted(sets) == ["1", "2"]
    assert (sets["1"].spec.replicas, sets["2"].spec.replicas) == (0, replicas)
    hash_label = sets["2"].metadata.labels["pod-template-hash"]
    assert sets["2"].metadata.name == f"web-{hash_label}"
    assert sets["2"].spec.selector.match_labels == {"app": "web", "pod-template-hash": hash_label}
    assert all(p.metadata.labels["pod-template-hash"] == hash_label for p in live_pods(core, ns))


def test_recreate_stops_old_pods_first_and_history_is_pruned(
    core: client.CoreV1Api, apps: client.AppsV1Api, ns: str
) -> None:
    body = workload("re", replicas=2, revisionHistoryLimit=1, strategy={"type": "Recreate"})
    apps.create_namespaced_deployment(ns, body)
    wait_for("2 pods", lambda: sum(ready(p) for p in live_pods(core, ns)) == 2)
    for generation, image in ((2, "busybox:2"), (3, "busybox:3")):
        apps.patch_namespaced_deployment(
            "re", ns, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}
        )
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, "the rollout did not finish"
            images = {p.spec.containers[0].image for p in core.list_namespaced_pod(ns).items}
            assert len(images) <= 1, "Recreate ran old and new pods together (terminating ones count)"
            s = apps.read_namespaced_deployment("re", ns).status
            if (s.observed_generation, s.updated_replicas, s.available_replicas) == (generation, 2, 2):
                break
            time.sleep(0.05)
    revisions = sorted(
        rs.metadata.annotations["deployment.kubernetes.io/revision"]
        for rs in apps.list_namespaced_replica_set(ns).items
    )
    assert revisions == ["2", "3"]  # one old ReplicaSet kept besides the current one


def test_deleting_a_deployment_removes_its_replicasets_and_pods(
    core: client.CoreV1Api, apps: client.AppsV1Api, ns: str
) -> None:
    apps.create_namespaced_deployment(ns, workload("gone", replicas=2))
    wait_for("pods", lambda: len(live_pods(core, ns)) == 2)
    apps.delete_namespaced_deployment("gone", ns)
    wait_for(
        "cascade",
        lambda: not apps.list_namespaced_replica_set(ns).items and not core.list_namespaced_pod(ns).items,
    )


def test_statefulset_orders_its_pods_and_rolls_from_the_top(
    core: client.CoreV1Api, apps: client.AppsV1Api, ns: str
) -> None:
    apps.create_namespaced_stateful_set(ns, workload("db", replicas=3, serviceName="db"))

    def status(replicas: int) -> client.V1StatefulSetStatus | None:
        s = apps.read_namespaced_stateful_set("db", ns).status
        done = (s.replicas, s.ready_replicas, s.updated_replicas) == (replicas,) * 3
        return s if done and s.current_revision == s.update_revision else None

    first = wait_for("3 ready pods", lambda: status(3))
    pods = sorted(live_pods(core, ns), key=lambda p: p.metadata.name)
    assert [p.metadata.name for p in pods] == ["db-0", "db-1", "db-2"]
    for ordinal, pod in enumerate(pods):
        assert (pod.spec.hostname, pod.spec.subdomain) == (f"db-{ordinal}", "db")
        assert pod.metadata.labels["apps.kubernetes.io/pod-index"] == str(ordinal)
        assert pod.metadata.labels["controller-revision-hash"] == first.update_revision
    # OrderedReady: each pod was created only once the one before it was Ready
    for before, after in itertools.pairwise(pods):
        became_ready = next(c.last_transition_time for c in before.status.conditions if c.type == "Ready")
        assert after.metadata.creation_timestamp >= became_ready

    apps.patch_namespaced_stateful_set(
        "db", ns, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}
    )
    second = wait_for(
        "the rolling update", lambda: (s := status(3)) and s.update_revision != first.update_revision and s
    )
    images = {p.metadata.name: p.spec.containers[0].image for p in live_pods(core, ns)}
    assert images == {"db-0": "busybox:2", "db-1": "busybox:2", "db-2": "busybox:2"}
    assert second.current_revision == second.update_revision

    apps.patch_namespaced_stateful_set_scale("db", ns, {"spec": {"replicas": 1}})
    wait_for("scale down", lambda: status(1))
    assert [p.metadata.name for p in live_pods(core, ns)] == ["db-0"]


def test_daemonset_runs_one_pod_on_the_node_when_it_fits(
    core: client.CoreV1Api, apps: client.AppsV1Api, ns: str
) -> None:
    apps.create_namespaced_daemon_set(ns, workload("agent"))

    def status(desired: int, ready: int) -> bool:
        s = apps.read_namespaced_daemon_set("agent", ns).status
        return (s.desired_number_scheduled, s.current_number_scheduled, s.number_ready) == (
            desired,
            ready,
            ready,
        )

    wait_for("the daemon pod", lambda: status(1, 1))
    (pod,) = live_pods(core, ns)
    assert pod.spec.node_name == "t9k-local-node"
    assert pod.metadata.owner_references[0].kind == "DaemonSet"
    apps.patch_namespaced_daemon_set(
        "agent", ns, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}
    )
    wait_for(
        "the updated pod",
        lambda: (
            status(1, 1)
            and [p.spec.containers[0].image for p in live_pods(core, ns)] == ["busybox:2"]
            and apps.read_namespaced_daemon_set("agent", ns).status.updated_number_scheduled == 1
        ),
    )
    apps.patch_namespaced_daemon_set(
        "agent", ns, {"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}
    )
    wait_for("no pod on a node that does not fit", lambda: status(0, 0) and not live_pods(core, ns))
