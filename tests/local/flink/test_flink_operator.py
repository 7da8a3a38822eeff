"""The local flink-operator on a running local cluster: what it refuses, how a failing component stops a
cluster, and that it can be switched off. (A cluster reaching Running and serving a Beam job is the BeamJob
example's end-to-end test, tests/examples.)"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

GROUP, VERSION, PLURAL = "flinkoperator.k8s.io", "v1beta1", "flinkclusters"


def flinkcluster(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "FlinkCluster",
        "metadata": {"name": name},
        "spec": {
            "flinkVersion": "2.3",
            "image": {"name": "flink:2.3"},
            "jobManager": {"accessScope": "Cluster"},
            "taskManager": {"replicas": 1},
            **spec,
        },
    }


class Flink:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        api = cluster.api_client()
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    def create(self, body: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)

    def get(self, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)

    def pods(self, name: str) -> dict[str, client.V1Pod]:
        found = self.core.list_namespaced_pod("default", label_selector=f"app=flink,cluster={name}").items
        return {p.metadata.name: p for p in found}

    def wait_state(self, name: str, state: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = self.get(name).get("status") or {}
            if status.get("state") == state:
                return status
            time.sleep(0.2)
        log = self.cluster.log_tail(30)
        raise AssertionError(f"FlinkCluster {name} never reached {state}: {status}\n--- server log:\n{log}")


def test_a_machine_without_flink_stops_the_cluster_saying_what_to_install(
    cluster_factory: Callable[..., LocalCluster],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    kubectl_binary: str,
) -> None:
    monkeypatch.setenv("FLINK_HOME", str(tmp_path))  # the node agents inherit it: no flink-dist jar there
    flink = Flink(cluster_factory())
    flink.create(flinkcluster("nojars"))
    status = flink.wait_state("nojars", "Stopped", 30)
    (ready,) = status["conditions"]
    assert ready["status"] == "False" and ready["reason"] == "CannotRun"
    assert f"FLINK_HOME={tmp_path} has no lib/flink-dist*.jar" in ready["message"]
    assert "pip install apache-flink-libraries" in ready["message"]
    assert flink.pods("nojars") == {}
    table = subprocess.run(
        [kubectl_binary, "--kubeconfig", str(flink.cluster.kubeconfig), "get", "flinkclusters"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    assert table[:7] == ["NAME", "VERSION", "STATE", "AGE", "nojars", "2.3", "Stopped"]
    flink.create(flinkcluster("badspec", taskManager={"replicas": 0}))
    status = flink.wait_state("badspec", "Stopped", 30)
    assert status["conditions"][0]["message"].startswith("spec.taskManager.replicas: must be an integer >= 1")


def test_a_taskmanager_that_exits_stops_the_cluster_and_its_other_processes(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    """Too little memory for Flink's own memory model: the TaskManager's entrypoint fails before its JVM."""
    flink = Flink(cluster_factory())
    flink.create(flinkcluster("small", flinkProperties={"taskmanager.memory.process.size": "64m"}))
    status = flink.wait_state("small", "Stopped", 90)
    message = status["conditions"][0]["message"]
    assert message == "small-taskmanager-0: container taskmanager exited with code 1"
    log = flink.core.read_namespaced_pod_log("small-taskmanager-0", "default", _preload_content=False)
    assert (
        "flink entrypoint: Flink could not size the taskmanager's memory from its configuration: Sum of "
        "configured JVM Metaspace (256.000mb (268435456 bytes)) and JVM Overhead (192.000mb (201326592 "
        "bytes)) exceed configured Total Process Memory (64.000mb (67108864 bytes))."
    ) in log.data.decode()
    deadline = time.monotonic() + 30
    while "small-jobmanager-0" in flink.pods("small") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(flink.pods("small")) == ["small-taskmanager-0"], "JobManager stopped, failed pod kept"
    events = flink.core.list_namespaced_event("default", field_selector="involvedObject.name=small").items
    changes = [e.message for e in events if e.reason == "StatusUpdate"]
    assert f"Cluster status changed: Creating -> Stopped: {message}" in changes


def test_without_the_flink_operator_flinkclusters_stay_as_written(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    flink = Flink(cluster_factory(flink_operator=False))
    flink.create(flinkcluster("idle"))
    time.sleep(2)
    assert "status" not in flink.get("idle") and flink.pods("idle") == {}
