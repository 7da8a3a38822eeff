"""kubectl 1.32 against the local cluster with the process kubelet: ``create deployment`` (a protobuf
body) until its pods run, ``scale``, ``set image`` and ``rollout status``/``undo``, ``create job`` to
completion, and the apps/v1 tables."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from t9k_provider.testing import LocalCluster
from tests.support.clusters import cluster_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("kubectl_binary")]


cluster = cluster_fixture(flink_operator=False)


@pytest.fixture(scope="module")
def kubectl(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, timeout: float = 90) -> str:
        proc = subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cache), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    return run


def test_create_deployment_runs_pods_then_rolls_and_undoes(kubectl: Callable[..., str]) -> None:
    out = kubectl("create", "deployment", "web", "--image=busybox:1", "--replicas=2", "--", "sleep", "300")
    assert out.strip() == "deployment.apps/web created"
    assert "successfully rolled out" in kubectl("rollout", "status", "deploy/web", "--timeout=60s")
    phases = kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].status.phase}").split()
    assert phases == ["Running", "Running"]

    header, row = kubectl("get", "deploy", "web").splitlines()
    assert header.split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert row.split()[:4] == ["web", "2/2", "2", "2"]
    header, row = kubectl("get", "rs", "-o", "wide").splitlines()
    assert " ".join(header.split()) == "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR"
    cells = row.split()
    assert cells[1:4] == ["2", "2", "2"] and cells[5:7] == ["busybox", "busybox:1"]
    assert cells[7].startswith("app=web,pod-template-hash=")

    assert "scaled" in kubectl("scale", "deploy/web", "--replicas=3")
    kubectl("rollout", "status", "deploy/web", "--timeout=60s")
    assert kubectl("get", "deploy", "web", "-o", "jsonpath={.status.readyReplicas}") == "3"

    kubectl("set", "image", "deploy/web", "busybox=busybox:2")
    assert "successfully rolled out" in kubectl("rollout", "status", "deploy/web", "--timeout=90s")
    pods = json.loads(kubectl("get", "pods", "-l", "app=web", "-o", "json"))["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert len(live) == 3 and {p["spec"]["containers"][0]["image"] for p in live} == {"busybox:2"}
    history = kubectl("rollout", "history", "deploy/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]

    kubectl("rollout", "undo", "deploy/web")
    kubectl("rollout", "status", "deploy/web", "--timeout=90s")
    assert kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}") == (
        "busybox:1"
    )
    assert kubectl("get", "deploy", "web", "-o", "jsonpath={.metadata.annotations}") == (
        '{"deployment.kubernetes.io/revision":"3"}'
    )
    kubectl("delete", "deploy", "web", "--wait=false")


def test_create_job_runs_to_completion(kubectl: Callable[..., str]) -> None:
    out = kubectl("create", "job", "once", "--image=busybox", "--", "sh", "-c", "echo done")
    assert out.strip() == "job.batch/once created"
    kubectl("wait", "--for=condition=Complete", "job/once", "--timeout=60s")
    assert kubectl("logs", "job/once").strip() == "done"


def test_apps_tables_and_scale_of_other_workloads(kubectl: Callable[..., str], tmp_path: Path) -> None:
    manifest = tmp_path / "sts.yaml"
    manifest.write_text(
        """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 0
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: busybox:1, command: [sleep, "300"]}]}
"""
    )
    assert "created" in kubectl("apply", "-f", str(manifest))
    header, row = kubectl("get", "sts", "db").splitlines()
    assert header.split() == ["NAME", "READY", "AGE"] and row.split()[:2] == ["db", "0/0"]
    assert "scaled" in kubectl("scale", "sts/db", "--replicas=2")
    assert "roll out complete" in kubectl("rollout", "status", "sts/db", "--timeout=60s")
    pods = kubectl("get", "pods", "-l", "app=db", "-o", "jsonpath={.items[*].metadata.name}")
    assert sorted(pods.split()) == ["db-0", "db-1"]
    assert kubectl("get", "sts", "db").splitlines()[1].split()[:2] == ["db", "2/2"]
    services = kubectl("get", "svc", "kubernetes", "-n", "default", "-o", "jsonpath={.spec.clusterIP}")
    assert services == "10.96.0.1"
    kubectl("delete", "-f", str(manifest))


def test_recreate_waits_for_terminating_pods(kubectl: Callable[..., str], tmp_path: Path) -> None:
    manifest = tmp_path / "re.yaml"
    manifest.write_text(
        """
apiVersion: apps/v1
kind: Deployment
metadata: {name: re}
spec:
  replicas: 2
  strategy: {type: Recreate}
  selector: {matchLabels: {app: re}}
  template:
    metadata: {labels: {app: re}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: c
        image: busybox:1
        command: [sh, -c, "trap 'sleep 1; exit 0' TERM; while true; do sleep 0.1; done"]
"""
    )
    kubectl("apply", "-f", str(manifest))
    kubectl("rollout", "status", "deploy/re", "--timeout=60s")
    kubectl("set", "image", "deploy/re", "c=busybox:2")
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the rollout did not finish"
        pods = json.loads(kubectl("get", "pods", "-l", "app=re", "-o", "json"))["items"]
        images = {p["spec"]["containers"][0]["image"] for p in pods}
        assert len(images) <= 1, f"old and new pods at once: {images}"
        if (
            images == {"busybox:2"}
            and len(pods) == 2
            and all(p["status"].get("phase") == "Running" for p in pods)
        ):
            break
        time.sleep(0.1)
    kubectl("delete", "-f", str(manifest), "--wait=false")


def test_rollout_status_reports_an_exceeded_progress_deadline(
    cluster: LocalCluster, kubectl: Callable[..., str], tmp_path: Path
) -> None:
    manifest = tmp_path / "stuck.yaml"
    manifest.write_text(
        """
apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck}
spec:
  replicas: 1
  minReadySeconds: 2
  progressDeadlineSeconds: 3
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}}
    spec: {containers: [{name: c, image: busybox:1, command: [sh, -c, "sleep 1; exit 1"]}]}
"""
    )
    kubectl("apply", "-f", str(manifest))  # its pod is never ready for minReadySeconds: never available
    proc = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "rollout",
            "status",
            "deploy/stuck",
            "--timeout=60s",
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode != 0
    assert 'deployment "stuck" exceeded its progress deadline' in proc.stderr
    conditions = json.loads(kubectl("get", "deploy", "stuck", "-o", "jsonpath={.status.conditions}"))
    progressing = next(c for c in conditions if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "ProgressDeadlineExceeded")

    kubectl("rollout", "pause", "deploy/stuck")
    deadline = time.monotonic() + 30
    while progressing["reason"] != "DeploymentPaused":
        assert time.monotonic() < deadline, "the paused condition did not show"
        time.sleep(0.2)
        conditions = json.loads(kubectl("get", "deploy", "stuck", "-o", "jsonpath={.status.conditions}"))
        progressing = next(c for c in conditions if c["type"] == "Progressing")
    assert progressing["status"] == "Unknown"
    kubectl("delete", "-f", str(manifest), "--wait=false")
