"""The node agents (the controllers, a kubelet per node) run as the server's child processes: they work,
stop with it, die with it, and are restarted, said, when they die on their own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster, none_left, wait_for

pytestmark = pytest.mark.cluster
CONTROLLER = "t9k_provider.controller"  # its module, in the child's command line


def alive(pid: int) -> bool:
    """Running and not a zombie (an orphan may wait for a reaper that never comes in a container)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_agents_run_apart_from_the_server_and_stop_with_it(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    cluster = cluster_factory(kubelet="simulated")
    agents = cluster.agent_pids()
    assert len(agents) == 2 and cluster.pid not in agents  # the controllers and the node's kubelet
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    )
    wait_for("a Running pod", lambda: core.read_namespaced_pod("p", "default").status.phase == "Running", 30)
    assert core.read_namespaced_pod("p", "default").spec.node_name  # the scheduler bound it
    cluster.stop()
    assert not any(alive(pid) for pid in agents)


def test_agents_die_with_a_killed_server(cluster_factory: Callable[..., LocalCluster]) -> None:
    """Else a restarted server would start a second kubelet beside the orphaned one."""
    cluster = cluster_factory(kubelet="simulated")
    agents = cluster.agent_pids()
    assert len(agents) == 2
    cluster.kill()
    wait_for("the orphaned agents to die", none_left(lambda: [pid for pid in agents if alive(pid)]), 5)
    cluster.start()
    restarted = cluster.agent_pids()
    assert len(restarted) == 2 and not set(restarted) & set(agents)


def test_the_t9k_controller_dies_with_a_killed_server(cluster_factory: Callable[..., LocalCluster]) -> None:
    """It runs a program of its own (not an internal `t9k-local` command), yet dies with the server as the
    agents do: else every SIGKILLed server left a controller behind, and the restarted server started a
    second one beside it, both reconciling without leader election (found by `make soak`)."""
    cluster = cluster_factory(kubelet="none", controller=True)
    first = wait_for("the controller running", lambda: cluster.child_pid(CONTROLLER))
    cluster.kill()
    try:
        wait_for("the orphaned controller to die", lambda: not alive(first), 5)
    finally:
        if alive(first):  # this test's own leftover: do not leave it to the other tests
            os.kill(first, signal.SIGKILL)
    cluster.start()
    restarted = wait_for("the controller running again", lambda: cluster.child_pids(CONTROLLER))
    assert len(restarted) == 1 and first not in restarted


def test_agents_that_die_are_said_and_restarted(cluster_factory: Callable[..., LocalCluster]) -> None:
    """A crashed kubelet is restarted as systemd would (it re-adopts its containers); the server's log and
    `t9k-local status` say which component died, how, and its last log lines."""
    cluster = cluster_factory(kubelet="simulated")
    kubelet = cluster.kubelet_pid()
    assert kubelet is not None and cluster.pid is not None
    os.kill(kubelet, signal.SIGKILL)
    restarted = wait_for("the kubelet restarted", lambda: (pid := cluster.kubelet_pid()) != kubelet and pid)
    assert alive(cluster.pid) and alive(restarted)
    assert f"kubelet t9k-local-node (pid {kubelet}) exited: killed by SIGKILL" in cluster.log_tail(100)
    status = _status(cluster)
    assert "kubelet t9k-local-node: running" in status and "restarts 1" in status, status
    assert "last exit: killed by SIGKILL" in status, status
    core = client.CoreV1Api(cluster.api_client())  # the restarted agents run pods
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    )
    wait_for("a Running pod", lambda: core.read_namespaced_pod("p", "default").status.phase == "Running", 30)


def test_a_controller_that_dies_is_said_with_its_last_lines_and_restarted(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    cluster = cluster_factory(kubelet="none", controller=True)
    first = wait_for("the controller running", lambda: cluster.child_pid(CONTROLLER))
    with open(cluster.state_dir / "controller.log", "a") as log:
        log.write("the line before the crash\n")
    os.kill(first, signal.SIGKILL)
    wait_for(
        "the controller restarted",
        lambda: (pid := cluster.child_pid(CONTROLLER)) != first and pid,
    )
    said = cluster.log_tail(100)
    assert f"T9k controller (pid {first}) exited: killed by SIGKILL" in said, said
    assert "| the line before the crash" in said, said
    status = _status(cluster)
    assert "T9k controller: running" in status and "the line before the crash" in status, status


def _status(cluster: LocalCluster) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "t9k_provider.local.cli", "status", "--state-dir", str(cluster.state_dir)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout + done.stderr


def test_a_cluster_stops_itself_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    """A LocalCluster's server is started with ``--owner-pid``: a test process SIGKILLed (pytest-xdist kills
    its workers so, without their teardown) leaves no API server, controllers or kubelet running."""
    owner = (
        "import os, signal\n"
        "from t9k_provider.testing import LocalCluster\n"
        f"cluster = LocalCluster({str(tmp_path / 'cluster')!r}, kubelet='simulated').start()\n"
        "print(os.getpid(), cluster.pid, *cluster.agent_pids(), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", owner], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    owner_pid, *pids = (int(pid) for pid in proc.stdout.split())
    assert len(pids) == 3, proc.stdout  # the server, the controllers, the node's kubelet
    try:
        wait_for(
            "the orphaned cluster to stop itself", none_left(lambda: [pid for pid in pids if alive(pid)]), 30
        )
    finally:
        for pid in filter(alive, pids):  # this test's own leftovers: do not leave them to the other tests
            os.kill(pid, signal.SIGKILL)
    assert f"shutting down: {owner_pid} ended" in (tmp_path / "cluster" / "server.log").read_text()
