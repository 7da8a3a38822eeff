"""Acceptance: pods/log through the API server on pods run by the process kubelet."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster, wait_for
from tests.support.clusters import cluster_fixture
from tests.support.gates import sh_gate

pytestmark = pytest.mark.cluster

local_cluster = cluster_fixture()


@pytest.fixture(scope="module")
def core(local_cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(local_cluster.api_client())


def get_log(
    cluster: LocalCluster, ns: str, pod: str, query: str = "", timeout: float = 20
) -> tuple[int, str]:
    conn = cluster.connection(timeout)
    conn.request(
        "GET",
        f"/api/v1/namespaces/{ns}/pods/{pod}/log{query}",
        headers={"Authorization": f"Bearer {cluster.token}"},
    )
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    return resp.status, body


def phase(core: client.CoreV1Api, ns: str, name: str) -> str:
    return core.read_namespaced_pod(name, ns).status.phase


def test_two_containers_exit_codes_phases_and_follow(
    local_cluster: LocalCluster, core: client.CoreV1Api, ns: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"  # "bad" runs until the test saw the pod Running
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "two"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "ok",
                        "image": "busybox",
                        "command": ["sh", "-c", "echo one; sleep 1; echo two"],
                    },
                    {
                        "name": "bad",
                        "image": "busybox",
                        "command": [
                            "sh",
                            "-c",
                            f"echo oops >&2; {sh_gate(go)}; exit 3",
                        ],
                    },
                ],
            },
        },
    )
    wait_for("pod two Running", lambda: phase(core, ns, "two") == "Running")
    go.touch()
    started = time.monotonic()
    status, text = get_log(local_cluster, ns, "two", "?container=ok&follow=true")
    assert status == 200 and text == "one\ntwo\n"
    assert time.monotonic() - started < 15  # follow ended when the process exited
    status, text = get_log(local_cluster, ns, "two", "?container=bad&follow=True&timestamps=true")
    assert status == 200 and text.endswith(" oops\n") and text.split(" ")[0].endswith("Z")
    wait_for("pod two Failed", lambda: phase(core, ns, "two") == "Failed")
    pod = core.read_namespaced_pod("two", ns)
    codes = {
        s.name: (s.state.terminated.exit_code, s.state.terminated.reason)
        for s in pod.status.container_statuses
    }
    assert codes == {"ok": (0, "Completed"), "bad": (3, "Error")}
    status, text = get_log(local_cluster, ns, "two", "?container=ok&tailLines=1")
    assert text == "two\n"
    status, text = get_log(local_cluster, ns, "two", "?container=ok&limitBytes=2")
    assert text == "on"
    status, text = get_log(local_cluster, ns, "two", "?container=ok&sinceSeconds=3600")
    assert text == "one\ntwo\n"


def test_single_container_needs_no_container_parameter(
    local_cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "solo"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "echo solo"]}],
            },
        },
    )
    wait_for("pod solo Succeeded", lambda: phase(core, ns, "solo") == "Succeeded")
    assert get_log(local_cluster, ns, "solo", "?follow=true") == (200, "solo\n")
    # as Airflow reads logs (kubernetes 36 returns str(bytes) when it preloads a str response)
    assert core.read_namespaced_pod_log("solo", ns, _preload_content=False).data == b"solo\n"


def test_log_errors(local_cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "multi"},
            "spec": {
                "restartPolicy": "Never",
                "initContainers": [{"name": "init", "image": "busybox", "command": ["sleep", "30"]}],
                "containers": [
                    {"name": "a", "image": "busybox", "command": ["true"]},
                    {"name": "b", "image": "busybox", "command": ["true"]},
                ],
            },
        },
    )
    path = f"/api/v1/namespaces/{ns}/pods/multi/log"
    status, _, body = local_cluster.request("GET", path)
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == (
        "a container name must be specified for pod multi, choose one of: [a b] "
        "or one of the init containers: [init]"
    )
    status, _, body = local_cluster.request("GET", path + "?container=zzz")
    assert (status, body["message"]) == (400, "container zzz is not valid for pod multi")
    wait_for(
        "the container statuses of pod multi",
        lambda: bool(core.read_namespaced_pod("multi", ns).status.container_statuses),
    )
    status, _, body = local_cluster.request("GET", path + "?container=a")
    assert status == 400
    assert body["message"].startswith('container "a" in pod "multi" is waiting to start: ')
    status, _, body = local_cluster.request("GET", path + "?container=a&previous=true")
    assert (status, body["message"]) == (400, 'previous terminated container "a" in pod "multi" not found')
    status, _, body = local_cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/nope/log")
    assert status == 404 and body["message"] == 'pods "nope" not found'
    core.delete_namespaced_pod("multi", ns, grace_period_seconds=0)


def test_log_of_a_container_in_crash_loop_back_off_is_its_last_run(
    local_cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    """As the kubelet: while a container waits to restart, its log (and `previous`) is the run that ended."""
    script = (
        "import pathlib\n"
        "runs = pathlib.Path('/scratch/runs')\n"
        "n = len(runs.read_text()) + 1 if runs.exists() else 1\n"
        "runs.write_text('x' * n)\n"
        "print(f'run {n}', flush=True)\n"
        "raise SystemExit(1)\n"
    )
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "crashy"},
            "spec": {
                "restartPolicy": "Always",
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "containers": [
                    {
                        "name": "c",
                        "image": "python",
                        "command": ["python", "-c", script],
                        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                    }
                ],
            },
        },
    )

    def backing_off() -> bool:
        statuses = core.read_namespaced_pod("crashy", ns).status.container_statuses or []
        waiting = statuses and statuses[0].state.waiting
        return bool(waiting) and waiting.reason == "CrashLoopBackOff"

    # the second run failed: the next restart waits (10 s by default)
    wait_for("the restart back-off", backing_off)
    (status,) = core.read_namespaced_pod("crashy", ns).status.container_statuses
    assert status.state.waiting.message.startswith("back-off 10s restarting failed container=c pod=crashy_")
    assert (status.restart_count, status.last_state.terminated.exit_code) == (2, 1)
    assert get_log(local_cluster, ns, "crashy") == (200, "run 2\n")
    assert get_log(local_cluster, ns, "crashy", "?previous=true") == (200, "run 2\n")
    core.delete_namespaced_pod("crashy", ns, grace_period_seconds=0)
