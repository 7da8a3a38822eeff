"""A wait that gives up says what the cluster looked like: the container that fails, how it ended, its last
log line, its restarts; the same for the component of the cluster that died."""

from __future__ import annotations

import os
import signal

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster, wait_for
from tests.support.builders import make_container, make_pod
from tests.support.clusters import ClusterFactory

pytestmark = pytest.mark.cluster


def test_a_wait_for_a_crash_looping_pod_names_the_container_its_exit_and_last_log_line(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(env={"T9K_LOCAL_RESTART_BACKOFF": "1"})
    core = client.CoreV1Api(cluster.api_client())
    crash = "import sys; print('loading config', flush=True); print('bad value for lr: -1'); sys.exit(3)"
    pod = make_pod("crashy", make_container("trainer", py=crash), restart_policy="Always")
    core.create_namespaced_pod("default", pod)

    def restarted() -> bool:
        statuses = core.read_namespaced_pod("crashy", "default").status.container_statuses or []
        return bool(statuses) and statuses[0].restart_count >= 1

    wait_for("a restart", restarted)
    with pytest.raises(TimeoutError) as gave_up:
        wait_for("crashy Ready", lambda: False, timeout=0.5)
    said = str(gave_up.value)
    assert "timed out after 0.5s waiting for crashy Ready" in said
    assert f"cluster {cluster.state_dir}:" in said
    assert "default/crashy: Running" in said or "default/crashy: Pending" in said, said
    trainer = next(line for line in said.splitlines() if line.strip().startswith("trainer:"))
    assert "restarts " in trainer and "exit 3 (Error)" in trainer, said
    assert "| bad value for lr: -1" in said, said


def test_a_wait_on_a_cluster_whose_server_died_says_how_and_its_last_lines(
    cluster_factory: ClusterFactory,
) -> None:
    cluster: LocalCluster = cluster_factory(kubelet="none")
    assert cluster.pid is not None
    os.kill(cluster.pid, signal.SIGKILL)
    with pytest.raises(TimeoutError) as gave_up:
        wait_for("anything", lambda: False, timeout=0.5)
    said = str(gave_up.value)
    assert "the server is not running (killed by SIGKILL)" in said, said
    assert "t9k-local API server on https://127.0.0.1:" in said, said  # its log's last lines
