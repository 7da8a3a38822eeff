"""The cncf-kubernetes provider's XCom sidecar on the local cluster: read through `pods/exec`, then stopped by
signalling its shell, as KubernetesPodOperator(do_xcom_push=True) does. (As for any volume, the kubelet
creates the mount point `/airflow/xcom` on the host; the volume itself is visible only in the pod.)"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster, wait_for

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="volumes at their mount paths need root (mount namespaces)"),
]


def test_pod_manager_extracts_the_xcom_and_stops_the_sidecar(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    from airflow.providers.cncf.kubernetes.utils.pod_manager import PodManager
    from airflow.providers.cncf.kubernetes.utils.xcom_sidecar import PodDefaults, add_xcom_sidecar

    cluster = cluster_factory()
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    result = {"accuracy": 0.93, "model": "resnet"}
    write = f"echo '{json.dumps(result)}' > {PodDefaults.XCOM_MOUNT_PATH}/return.json"
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="kpo-xcom", namespace="default"),
        spec=client.V1PodSpec(
            restart_policy="Never",
            containers=[client.V1Container(name="base", image="python:3.11", command=["sh", "-c", write])],
        ),
    )
    pod = add_xcom_sidecar(pod)
    core.create_namespaced_pod("default", api.sanitize_for_serialization(pod))

    def base_done() -> client.V1Pod | None:
        remote = core.read_namespaced_pod("kpo-xcom", "default")
        states = {s.name: s.state for s in remote.status.container_statuses or []}
        base, sidecar = states.get("base"), states.get(PodDefaults.SIDECAR_CONTAINER_NAME)
        return remote if base and base.terminated and sidecar and sidecar.running else None

    remote = wait_for("the base container to finish", base_done)
    assert json.loads(PodManager(kube_client=core).extract_xcom(remote)) == result

    def phase() -> str | None:
        current = core.read_namespaced_pod("kpo-xcom", "default").status.phase
        return current if current in ("Succeeded", "Failed") else None

    assert wait_for("the sidecar to stop", phase) == "Succeeded"  # its shell trapped SIGINT and exited 0
