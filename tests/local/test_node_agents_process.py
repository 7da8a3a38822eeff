"""The node agents run as the server's child process: they work, stop with it, and die with it."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster, wait_for

pytestmark = pytest.mark.cluster


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
    agents = cluster.node_agents_pid()
    assert agents is not None and agents != cluster.pid
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    )
    wait_for("a Running pod", lambda: core.read_namespaced_pod("p", "default").status.phase == "Running", 30)
    assert core.read_namespaced_pod("p", "default").spec.node_name  # the scheduler bound it
    cluster.stop()
    assert not alive(agents)


def test_agents_die_with_a_killed_server(cluster_factory: Callable[..., LocalCluster]) -> None:
    """Else a restarted server would start a second kubelet beside the orphaned one."""
    cluster = cluster_factory(kubelet="simulated")
    agents = cluster.node_agents_pid()
    assert agents is not None
    cluster.kill()
    wait_for("the orphaned agents to die", lambda: not alive(agents), 5)
    cluster.start()
    restarted = cluster.node_agents_pid()
    assert restarted is not None and restarted != agents


def test_server_exits_when_its_agents_die(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(kubelet="none")
    agents = cluster.node_agents_pid()
    assert agents is not None and cluster.pid is not None
    server = cluster.pid
    os.kill(agents, signal.SIGKILL)
    wait_for("the server to exit", lambda: not alive(server), 20)
    assert "node agents stopped (exit code -9)" in cluster.log_tail()
