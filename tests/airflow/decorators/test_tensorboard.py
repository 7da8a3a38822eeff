"""``tensorboard=True`` of ``@task.t9k_pytorch`` / ``@task.t9k_tensorflow`` without a cluster: the job's
TensorBoard over the task's log directory, on the checkpoint volume or a scratch directory of the try, what
the task log says about it, the "TensorBoard" link, and bad input. The cluster run is in
``test_tensorboard_on_cluster.py``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import DAG, AirflowFailException, task

from t9k_provider.decorators import manifests, tensorboard
from t9k_provider.decorators.operator import T9kDecoratedOperator
from t9k_provider.jobclient import identity as ident
from t9k_provider.jobclient.identity import JobRef
from t9k_provider.jobs import load
from t9k_provider.operators import checkpoints
from tests.airflow.fakes import FakeHook, FakeTI

pytestmark = pytest.mark.timeout(60)


def train(epochs: int) -> int:
    return epochs


@pytest.fixture
def dag() -> Iterator[DAG]:
    with DAG("tensorboard_unit", schedule=None) as dag:
        yield dag


def build(dag: DAG, decorator: str = "t9k_pytorch", **options: Any) -> T9kDecoratedOperator:
    return getattr(task, decorator)(workers=2, tensorboard=True, **options)(train)(3).operator


def built(op: T9kDecoratedOperator, try_number: int = 1) -> dict[str, Any]:
    """The manifest a try submits; validated by the job models as the operator would."""
    body = op.build_manifest(ident.task_identity(FakeTI(task_id=op.task_id)), try_number)
    load(manifests.with_call(body, "r", "c"))
    return body


def containers(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for pod in checkpoints.pod_specs(body["spec"]) for c in pod["containers"]]


def task_log(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> str:
    """What the operator logged: Airflow 2 through logging (and to stdout too), Airflow 3 to stdout."""
    out = capsys.readouterr().out
    return caplog.text or out


def instance(op: T9kDecoratedOperator) -> str:
    return checkpoints.subdirectory(ident.task_identity(FakeTI(task_id=op.task_id)))


@pytest.mark.parametrize("decorator", ["t9k_pytorch", "t9k_tensorflow"])
def test_on_a_claim_checkpoint_volume_the_curves_go_on_across_tries(
    dag: DAG, decorator: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    op = build(dag, decorator, checkpoint_volume={"persistentVolumeClaim": {"claimName": "ckpt"}})
    caplog.set_level(logging.INFO)
    first, second = built(op, 1), built(op, 2)
    fileset = f"t9k://pvc/ckpt/{instance(op)}/tensorboard"
    for body in (first, second):  # the same directory on every try
        assert body["spec"]["tensorboardSpec"] == {"trainingLogFilesets": [fileset]}
        for container in containers(body):
            assert {"name": "T9K_TENSORBOARD_DIR", "value": "/t9k/checkpoints/tensorboard"} in container[
                "env"
            ]
            assert "/t9k/tensorboard" not in [m["mountPath"] for m in container["volumeMounts"]]
    said = task_log(caplog, capsys)
    assert said.count(f"({fileset}), on the checkpoint volume: the curves go on across retries") == 2
    assert op.has_tensorboard()


@pytest.mark.parametrize(
    ("volume", "why"),
    [
        (None, "no checkpoint_volume"),
        ({"hostPath": {"path": "/tmp/ckpt"}}, "a checkpoint_volume that is no claim"),
    ],
)
def test_otherwise_a_scratch_directory_of_the_try_and_the_log_says_so(
    dag: DAG,
    volume: dict[str, Any] | None,
    why: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    op = build(dag, checkpoint_volume=volume)
    caplog.set_level(logging.INFO)
    for try_number in (1, 2):
        body = built(op, try_number)
        path = f"{instance(op)}/try-{try_number}"
        assert body["spec"]["tensorboardSpec"] == {
            "trainingLogFilesets": [f"t9k://pvc/t9k-tensorboard/{path}"]
        }
        for pod in checkpoints.pod_specs(body["spec"]):
            scratch = {"name": "t9k-tensorboard", "persistentVolumeClaim": {"claimName": "t9k-tensorboard"}}
            assert scratch in pod["volumes"]
        for container in containers(body):
            assert {"name": "T9K_TENSORBOARD_DIR", "value": "/t9k/tensorboard"} in container["env"]
            mount = {"name": "t9k-tensorboard", "mountPath": "/t9k/tensorboard", "subPath": path}
            assert mount in container["volumeMounts"]
    said = [line for line in task_log(caplog, capsys).splitlines() if "tensorboard=True" in line]
    assert len(said) == 2 and all(f"tensorboard=True with {why}" in line for line in said), said
    assert all("the curves will not survive a retry" in line and "warning" in line.lower() for line in said)


def test_without_the_option_nothing_changes(dag: DAG) -> None:
    op = task.t9k_pytorch(workers=2)(train)(3).operator
    body = op.build_manifest(ident.task_identity(FakeTI(task_id=op.task_id)), 1)
    assert "tensorboardSpec" not in body["spec"] and not op.has_tensorboard()
    assert all("T9K_TENSORBOARD_DIR" not in str(c.get("env")) for c in containers(body))


def test_the_task_links_its_tensorboard(dag: DAG) -> None:
    op = build(dag, tensorboard_url_template="https://tb.example/{namespace}/{name}")
    op.__dict__["hook"] = FakeHook()
    assert op.tensorboard_url is None  # no job yet
    op._job = JobRef("PyTorchTrainingJob", "pytorchtrainingjobs", "train-abc", "ns", "u1")
    assert op.tensorboard_url == "https://tb.example/ns/train-abc"


@pytest.mark.parametrize(
    ("decorator", "options", "error", "message"),
    [
        ("t9k", {"tensorboard": True}, TypeError, "a GenericJob has no TensorBoard"),
        ("t9k_xgboost", {"tensorboard": True}, TypeError, "@task.t9k_xgboost has no tensorboard"),
        ("t9k_deepspeed", {"tensorboard": True}, TypeError, "a DeepSpeedJob has no TensorBoard"),
        ("t9k_pytorch", {"tensorboard": "yes"}, TypeError, "tensorboard must be True or False, got 'yes'"),
    ],
)
def test_bad_options_fail_when_the_decorator_is_applied(
    decorator: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        getattr(task, decorator)(**options)
    getattr(task, decorator)(tensorboard=False)  # off is fine for every kind


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"manifest_override": {"spec": {"tensorboardSpec": {"trainingLogFilesets": ["t9k://pvc/a/b"]}}}},
            "the manifest has a spec.tensorboardSpec already",
        ),
        ({"env": {"T9K_TENSORBOARD_DIR": "/logs"}}, "container 'pytorch' sets T9K_TENSORBOARD_DIR itself"),
        (
            {"volumes": [{"name": "t9k-tensorboard", "emptyDir": {}}]},
            "the manifest has a volume named 't9k-tensorboard' already",
        ),
    ],
)
def test_a_manifest_that_sets_them_itself_fails_before_submitting(
    dag: DAG, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(AirflowFailException, match=message):
        built(build(dag, **options))


def test_the_dry_run_builds_it_too(dag: DAG, capsys: pytest.CaptureFixture[str]) -> None:
    build(dag).dry_run()
    assert "t9k://pvc/t9k-tensorboard/tensorboard_unit/dry-run/train/try-1" in capsys.readouterr().out


def test_log_dir_is_plain_data() -> None:
    identity = ident.task_identity(FakeTI())
    where = tensorboard.log_dir({"persistentVolumeClaim": {"claimName": "c"}}, identity, 3)
    assert (where.directory, where.scratch) == ("/t9k/checkpoints/tensorboard", None)
