"""``checkpoint_volume``: every container of every replica of every kind mounts the volume at a directory of
the task instance's own, the same on every try, with ``T9K_CHECKPOINT_DIR``, ``T9K_TRY_NUMBER`` and
``T9K_JOB_RESTARTS`` (the job's whole restarts, from the pod's annotation); bad
volumes fail at DAG parse naming the field, and clashes with the manifest fail before any API call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.providers.common.compat.sdk import AirflowFailException

from t9k_provider.jobclient import identity as ident
from t9k_provider.operators import T9kJobOperator, checkpoints
from tests.airflow.fakes import FakeTI
from tests.support.builders import generic_manifest

pytestmark = pytest.mark.airflow_independent

FIXTURES = Path(__file__).resolve().parents[2] / "jobs" / "fixtures" / "valid"
#: One manifest per kind, as the T9k docs write them.
KIND_FIXTURES = [
    "seed-genericjob-basic", "docs-pytorchtrainingjob-basic", "seed-tensorflowtrainingjob-basic",
    "docs-xgboosttrainingjob-basic", "seed-colossalaijob-basic", "docs-deepspeedjob-basic",
    "docs-mpijob-basic", "docs-beamjob-basic",
]  # fmt: skip
PVC = {"persistentVolumeClaim": {"claimName": "ckpt"}}


def built(manifest: dict[str, Any], ti: FakeTI, **options: Any) -> dict[str, Any]:
    op = T9kJobOperator(task_id=ti.task_id, manifest=manifest, checkpoint_volume=PVC, **options)
    return op.build_manifest(ident.task_identity(ti), ti.try_number)


def containers_of(manifest: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) for every container of every pod template."""
    return [(spec, c) for spec in checkpoints.pod_specs(manifest["spec"]) for c in spec["containers"]]


@pytest.mark.parametrize("fixture", KIND_FIXTURES)
def test_every_container_of_every_kind_mounts_the_task_instances_directory(fixture: str) -> None:
    manifest = yaml.safe_load((FIXTURES / f"{fixture}.yaml").read_text())
    body = built(manifest, FakeTI(try_number=3, map_index=2))
    found = containers_of(body)
    assert found, "the probe finds the pod templates"
    for spec, container in found:
        assert {"name": "t9k-checkpoints", **PVC} in spec["volumes"]
        assert {
            "name": "t9k-checkpoints", "mountPath": "/t9k/checkpoints",
            "subPath": "dag/manual__2026-01-01T00_00_00_00_00/train/2",
        } in container["volumeMounts"]  # fmt: skip
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["T9K_CHECKPOINT_DIR"] == "/t9k/checkpoints" and env["T9K_TRY_NUMBER"] == "3"
        (restarts,) = [e for e in container["env"] if e["name"] == "T9K_JOB_RESTARTS"]
        assert restarts["valueFrom"] == {
            "fieldRef": {"fieldPath": "metadata.annotations['batch.tensorstack.dev/job-restarts']"}
        }


def test_every_try_finds_the_same_directory_and_other_instances_their_own() -> None:
    def subpath(ti: FakeTI) -> str:
        return containers_of(built(generic_manifest(), ti))[0][1]["volumeMounts"][-1]["subPath"]

    first = subpath(FakeTI(try_number=1))
    assert subpath(FakeTI(try_number=2)) == first
    assert subpath(FakeTI(map_index=0)) != first
    assert subpath(FakeTI(run_id="scheduled__2026-01-02T00:00:00+00:00")) != first
    assert subpath(FakeTI(task_id="evaluate")) != first


def test_without_checkpoint_volume_the_manifest_is_untouched() -> None:
    op = T9kJobOperator(task_id="train", manifest=generic_manifest())
    body = op.build_manifest(ident.task_identity(FakeTI()), 1)
    assert "T9K_CHECKPOINT_DIR" not in str(body) and "t9k-checkpoints" not in str(body)


@pytest.mark.parametrize(
    ("volume", "words"),
    [
        ({"emptyDir": {}}, "emptyDir volume does not outlive its pod"),
        ({"secret": {"secretName": "s"}}, "secret volume does not outlive"),
        ({"name": "x", "hostPath": {"path": "/d"}}, "one volume source"),
        ({"name": {"path": "/d"}}, "give the volume source only"),
        ("ckpt", "one volume source"),
    ],
)
def test_a_volume_that_cannot_keep_checkpoints_fails_at_parse(volume: Any, words: str) -> None:
    with pytest.raises(ValueError, match=f"checkpoint_volume: .*{words}"):
        T9kJobOperator(task_id="train", manifest=generic_manifest(), checkpoint_volume=volume)


def test_a_clash_with_the_manifests_own_mounts_fails_before_any_call() -> None:
    manifest = generic_manifest()
    container = manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": "data", "mountPath": "/t9k/checkpoints"}]
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    with pytest.raises(AirflowFailException, match="checkpoint_volume: container 'main' mounts /t9k/checkp"):
        built(manifest, FakeTI())
    del container["volumeMounts"]
    for name in ("T9K_TRY_NUMBER", "T9K_JOB_RESTARTS"):
        container["env"] = [{"name": name, "value": "9"}]
        with pytest.raises(AirflowFailException, match=f"checkpoint_volume: container 'main' sets {name}"):
            built(manifest, FakeTI())


def test_path_parts_keep_to_safe_characters() -> None:
    ti = FakeTI(dag_id="d", run_id="..", task_id="a b/c")
    assert checkpoints.subdirectory(ident.task_identity(ti)) == "d/_../a_b_c"
