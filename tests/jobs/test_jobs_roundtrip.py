"""Every documented example loads, validates and round-trips to the same manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from t9k_provider.jobs import KINDS, ColossalAIJob, GenericJob, JobStatus, MPIJob, T9kJob, load
from tests.jobs.jobs_fixtures import expected_manifest, valid_fixtures

FIXTURES = valid_fixtures()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_round_trips(path: Path) -> None:
    job = load(path)
    manifest = job.to_manifest()
    assert manifest == expected_manifest(path)
    # A second trip changes nothing, whatever the source form.
    assert load(manifest).to_manifest() == manifest
    assert load(yaml.safe_dump(manifest)).to_manifest() == manifest
    assert load(json.dumps(manifest)).to_manifest() == manifest


def test_every_kind_has_examples() -> None:
    kinds = {load(p).KIND for p in FIXTURES}
    assert kinds == set(KINDS)


def test_defaults_are_visible_but_not_written() -> None:
    job = load(FIXTURES[0].parent / "seed-genericjob-basic.yaml")
    assert isinstance(job, GenericJob)
    replica = job.spec.replica_specs[0]
    assert (replica.restart_policy.policy, replica.restart_policy.limit) == ("OnFailure", 0)
    assert job.spec.clean_up_policy == "None"
    assert "restartPolicy" not in job.to_manifest()["spec"]["replicaSpecs"][0]


def test_old_spellings_are_read_and_canonical_ones_written() -> None:
    job = load(FIXTURES[0].parent / "seed-genericjob-status.yaml")
    assert isinstance(job.status, JobStatus)
    assert job.status.condition("Initialized") is not None
    assert job.status.condition("Initializing") is None
    assert [r.name for r in job.status.tasks[0].replicas] == [
        "generic-example-worker-0",
        "generic-example-worker-1",
    ]
    deepspeed = load(FIXTURES[0].parent / "docs-deepspeedjob-basic.yaml")
    assert deepspeed.KIND == "DeepSpeedJob"
    assert deepspeed.spec.config.slots_per_worker == 1
    assert deepspeed.spec.config.run.argv() == ["/t9k/mnt/train.py"]
    assert deepspeed.spec.config.run.mode == "python"


def test_models_built_in_python_write_complete_manifests() -> None:
    job = GenericJob.model_validate(
        {
            "metadata": {"name": "py"},
            "spec": {
                "replicaSpecs": [{"type": "worker", "template": {"spec": {"containers": [{"name": "a"}]}}}]
            },
        }
    )
    assert (job.kind, job.api_version, job.name) == ("GenericJob", "batch.tensorstack.dev/v1beta1", "py")
    assert job.to_manifest() == {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "py"},
        "spec": {"replicaSpecs": [{"type": "worker", "template": {"spec": {"containers": [{"name": "a"}]}}}]},
    }


def test_status_written_by_the_controller_round_trips() -> None:
    job = load(FIXTURES[0].parent / "seed-genericjob-basic.yaml")
    status = JobStatus.model_validate(
        {
            "phase": "Running",
            "startTime": "2026-01-01T00:00:00Z",
            "observedGeneration": 2,
            "conditions": [{"type": "Running", "status": "True", "reason": "-", "message": "m"}],
            "tasks": [{"type": "worker", "restartCount": 1, "replicas": [{"name": "n", "restartCount": 1}]}],
            "aggregate": {"running": 4},
            "backoffCount": 1,
        }
    )
    updated = job.model_copy(update={"status": status})
    manifest = updated.to_manifest()
    assert manifest["status"]["aggregate"] == {"running": 4}
    assert load(manifest).to_manifest() == manifest


def test_unknown_status_fields_from_other_controllers_are_kept() -> None:
    manifest = expected_manifest(FIXTURES[0].parent / "seed-genericjob-basic.yaml")
    manifest["status"] = {"phase": "Running", "podGroup": {"name": "x"}}
    assert load(manifest).to_manifest() == manifest


def _shapes(kind: type[T9kJob], documented: str, replica_specs: str) -> tuple[T9kJob, T9kJob]:
    folder = FIXTURES[0].parent
    return load(folder / documented), load(folder / replica_specs)


def test_mpijob_shapes_normalise_to_one_form() -> None:
    documented, new = _shapes(MPIJob, "docs-mpijob-basic.yaml", "docs-mpijob-replicaspecs.yaml")
    a, b = documented.spec.normalized(), new.spec.normalized()
    assert (a.worker.type, a.worker.replicas, a.worker_container) == ("worker", 5, "mpi-worker")
    assert a.script == ["./random_walk", "20", "40", "2"]
    assert a.extra_args[:2] == ["-N", "3"] and a.mca == {"btl": "^openib"} and a.home == "/usr/local"
    assert a.launcher.template == a.worker.template and a.launcher_container == "mpi-worker"
    assert (
        a.clean_up_workers and a.ssh.sshd_path == "/usr/sbin/sshd" and a.ssh.auth_mount_path == "/root/.ssh"
    )
    assert (b.worker.replicas, b.worker_container, b.home) == (4, "worker", "/usr/local")
    assert b.script[0] == "python" and b.mca == {"btl": "^openib", "pml": "ob1"}
    # `template: {}` for the launcher means "run in the worker's image".
    assert b.launcher.template == b.worker.template and b.launcher.replicas == 1
    assert type(a) is type(b)


def test_mpijob_normalised_keeps_process_recovery() -> None:
    job = load(FIXTURES[0].parent / "docs-mpijob-horovod-recovery.yaml")
    normal = job.spec.normalized()
    assert normal.processes_per_worker == 1
    assert normal.process_recovery is not None and normal.process_recovery.enabled
    assert normal.process_recovery.limit == 100


def test_colossalaijob_shapes_normalise_to_one_form() -> None:
    documented, new = _shapes(
        ColossalAIJob, "seed-colossalaijob-basic.yaml", "docs-colossalaijob-replicaspecs.yaml"
    )
    a, b = documented.spec.normalized(), new.spec.normalized()
    launcher = a.launcher.template["spec"]["containers"][0]
    assert launcher == {
        "name": "launcher",
        "image": "hpcaitech/colossalai:0.3.0",
        "workingDir": "/workspace",
        "resources": {"limits": {"cpu": 1, "memory": "2Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}},
    }
    assert (a.worker.replicas, a.proc_per_worker, a.script, a.extra_args) == (2, 1, ["train.py", "arg1"], [])
    assert a.launcher.restart_policy.policy == "Never"
    assert (b.worker.replicas, b.launcher_container, b.worker_container) == (4, "launcher", "worker")
    assert b.script[1] == "--distplan=colossalai"
    assert type(a) is type(b)


@pytest.mark.parametrize(
    "fixture",
    ["docs-mpijob-replicaspecs.yaml", "docs-mpijob-basic.yaml", "docs-colossalaijob-replicaspecs.yaml"],
)
def test_normalising_does_not_change_the_job(fixture: str) -> None:
    job = load(FIXTURES[0].parent / fixture)
    before = job.to_manifest()
    normal = job.spec.normalized()
    for replica in (normal.launcher, normal.worker):
        replica.template["spec"]["containers"][0]["name"] = "changed"
        replica.restart_policy.limit = 7
    assert job.to_manifest() == before
    assert job.spec.normalized().worker.restart_policy.limit != 7
