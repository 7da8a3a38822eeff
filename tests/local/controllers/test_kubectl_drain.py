"""``kubectl drain`` (1.32, unmodified) against the local cluster with the process kubelet: it cordons the
node and evicts a Deployment's pods through ``pods/eviction`` (protobuf Evictions), each marked
``DisruptionTarget`` before it goes, and their ReplicaSet makes new ones; a PodDisruptionBudget that allows no
disruption makes kubectl retry on 429 every 5 s until its ``--timeout``, and nothing is evicted."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, watch

from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.clusters import cluster_fixture
from tests.support.pods import pod_names

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("kubectl_binary")]

cluster = cluster_fixture(flink_operator=False)
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def kubectl(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cache), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{' '.join(proc.args)}: {proc.stderr}"
    return proc.stdout


@pytest.fixture
def node(kubectl: Kubectl) -> Iterator[str]:
    """The node to drain, uncordoned again after the test."""
    name = ok(kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"))
    yield name
    ok(kubectl("uncordon", name))


@pytest.fixture
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture
def ns(kubectl: Kubectl, core: client.CoreV1Api) -> Iterator[str]:
    """A namespace of the test's own, emptied after it (a drain evicts every pod on the node)."""
    name = f"d-{uuid.uuid4().hex[:8]}"
    ok(kubectl("create", "namespace", name))
    yield name
    ok(kubectl("delete", "namespace", name, "--wait=false"))
    wait_for(f"the pods of {name} gone", none_left(lambda: pod_names(core, name)), timeout=60)


def deployment(kubectl: Kubectl, core: client.CoreV1Api, ns: str, replicas: int = 2) -> list[Any]:
    """A running Deployment ``web`` of sleeping busybox pods; its pods."""
    command = [
        "create",
        "deployment",
        "web",
        "--image=busybox:1",
        f"--replicas={replicas}",
        "--",
        "sleep",
        "300",
    ]
    ok(kubectl("-n", ns, *command))
    ok(kubectl("-n", ns, "rollout", "status", "deploy/web", "--timeout=60s"))
    return core.list_namespaced_pod(ns, label_selector="app=web").items


def test_drain_evicts_a_deployments_pods_and_their_replicaset_makes_new_ones(
    kubectl: Kubectl, core: client.CoreV1Api, node: str, ns: str
) -> None:
    old = {p.metadata.name: p.metadata.uid for p in deployment(kubectl, core, ns)}
    version = core.list_namespaced_pod(ns).metadata.resource_version

    out = ok(kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"))
    lines = out.splitlines()
    assert lines[0] == f"node/{node} cordoned" and lines[-1] == f"node/{node} drained", out
    for name in old:
        assert f"evicting pod {ns}/{name}" in lines and f"pod/{name} evicted" in lines, out
    assert json.loads(ok(kubectl("get", "node", node, "-o", "json")))["spec"]["unschedulable"] is True

    # kubectl waited for the evicted pods to go; each was marked before it went (the watch replays the past)
    marked = set()
    for event in watch.Watch().stream(
        core.list_namespaced_pod, ns, resource_version=version, timeout_seconds=2, _request_timeout=10
    ):
        pod = event["object"]
        conditions = {c.type: c for c in pod.status.conditions or ()}
        mark = conditions.get("DisruptionTarget")
        if mark is not None and pod.metadata.name in old:
            assert (mark.status, mark.reason, mark.message) == (
                "True",
                "EvictionByEvictionAPI",
                "Eviction API: evicting",
            )
            marked.add(pod.metadata.name)
    assert marked == set(old)

    def replaced() -> list[Any]:
        pods = core.list_namespaced_pod(ns, label_selector="app=web").items
        fresh = [p for p in pods if p.metadata.uid not in old.values()]
        return fresh if len(fresh) == 2 and len(pods) == 2 else []

    # Whether they run depends on the scheduler honouring the cordon (docs/local-cluster.md); they exist.
    wait_for("the ReplicaSet's new pods", replaced)


def test_drain_retries_a_budget_allowing_no_disruption_until_its_timeout(
    kubectl: Kubectl, core: client.CoreV1Api, node: str, ns: str
) -> None:
    pods = {p.metadata.name: p.metadata.uid for p in deployment(kubectl, core, ns)}
    ok(kubectl("-n", ns, "create", "pdb", "web", "--selector=app=web", "--min-available=2"))

    def blocking() -> bool:
        row = ok(kubectl("-n", ns, "get", "pdb", "web", "--no-headers")).split()
        return (
            row[:4] == ["web", "2", "N/A", "0"]
            and ok(kubectl("-n", ns, "get", "pdb", "web", "-o", "jsonpath={.status.currentHealthy}")) == "2"
        )

    wait_for("the budget allowing no disruption of 2 healthy pods", blocking)

    drain = kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=12s")
    assert drain.returncode == 1, drain.stdout + drain.stderr
    for name in pods:
        assert (
            f'error when evicting pods/"{name}" -n "{ns}" (will retry after 5s): Cannot evict pod as it '
            "would violate the pod's disruption budget."
        ) in drain.stderr
        assert f'error when evicting pods/"{name}" -n "{ns}": global timeout reached: 12s' in drain.stderr
    assert f'error: unable to drain node "{node}" due to error: ' in drain.stderr

    left = core.list_namespaced_pod(ns, label_selector="app=web").items
    assert {p.metadata.name: p.metadata.uid for p in left} == pods
    for pod in left:
        assert pod.metadata.deletion_timestamp is None and pod.status.phase == "Running"
        assert all(c.type != "DisruptionTarget" for c in pod.status.conditions or ())
