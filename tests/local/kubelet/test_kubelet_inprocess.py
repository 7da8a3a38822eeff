"""`run_node_agents` driven in-process against a cluster started without agents: the unprivileged host-network
fallback (no namespaces at all) and re-adoption of containers after the agents were cancelled."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from t9k_provider.local.agents import run_node_agents
from t9k_provider.local.kubelet import cgroups, network
from t9k_provider.local.kubelet.kubelet import RESOURCE_LIMITS_ANNOTATION
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.testing import LocalCluster, wait_for_async
from tests.support.clusters import cluster_fixture
from tests.support.gates import py_gate

pytestmark = pytest.mark.cluster

PROBE = (
    "import os, socket\n"
    "print(socket.gethostname())\n"
    "print(os.environ['HOSTNAME'])\n"
    # no DNS lookup here: without namespaces it would reach the machine's resolver
    "print('peer-svc' in open('/etc/hosts').read())\n"
)


def _pod(name: str, script: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "python", "command": ["python", "-c", script]}],
        },
    }


async def _log(core: client.CoreV1Api, name: str) -> str:
    resp = await core.read_namespaced_pod_log(name, "default", _preload_content=False)
    return (await resp.read()).decode()


def _finished(core: client.CoreV1Api, name: str) -> Callable[[], Any]:
    async def probe() -> Any:
        pod = await core.read_namespaced_pod(name, "default")
        return pod if pod.status.phase in ("Succeeded", "Failed") else None

    return probe


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)


#: A cluster without node agents: the tests run `run_node_agents` themselves.
bare_cluster = cluster_fixture(kubelet="none")


async def test_unprivileged_host_network_fallback(
    bare_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = bare_cluster
    monkeypatch.setattr(network, "mount_isolation_available", lambda: False)  # as without root
    agents = asyncio.create_task(run_node_agents(cluster.kubeconfig, cluster.state_dir, "process", "host"))
    api = cluster.async_api_client()
    try:
        core = client.CoreV1Api(api)
        await core.create_namespaced_service(
            "default",
            {"metadata": {"name": "peer-svc"}, "spec": {"selector": {"app": "p"}, "ports": [{"port": 1}]}},
        )
        await core.create_namespaced_pod("default", _pod("probe", PROBE, labels={"app": "p"}))
        pod = await wait_for_async("probe finished", _finished(core, "probe"))
        assert pod.status.phase == "Succeeded"
        assert pod.status.pod_ip.startswith("127.1.")
        # No namespaces: the machine's hostname, HOSTNAME set by env only, service names do not resolve.
        assert (await _log(core, "probe")).splitlines() == [socket.gethostname(), "probe", "False"]
    finally:
        await _stop(agents)
        await api.close()


async def test_without_cgroups_the_kubelet_runs_pods_unlimited_and_says_so_once(
    bare_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = bare_cluster
    why = "cgroups are not writable (as without root)"
    monkeypatch.setattr(cgroups, "detect", lambda _state: (None, why))
    agents = asyncio.create_task(run_node_agents(cluster.kubeconfig, cluster.state_dir, "process", "host"))
    api = cluster.async_api_client()
    try:
        core = client.CoreV1Api(api)
        hog = _pod("unlimited", "b = bytearray(200 * 1024 * 1024); print(len(b))")
        hog["spec"]["containers"][0]["resources"] = {"limits": {"memory": "64Mi"}}
        await core.create_namespaced_pod("default", hog)
        pod = await wait_for_async("unlimited finished", _finished(core, "unlimited"))
        assert pod.status.phase == "Succeeded", "a limit nothing enforces does not stop the pod"
        node = await core.read_node(FIRST_NODE)
        assert node.metadata.annotations[RESOURCE_LIMITS_ANNOTATION] == f"not enforced: {why}"
        said = [r for r in caplog.records if "resource limits are not enforced" in r.getMessage()]
        assert len(said) == 1
    finally:
        await _stop(agents)
        await api.close()


async def test_cancelled_agents_leave_containers_running_for_the_next_kubelet(
    bare_cluster: LocalCluster, tmp_path: Path
) -> None:
    cluster = bare_cluster

    def start() -> asyncio.Task[None]:
        return asyncio.create_task(
            run_node_agents(
                cluster.kubeconfig,
                cluster.state_dir,
                "process",
                "auto",
                subnet=cluster.subnet.index,  # the cluster's own bridge, which its stop() removes
                stop_pods_on_exit=False,
            )
        )

    agents = start()
    api = cluster.async_api_client()
    try:
        core = client.CoreV1Api(api)
        go = tmp_path / "go"  # the container runs on until the next agents were started
        script = f"import sys; print('up', flush=True)\n{py_gate(go)}print('down'); sys.exit(6)"
        await core.create_namespaced_pod("default", _pod("keeper", script))
        await wait_for_async("running", lambda: _log_is(core, "keeper", "up\n"))
        await _stop(agents)
        await asyncio.sleep(0.5)
        agents = start()
        go.touch()
        pod = await wait_for_async("finished", _finished(core, "keeper"))
        st = pod.status.container_statuses[0]
        assert (pod.status.phase, st.state.terminated.exit_code, st.restart_count) == ("Failed", 6, 0)
        assert await _log(core, "keeper") == "up\ndown\n"
    finally:
        await _stop(agents)
        await api.close()


async def _log_is(core: client.CoreV1Api, name: str, text: str) -> bool:
    return await _log(core, name) == text


async def test_simulated_mode(bare_cluster: LocalCluster) -> None:
    ns = "simulated"
    agents = asyncio.create_task(
        run_node_agents(bare_cluster.kubeconfig, bare_cluster.state_dir, "simulated")
    )
    api = bare_cluster.async_api_client()
    try:
        core = client.CoreV1Api(api)
        await core.create_namespace({"metadata": {"name": ns}})
        forever = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "forever"},
                   "spec": {"containers": [{"name": "m", "image": "x"}]}}  # fmt: skip
        annotations = {"t9k.local/simulate-exit-code": "3", "t9k.local/simulate-after": "1"}
        ends = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ends", "annotations": annotations},
                "spec": {"containers": [{"name": "m", "image": "x"}]}}  # fmt: skip
        with_init = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "with-init"},
                     "spec": {"initContainers": [{"name": "i", "image": "x"}],
                              "containers": [{"name": "m", "image": "x"}]}}  # fmt: skip
        await core.create_namespaced_pod(ns, forever)
        await core.create_namespaced_pod(ns, ends)
        await core.create_namespaced_pod(ns, with_init)

        def phase(name: str, want: str) -> Callable[[], Any]:
            async def probe() -> Any:
                pod = await core.read_namespaced_pod(name, ns)
                return pod if pod.status.phase == want else None

            return probe

        running = await wait_for_async("Running", phase("forever", "Running"))
        assert running.status.container_statuses[0].state.running.started_at
        assert running.status.pod_ip and running.spec.node_name == "t9k-local-node"
        done = await wait_for_async("Failed", phase("ends", "Failed"), timeout=15)
        assert done.status.container_statuses[0].state.terminated.exit_code == 3
        await asyncio.sleep(0.5)
        assert (await core.read_namespaced_pod("forever", ns)).status.phase == "Running"
        # Finished init containers leave the main container running, without an annotation to end it.
        assert (await core.read_namespaced_pod("with-init", ns)).status.phase == "Running"
        await core.delete_namespaced_pod("with-init", ns)
        assert not list((bare_cluster.state_dir / "pods").glob(f"{ns}_*"))  # no processes, no pod dirs
        await core.delete_namespaced_pod("forever", ns)

        async def gone() -> bool:
            try:
                await core.read_namespaced_pod("forever", ns)
            except ApiException as exc:
                return exc.status == 404
            return False

        await wait_for_async("deleted", gone, timeout=10)
    finally:
        await _stop(agents)
        await api.close()


async def test_bad_mode_and_network_are_rejected(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="mode: must be one of"):
        await run_node_agents(tmp_path / "kubeconfig", tmp_path, "docker")
    with pytest.raises(ValueError, match="network: must be one of"):
        network.select_network("bridge", tmp_path, network.PodSubnet())
