"""Several nodes on one machine (`t9k-local up --nodes N`): pods spread and reach each other across nodes, a
node whose kubelet stops is called Unknown, tainted and emptied after its pods' toleration, kubectl cordons
and drains unmodified, and bad input is refused, naming what is wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.builders import PY, make_container, make_pod
from tests.support.clusters import cluster_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("kubectl_binary")]

SECOND, THIRD = f"{FIRST_NODE}-1", f"{FIRST_NODE}-2"
NODES = [FIRST_NODE, SECOND, THIRD]
SMALL = {"requests": {"cpu": "100m"}}

#: Three process nodes of one CPU each; a kubelet silent for 3 s makes its node Unknown, pods tolerate it 2 s.
cluster = cluster_fixture(
    nodes=3, capacity={"cpus": "1", "memory": "2Gi"}, node_grace=3, toleration_seconds=2
)


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture
def ns(core: client.CoreV1Api, request: pytest.FixtureRequest) -> str:
    name = request.node.name.removeprefix("test_")[:40].replace("_", "-").rstrip("-")
    core.create_namespace({"metadata": {"name": name}})
    return name


def kubectl(cluster: LocalCluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["kubectl", "--kubeconfig", str(cluster.kubeconfig), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def node_of(core: client.CoreV1Api, name: str, ns: str) -> str:
    return str(wait_for(f"{name} bound", lambda: core.read_namespaced_pod(name, ns).spec.node_name))


def ended(core: client.CoreV1Api, name: str, ns: str, timeout: float = 60) -> str:
    def phase() -> str | None:
        current = core.read_namespaced_pod(name, ns).status.phase
        return current if current in ("Succeeded", "Failed") else None

    return str(wait_for(f"{name} ended", phase, timeout))


def condition(obj: Any, kind: str) -> Any:
    return next((c for c in obj.status.conditions or [] if c.type == kind), None)


def on(node: str) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/hostname": node}}


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_three_nodes_are_ready_with_their_share_and_pods_spread_and_reach_each_other(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    assert [n.metadata.name for n in core.list_node().items] == NODES
    for name in NODES:
        wait_for(f"{name} Ready", lambda name=name: condition(core.read_node(name), "Ready").status == "True")
        assert core.read_node(name).status.allocatable["cpu"] == "1"
    table = kubectl(cluster, "get", "nodes").stdout
    assert {row.split()[0]: row.split()[1] for row in table.splitlines()[1:]} == dict.fromkeys(NODES, "Ready")
    described = kubectl(cluster, "describe", "node", THIRD).stdout
    assert THIRD in described and "KubeletReady" in described, described
    server = make_container(
        command=[PY, "-m", "http.server", "8080"], resources={"requests": {"cpu": "600m"}}
    )
    for i in range(3):
        core.create_namespaced_pod(ns, make_pod(f"web-{i}", server, restart_policy="Always"))
    assert {node_of(core, f"web-{i}", ns) for i in range(3)} == set(NODES)  # 600m each: one per 1-CPU node
    ips = [
        wait_for(f"web-{i} addressed", lambda i=i: core.read_namespaced_pod(f"web-{i}", ns).status.pod_ip)
        for i in range(3)
    ]
    fetch = (
        "import sys, urllib.request; urllib.request.urlopen(f'http://{sys.argv[1]}:8080', timeout=10).read()"
    )
    home = node_of(core, "web-0", ns)
    for i in (1, 2):
        reach = make_container(command=[PY, "-c", fetch, ips[i]], resources=SMALL)
        core.create_namespaced_pod(ns, make_pod(f"reach-{i}", reach, **on(home)))
    for i in (1, 2):
        assert ended(core, f"reach-{i}", ns) == "Succeeded", core.read_namespaced_pod_log(f"reach-{i}", ns)
    core.delete_namespace(ns)


def test_a_stopped_kubelet_makes_its_node_unknown_tainted_and_its_pods_go_after_their_toleration(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    sleeper = make_container(py="import time; time.sleep(600)", resources=SMALL)
    core.create_namespaced_pod(
        ns, make_pod("stranded", sleeper, **on(SECOND), terminationGracePeriodSeconds=1)
    )
    wait_for("stranded running", lambda: core.read_namespaced_pod("stranded", ns).status.phase == "Running")
    tolerations = core.read_namespaced_pod("stranded", ns).spec.tolerations
    assert {(t.key, t.toleration_seconds) for t in tolerations} >= {
        ("node.kubernetes.io/not-ready", 2),
        ("node.kubernetes.io/unreachable", 2),
    }  # DefaultTolerationSeconds
    kubelet = cluster.kubelet_pid(SECOND)
    assert kubelet is not None
    cluster.stop_node(SECOND)
    assert not alive(kubelet)
    ready = wait_for(
        "the node Unknown",
        lambda: (c := condition(core.read_node(SECOND), "Ready")).status == "Unknown" and c,
        30,
    )
    assert ready.reason == "NodeStatusUnknown" and ready.message == "Kubelet stopped posting node status."
    unreachable = {("node.kubernetes.io/unreachable", effect) for effect in ("NoSchedule", "NoExecute")}

    def taints() -> set[tuple[str, str]]:
        return {(t.key, t.effect) for t in core.read_node(SECOND).spec.taints or []}

    # The taints follow the condition in a write of their own (the node's spec), as kube-controller-manager's.
    wait_for("the node tainted unreachable", lambda: taints() == unreachable, 10)
    assert "NotReady" in kubectl(cluster, "get", "node", SECOND).stdout

    def evicted() -> Any:
        pod = core.read_namespaced_pod("stranded", ns)
        target = condition(pod, "DisruptionTarget")
        return (
            pod
            if pod.metadata.deletion_timestamp and target and target.reason == "DeletionByTaintManager"
            else None
        )

    pod = wait_for("the pod marked and deleted by the taint manager", evicted, 30)
    assert condition(pod, "Ready").status == "False"  # marked not ready when the node went Unknown
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=stranded").items
    assert any(e.reason == "TaintManagerEviction" for e in events), [e.reason for e in events]
    # No kubelet confirms the kill: the pod stays Terminating; new pods are never placed on the node.
    core.create_namespaced_pod(ns, make_pod("elsewhere", make_container(resources=SMALL)))
    assert node_of(core, "elsewhere", ns) != SECOND
    assert core.read_namespaced_pod("stranded", ns).metadata.deletion_timestamp
    cluster.start_node(SECOND)
    wait_for("the node Ready again", lambda: condition(core.read_node(SECOND), "Ready").status == "True", 30)
    wait_for("its taints gone", none_left(lambda: core.read_node(SECOND).spec.taints), 30)

    def gone() -> bool:
        try:
            core.read_namespaced_pod("stranded", ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for("the returned kubelet finishes the deletion", gone, 30)


def test_kubectl_cordons_and_drains_a_node_and_a_budget_is_honoured(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    apps = client.AppsV1Api(cluster.api_client())
    labels = {"app": "drained"}
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "containers": [make_container(py="import time; time.sleep(600)", resources=SMALL)],
            "terminationGracePeriodSeconds": 1,
        },
    }
    deployment = {
        "metadata": {"name": "drained"},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": template},
    }
    apps.create_namespaced_deployment(ns, deployment)
    kubectl(cluster, "-n", ns, "rollout", "status", "deploy/drained", "--timeout=90s")
    kubectl(cluster, "cordon", THIRD)
    assert "Ready,SchedulingDisabled" in kubectl(cluster, "get", "node", THIRD).stdout
    wait_for(
        "the cordon's taint",
        lambda: any(
            t.key == "node.kubernetes.io/unschedulable" for t in core.read_node(THIRD).spec.taints or []
        ),
    )
    drained = kubectl(
        cluster, "drain", THIRD, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s"
    )
    assert f"node/{THIRD} drained" in drained.stdout, drained.stdout + drained.stderr
    kubectl(cluster, "-n", ns, "rollout", "status", "deploy/drained", "--timeout=90s")
    pods = [p for p in core.list_namespaced_pod(ns).items if not p.metadata.deletion_timestamp]
    assert len(pods) == 3 and all(p.spec.node_name != THIRD for p in pods), [p.spec.node_name for p in pods]
    kubectl(cluster, "uncordon", THIRD)
    # A budget that allows no disruption: the eviction API answers 429, and kubectl drain gives up.
    policy = client.PolicyV1Api(cluster.api_client())
    budget = {"metadata": {"name": "all"}, "spec": {"minAvailable": 3, "selector": {"matchLabels": labels}}}
    policy.create_namespaced_pod_disruption_budget(ns, budget)
    wait_for(
        "the budget observed",
        lambda: (
            (policy.read_namespaced_pod_disruption_budget("all", ns).status.observed_generation or 0) >= 1
        ),
    )
    victim = pods[0]
    with pytest.raises(ApiException) as refused:
        eviction = {"metadata": {"name": victim.metadata.name, "namespace": ns}}
        core.create_namespaced_pod_eviction(victim.metadata.name, ns, eviction)
    assert refused.value.status == 429 and "disruption budget" in refused.value.body
    blocked = kubectl(
        cluster, "drain", victim.spec.node_name, "--ignore-daemonsets", "--timeout=8s", check=False
    )
    assert blocked.returncode != 0 and "disruption budget" in blocked.stderr, blocked.stderr
    kubectl(cluster, "uncordon", victim.spec.node_name)
    core.delete_namespace(ns)


def test_bad_node_input_is_refused_naming_what_is_wrong(cluster: LocalCluster, tmp_path: Path) -> None:
    def t9k_local(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "t9k_provider.local.cli", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ})

    zero = t9k_local("up", "--state-dir", str(tmp_path / "none"), "--nodes", "0")
    assert zero.returncode == 2 and "--nodes: a cluster has at least one node (got 0)" in zero.stderr
    assert not (tmp_path / "none").exists()  # nothing started, nothing written
    missing = t9k_local("node", "stop", "no-such-node", "--state-dir", str(cluster.state_dir))
    assert missing.returncode == 2, missing.stderr
    assert f"no node named 'no-such-node'; nodes: {', '.join(NODES)}" in missing.stderr
    drain = kubectl(cluster, "drain", "no-such-node", check=False)
    assert drain.returncode != 0 and 'nodes "no-such-node" not found' in drain.stderr
