"""GPUs as the NVIDIA device plugin hands them out, on a node that advertises 2 (``--gpus 2``: simulated
devices, so this runs on machines without GPUs): each GPU container holds devices of its own and sees them
through CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES, a container without GPUs sees none, and a restarted
kubelet keeps the devices its running pods hold (`t9k_provider.local.kubelet.devices`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.builders import make_container, make_pod
from tests.support.clusters import cluster_fixture
from tests.support.pods import phase_is, pod_log, pod_names

pytestmark = pytest.mark.cluster

GPU = "nvidia.com/gpu"
SHOW = 'echo "cuda=[${CUDA_VISIBLE_DEVICES-unset}] nvidia=[${NVIDIA_VISIBLE_DEVICES-unset}]"'
_LINE = re.compile(r"cuda=\[(.*)\] nvidia=\[(.*)\]")

cluster = cluster_fixture(capacity={"gpus": "2"})


@pytest.fixture
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


_ns_counter = iter(range(1000))


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    """A namespace of the test's own; its pods are deleted at the end: the next test finds both GPUs free."""
    name = f"gpu{os.getpid()}-{next(_ns_counter)}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_collection_namespaced_pod(name, grace_period_seconds=1)
    wait_for("the test's pods gone", none_left(lambda: pod_names(core, name)), timeout=30)


def shows(name: str = "main", gpus: int | None = None, then: str = "exec sleep 600", **fields: Any) -> dict:
    """A container that prints what it sees, then runs ``then``."""
    if gpus is not None:
        fields["resources"] = {"limits": {GPU: str(gpus)}}
    return make_container(name, sh=f"{SHOW}; {then}", **fields)


def seen(core: client.CoreV1Api, name: str, ns: str, container: str | None = None) -> tuple[str, str] | None:
    """(CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES) as the container printed them, once it has."""
    params = {"container": container} if container else {}
    match = _LINE.search(pod_log(core, name, ns, **params))
    return (match.group(1), match.group(2)) if match else None


def scheduling_message(core: client.CoreV1Api, name: str, ns: str) -> str:
    conditions = core.read_namespaced_pod(name, ns).status.conditions or []
    return next((c.message or "" for c in conditions if c.type == "PodScheduled" and c.status == "False"), "")


def test_two_single_gpu_pods_see_distinct_devices(core: client.CoreV1Api, ns: str) -> None:
    """A value the pod sets itself does not override the allocation (the device plugin's Allocate wins)."""
    mine = [
        {"name": "CUDA_VISIBLE_DEVICES", "value": "7"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
    ]
    core.create_namespaced_pod(ns, make_pod("one", shows(gpus=1)))
    core.create_namespaced_pod(ns, make_pod("two", shows(gpus=1, env=mine)))
    views = [
        wait_for(f"{name} shows its devices", lambda n=name: seen(core, n, ns)) for name in ("one", "two")
    ]
    for name in ("one", "two"):
        assert wait_for(f"{name} running", phase_is(core, name, ns, "Running"))
    assert all(cuda == nvidia for cuda, nvidia in views), views
    assert sorted(cuda for cuda, _ in views) == ["0", "1"]


def test_a_pod_without_a_gpu_limit_sees_no_gpu(core: client.CoreV1Api, ns: str) -> None:
    mine = [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]
    core.create_namespaced_pod(ns, make_pod("cpu", shows(then="true", env=mine)))
    wait_for("cpu succeeded", phase_is(core, "cpu", ns, "Succeeded"))
    assert seen(core, "cpu", ns) == ("", "void")


def test_init_containers_hand_their_devices_to_the_app_containers(core: client.CoreV1Api, ns: str) -> None:
    """The device manager's rule: 2 GPUs for the pod, the init container's two split between the apps."""
    pod = make_pod("split", shows("a", gpus=1), shows("b", gpus=1), initContainers=[shows("init", 2, "true")])
    core.create_namespaced_pod(ns, pod)
    wait_for("split running", phase_is(core, "split", ns, "Running"))
    assert wait_for("init shown", lambda: seen(core, "split", ns, "init")) == ("0,1", "0,1")
    apps = [wait_for(f"{c} shown", lambda c=c: seen(core, "split", ns, c)) for c in ("a", "b")]
    assert sorted(apps) == [("0", "0"), ("1", "1")]


def test_a_pod_waits_for_gpus_held_by_others_and_gets_them_when_they_end(
    core: client.CoreV1Api, ns: str, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    stop.mkdir()
    volume = {"name": "stop", "hostPath": {"path": str(stop)}}
    waits = "while [ ! -e /stop/now ]; do sleep 0.1; done"
    mount = [{"name": "stop", "mountPath": "/stop"}]
    for name in ("one", "two"):
        core.create_namespaced_pod(
            ns, make_pod(name, shows(gpus=1, then=waits, volumeMounts=mount), volumes=[volume])
        )
    for name in ("one", "two"):
        wait_for(f"{name} shows its devices", lambda n=name: seen(core, n, ns))
    core.create_namespaced_pod(ns, make_pod("both", shows(gpus=2, then="true")))
    wait_for(
        "both unschedulable", lambda: "Insufficient nvidia.com/gpu" in scheduling_message(core, "both", ns)
    )
    assert core.read_namespaced_pod("both", ns).status.phase == "Pending"
    (stop / "now").touch()
    for name in ("one", "two"):
        wait_for(f"{name} ended", phase_is(core, name, ns, "Succeeded"))
    wait_for("both succeeded", phase_is(core, "both", ns, "Succeeded"))
    assert seen(core, "both", ns) == ("0,1", "0,1")


@pytest.mark.usefixtures("kubectl_binary")
def test_describe_node_shows_the_gpus_allocated(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    """kubectl sums the requests of the node's non-terminated pods itself (field selector spec.nodeName)."""
    core.create_namespaced_pod(ns, make_pod("held", shows(gpus=1)))
    wait_for("held running", phase_is(core, "held", ns, "Running"))
    described = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "describe", "node", FIRST_NODE],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    allocated = described.split("Allocated resources:", 1)[1]
    assert re.search(r"nvidia\.com/gpu\s+1\s+1\n", allocated), allocated
    assert re.search(r"nvidia\.com/gpu:\s+2\n", described)  # capacity and allocatable


def test_a_gpu_request_that_differs_from_its_limit_is_rejected(core: client.CoreV1Api, ns: str) -> None:
    odd = shows(resources={"requests": {GPU: "1"}, "limits": {GPU: "2"}})
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(ns, make_pod("odd", odd))
    assert caught.value.status == 422
    causes = json.loads(caught.value.body)["details"]["causes"]
    assert (causes[0]["field"], causes[0]["reason"]) == (
        "spec.containers[0].resources.requests",
        "FieldValueInvalid",
    )
    assert "must be equal to nvidia.com/gpu limit of 2" in causes[0]["message"]


def test_a_restarted_kubelet_keeps_the_devices_of_running_pods(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    """The kubelet dies (SIGKILL: its pods run on) and starts again: it rebuilds its inventory from the
    records in the pod directories. A pod bound to the node past the scheduler gets no device the two hold."""
    cluster = cluster_factory(capacity={"gpus": "2"})
    core = client.CoreV1Api(cluster.api_client())
    for name in ("one", "two"):
        core.create_namespaced_pod("default", make_pod(name, shows(gpus=1)))
    before = {
        name: wait_for(f"{name} shows", lambda n=name: seen(core, n, "default")) for name in ("one", "two")
    }
    assert sorted(cuda for cuda, _ in before.values()) == ["0", "1"]
    cluster.kill()
    cluster.start()
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_pod("default", make_pod("third", shows(gpus=1)))
    wait_for(
        "third unschedulable",
        lambda: "Insufficient nvidia.com/gpu" in scheduling_message(core, "third", "default"),
    )
    # Past the scheduler (spec.nodeName set at creation), only the kubelet's inventory stands in the way.
    core.create_namespaced_pod("default", make_pod("bound", shows(gpus=1), nodeName=FIRST_NODE))
    unavailable = wait_for("bound refused a device", lambda: _events(core, "bound", "DevicesUnavailable"))
    assert "Requested: 1, Available: 0" in unavailable[0].message
    for name in ("one", "two"):
        pod = core.read_namespaced_pod(name, "default")
        assert pod.status.phase == "Running" and pod.status.container_statuses[0].restart_count == 0
        assert seen(core, name, "default") == before[name]

    def written() -> client.V1PodStatus | None:
        """bound's status once written Pending with a waiting container: the event may come first (the
        kubelet prepares the devices while it sets up the pod's network, and writes the status after both)."""
        status = core.read_namespaced_pod("bound", "default").status
        statuses = status.container_statuses or []
        return status if status.phase == "Pending" and statuses and statuses[0].state.waiting else None

    bound = wait_for("bound's status", written)
    assert bound.container_statuses[0].state.waiting.reason == "ContainerCreating"
    core.delete_namespaced_pod("one", "default", grace_period_seconds=1)
    wait_for("bound running", phase_is(core, "bound", "default", "Running"), timeout=30)
    assert wait_for("bound shows", lambda: seen(core, "bound", "default")) == before["one"]


def test_the_simulated_kubelet_runs_gpu_pods(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(kubelet="simulated", capacity={"gpus": "1"})
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_pod("default", make_pod("sim", shows(gpus=1)))
    wait_for("sim running", phase_is(core, "sim", "default", "Running"))


def _events(core: client.CoreV1Api, pod: str, reason: str) -> list[Any]:
    selector = f"involvedObject.name={pod},reason={reason}"
    return core.list_namespaced_event("default", field_selector=selector).items
