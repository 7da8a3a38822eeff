"""A task's lineage for Airflow's OpenLineage provider (``operators.lineage``): the job from the rendered
manifest when the task starts; the job as the conclusion read it, its datasets, its last progress report
and its usage when it ended; and for a failure the class of its ending and the replica that failed first.
The provider's own extractor calls the operator's hooks, as in a deployment (tests/deployment checks the
events a real one emits)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.compat.assets import Asset
from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.providers.openlineage.extractors.manager import ExtractorManager
from airflow.utils.state import TaskInstanceState
from openlineage.client.serde import Serde

from t9k_provider.jobclient import identity as ident
from t9k_provider.operators import T9kJobFailed, T9kJobTimeout
from t9k_provider.operators.checkpoints import subdirectory
from t9k_provider.operators.failures import T9kInfrastructureError
from t9k_provider.operators.lineage import volume_datasets
from tests.airflow.fakes import FakeHook, FakeTI, make
from tests.support.builders import FAILED, RUNNING, SUCCEEDED, generic_manifest, replica_pod, terminated

pytestmark = pytest.mark.timeout(60)

CHECKPOINTS = {"persistentVolumeClaim": {"claimName": "ckpt"}}
OUT = {"name": "out", "hostPath": {"path": "/srv/out", "type": "DirectoryOrCreate"}}
#: The leader reports steps 1 and 2 of 4 (2 s apart), then the training resumes at step 1 after a restart.
REPORTS = "\n".join(
    [
        '2026-01-01T00:00:01Z T9K_PROGRESS {"step": 1, "total": 4, "metrics": {"loss": 0.5}}',
        '2026-01-01T00:00:03Z T9K_PROGRESS {"step": 2, "total": 4, "metrics": {"loss": 0.25}}',
        '2026-01-01T00:00:05Z T9K_PROGRESS {"step": 1, "total": 4, "metrics": {"loss": 0.4, "tag": "r"}}',
    ]
)


def training(namespace: str | None = None) -> dict[str, Any]:
    """Two workers that mount a data set read-only, a writable scratch claim, a host directory for the
    outputs, and a config map (no data), with two containers of two images."""
    job = generic_manifest(**({"namespace": namespace} if namespace else {}))
    spec = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    spec["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
        {"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}},
        OUT,
        {"name": "config", "configMap": {"name": "settings"}},
    ]
    spec["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data", "subPath": "mnist"},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "out", "mountPath": "/out"},
        {"name": "config", "mountPath": "/etc/app"},
    ]
    spec["containers"].append(
        {"name": "sidecar", "image": "busybox:1.36", "volumeMounts": [{"name": "out", "mountPath": "/o"}]}
    )
    return job


def facets(lineage: OperatorLineage) -> dict[str, Any]:
    """The run facets as the events carry them (OpenLineage's serializer drops what is None)."""
    serialized = {key: Serde.to_dict(facet) for key, facet in lineage.run_facets.items()}
    for facet in serialized.values():
        assert facet.pop("_producer") and facet.pop("_schemaURL")
    return serialized


def names(datasets: list[Any]) -> list[str]:
    return [f"{d.namespace} {d.name}" for d in datasets]


def test_the_start_event_describes_the_job_of_the_rendered_manifest() -> None:
    """Before the job exists: its kind, replicas and images, and the datasets the manifest names; the
    name, uid and the connection's namespace are not known yet, so no claim can be named."""
    op = make(FakeHook(), manifest=training())
    lineage = op.get_openlineage_facets_on_start()
    assert facets(lineage) == {
        "t9kJob": {"kind": "GenericJob", "replicas": {"worker": 2}, "images": ["busybox:1.36", "python:3.11"]}
    }
    assert names(lineage.inputs) == ["file /srv/out"]
    assert names(lineage.outputs) == ["file /srv/out"]

    stated = make(FakeHook(), manifest=training("team")).get_openlineage_facets_on_start()
    assert facets(stated)["t9kJob"]["namespace"] == "team"
    assert names(stated.inputs) == ["pvc://team datasets/mnist", "pvc://team scratch", "file /srv/out"]
    assert names(stated.outputs) == ["pvc://team scratch", "file /srv/out"]


def fit() -> None:
    """A function a decorated task runs."""


def test_a_decorated_task_starts_with_the_job_of_its_function() -> None:
    """``@task.t9k_pytorch``'s manifest names no metadata; the START event describes its job all the same."""
    from airflow.providers.common.compat.sdk import DAG, task

    mount = {"name": "out", "mountPath": "/o"}
    with DAG("lineage_unit", schedule=None):
        decorated = task.t9k_pytorch(workers=3, image="trainer:1", volumes=[OUT], volume_mounts=[mount])
        op = decorated(fit)().operator
    lineage = op.get_openlineage_facets_on_start()
    job = {"kind": "PyTorchTrainingJob", "replicas": {"worker": 3}, "images": ["trainer:1"]}
    assert facets(lineage) == {"t9kJob": job}
    assert names(lineage.inputs) == names(lineage.outputs) == ["file /srv/out"]


def test_volumes_are_read_unless_they_are_the_checkpoints_and_written_unless_read_only() -> None:
    job = training()
    spec = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    spec["volumes"] += [
        {"name": "t9k-checkpoints", **CHECKPOINTS},
        {"name": "shared", "nfs": {"server": "nfs.example", "path": "/exports"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    spec["containers"][0]["volumeMounts"] += [
        {"name": "t9k-checkpoints", "mountPath": "/t9k/checkpoints", "subPath": "d/r/t"},
        {"name": "shared", "mountPath": "/shared", "subPath": "a/../b", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    inputs, outputs = volume_datasets(job, "ns")
    assert names(inputs) == [
        "pvc://ns datasets/mnist", "pvc://ns scratch", "file /srv/out", "file://nfs.example /exports/b",
    ]  # fmt: skip
    assert names(outputs) == ["pvc://ns scratch", "file /srv/out", "pvc://ns ckpt/d/r/t"]


def serve_pods(hook: FakeHook, name: str, *exits: int, gpus: int = 1) -> None:
    """The job's replicas ran from second 0 to 10, exiting with ``exits`` (worker 1 first when it fails)."""
    hook.pods = [
        terminated(
            replica_pod(f"{name}-worker-{i}", "worker", i, name), 0, 10 - i * bool(code), code, gpus=gpus
        )
        for i, code in enumerate(exits)
    ]
    for pod in hook.pods:
        pod["spec"]["nodeName"] = "n1"
    hook.logs[(f"{name}-worker-0", "main")] = REPORTS


def test_a_succeeded_task_reports_its_job_datasets_progress_and_usage(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    name = ident.job_name(ident.task_identity(ti))
    serve_pods(fake_hook, name, 0, 0)
    fake_hook.script = [RUNNING, SUCCEEDED]
    model, data = Asset("file:///models/m1/model.pt"), Asset("file:///srv/raw")
    op = make(fake_hook, manifest=training(), checkpoint_volume=CHECKPOINTS, inlets=[data], outlets=[model])
    op.execute(context)
    lineage = op.get_openlineage_facets_on_complete(ti)

    assert facets(lineage) == {
        "t9kJob": {
            "kind": "GenericJob", "namespace": "conn-ns", "name": name, "uid": "uid-1",
            "replicas": {"worker": 2}, "images": ["busybox:1.36", "python:3.11"], "phase": "Succeeded",
        },
        "t9kProgress": {
            "step": 1, "total": 4, "metrics": {"loss": 0.4, "tag": "r"}, "at": "2026-01-01T00:00:05+00:00",
            "resumptions": [{"reached": 2, "resumed": 1, "time": 1767225605.0}],
        },
        "t9kUsage": {
            "replicas": 2,
            "replicaSeconds": {"worker": 20.0, "total": 20.0},
            "gpuSeconds": {"worker": 20.0, "total": 20.0},
        },
    }  # fmt: skip
    checkpoint = f"pvc://conn-ns ckpt/{subdirectory(ident.task_identity(ti))}"
    claims = ["pvc://conn-ns datasets/mnist", "pvc://conn-ns scratch", "file /srv/out"]
    assert names(lineage.inputs) == [*claims, "file /srv/raw"]
    assert names(lineage.outputs) == [*claims[1:], checkpoint, "file /models/m1/model.pt"]
    usage = facets(lineage)["t9kUsage"]
    assert ti.xcoms["t9k_usage"] == {
        "replica_seconds": usage["replicaSeconds"],
        "gpu_seconds": usage["gpuSeconds"],
    }


def test_a_failed_task_names_its_ending_and_the_replica_that_failed_first(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    name = ident.job_name(ident.task_identity(ti))
    serve_pods(fake_hook, name, 1, 3)
    fake_hook.script = [RUNNING, FAILED]
    op = make(fake_hook)
    with pytest.raises(T9kJobFailed):
        op.execute(context)
    found = facets(op.get_openlineage_facets_on_failure(ti))
    assert found["t9kJob"]["phase"] == "Failed" and found["t9kJob"]["uid"] == "uid-1"
    assert found["t9kFailure"] == {
        "ending": "workload", "failedPod": f"{name}-worker-1", "failedReplica": "worker/1", "node": "n1",
    }  # fmt: skip
    assert found["t9kUsage"]["gpuSeconds"]["total"] == 19.0


def test_a_replica_lost_to_the_infrastructure_is_said_so(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    name = ident.job_name(ident.task_identity(ti))
    serve_pods(fake_hook, name, 0, 137)
    target = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
    fake_hook.pods[1]["status"]["conditions"] = [target]
    fake_hook.script = [RUNNING, FAILED]
    op = make(fake_hook)
    with pytest.raises(T9kInfrastructureError):
        op.execute(context)
    assert facets(op.get_openlineage_facets_on_failure(ti))["t9kFailure"] == {
        "ending": "infrastructure",
        "detail": f"{name}-worker-1: disrupted on node n1 (DeletionByTaintManager)",
        "failedPod": f"{name}-worker-1",
        "failedReplica": "worker/1",
        "node": "n1",
    }


def test_a_stalled_training_ends_as_a_stall(fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI) -> None:
    name = ident.job_name(ident.task_identity(ti))
    fake_hook.pods = [replica_pod(f"{name}-worker-{i}", "worker", i, name) for i in (0, 1)]
    fake_hook.logs[(f"{name}-worker-0", "main")] = REPORTS
    fake_hook.script = [RUNNING]  # Running since 2026-01-01: its last report is long overdue
    op = make(fake_hook, progress_timeout=30, pod_error_timeout=None)
    with pytest.raises(T9kJobTimeout):
        op.execute(context)
    found = facets(op.get_openlineage_facets_on_failure(ti))
    assert found["t9kFailure"] == {"ending": "stall"}
    assert found["t9kProgress"]["step"] == 1 and found["t9kJob"]["phase"] == "Running"


def test_the_provider_asks_the_operator_for_each_state(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    """Airflow's OpenLineage provider finds the hooks (its DefaultExtractor) and calls the right one: the
    start before ``execute``, the end after it."""
    manager = ExtractorManager()
    run = SimpleNamespace(run_id=ti.run_id)
    op = make(fake_hook, manifest=training("team"))
    started = manager.extract_metadata(run, op, TaskInstanceState.RUNNING, ti)
    assert facets(started)["t9kJob"].get("name") is None
    fake_hook.script = [SUCCEEDED]
    op.execute(context)
    ended = facets(manager.extract_metadata(run, op, TaskInstanceState.SUCCESS, ti))
    assert ended["t9kJob"]["name"] == ident.job_name(ident.task_identity(ti))
    assert "t9kFailure" not in ended
    op._outcome = None  # a task that failed before its job concluded: what it knows of the job
    failed = facets(manager.extract_metadata(run, op, TaskInstanceState.FAILED, ti))
    assert failed["t9kJob"]["uid"] == "uid-1" and "phase" not in failed["t9kJob"]
