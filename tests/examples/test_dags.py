"""Every example DAG parses, says what it shows, and submits manifests that the job models accept."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import yaml

from t9k_provider.jobs import load

EXAMPLE_DAGS = {
    "t9k_training_pipeline": {
        "prepare_data": "GenericJob",
        "train": "PyTorchTrainingJob",
        "evaluate": "GenericJob",
    },
    "example_genericjob": {"rendezvous": "GenericJob"},
    "example_pytorchtrainingjob": {"allreduce": "PyTorchTrainingJob"},
    "example_tensorflowtrainingjob": {"tf_config": "TensorFlowTrainingJob"},
    "example_xgboosttrainingjob": {"rabit_env": "XGBoostTrainingJob"},
    "example_mpijob": {"mpi_ranks": "MPIJob"},
    "example_colossalaijob": {"colossalai_ranks": "ColossalAIJob"},
    "example_deepspeedjob": {"deepspeed_ranks": "DeepSpeedJob"},
    "example_beamjob": {"wordcount": "BeamJob"},
    # train and evaluate are mapped (their manifests exist once they run): test_taskflow_example_shape
    "example_taskflow_training": {"prepare_data": "GenericJob"},
}
RUN_ID = "scheduled__2026-01-02T00:00:00+00:00"


def render_manifests(dag: Any, **params: Any) -> dict[str, dict[str, Any]]:
    """What each job operator would submit for a run with these params (the operator renders the same way)."""
    from t9k_provider.operators import T9kJobOperator

    context = {"params": {**dag.params.dump(), **params}, "run_id": RUN_ID}
    env = dag.get_template_env()
    rendered = {
        task.task_id: task.render_template(task.manifest, context, env)
        for task in dag.tasks
        if isinstance(task, T9kJobOperator)
    }
    # a manifest file renders to YAML text, which the operator parses
    return {task_id: yaml.safe_load(m) if isinstance(m, str) else m for task_id, m in rendered.items()}


def test_every_example_dag_parses(dagbag: Any) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == set(EXAMPLE_DAGS)


@pytest.mark.parametrize("dag_id", sorted(EXAMPLE_DAGS))
def test_dag_documents_itself_and_retries(dagbag: Any, dag_id: str) -> None:
    dag = dagbag.dags[dag_id]
    assert dag.doc_md and dag.doc_md.startswith(f"{dag_id}: ")
    for task in dag.tasks:
        assert task.retries >= 1, task.task_id


@pytest.mark.parametrize("dag_id", sorted(EXAMPLE_DAGS))
def test_manifests_render_to_valid_jobs_of_the_operator_kind(dagbag: Any, dag_id: str) -> None:
    dag = dagbag.dags[dag_id]
    rendered = render_manifests(dag)
    assert {task_id: load(manifest).KIND for task_id, manifest in rendered.items()} == EXAMPLE_DAGS[dag_id]
    for task_id, manifest in rendered.items():
        assert dag.get_task(task_id).job_kind == manifest["kind"]
        assert "{{" not in str(manifest) and "{%" not in str(manifest), task_id


def test_pipeline_shape(dagbag: Any) -> None:
    from t9k_provider.sensors.job import T9kJobSensor
    from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS

    dag = dagbag.dags["t9k_training_pipeline"]
    schedule = dag.schedule if AIRFLOW_V_3_0_PLUS else dag.schedule_interval  # Airflow 2's name for it
    assert schedule == "@daily" and dag.catchup is False
    assert {t: sorted(dag.get_task(t).downstream_task_ids) for t in dag.task_ids} == {
        "prepare_data": ["train"],
        "train": ["evaluate"],
        "evaluate": ["report", "wait_for_evaluation"],
        "wait_for_evaluation": ["report"],
        "report": [],
    }
    sensor = dag.get_task("wait_for_evaluation")
    assert isinstance(sensor, T9kJobSensor) and sensor.kind == "GenericJob"
    assert dag.get_task("evaluate").wait_for_completion is False
    train = dag.get_task("train")
    assert train.get_logs and train.execution_timeout == timedelta(minutes=30)


def test_pipeline_jobs_share_one_directory_per_run(dagbag: Any) -> None:
    rendered = render_manifests(dagbag.dags["t9k_training_pipeline"], data_root="/srv/t9k")
    run_dir = "/data/runs/scheduled__2026-01-02T00_00_00_00_00"
    prepare = rendered["prepare_data"]["spec"]["replicaSpecs"][0]["template"]["spec"]
    train = rendered["train"]["spec"]["replicaSpecs"][0]
    evaluate = rendered["evaluate"]["spec"]["replicaSpecs"][0]["template"]["spec"]
    assert prepare["containers"][0]["command"] == ["python", "prepare_data.py", "--out", f"{run_dir}/dataset"]
    assert train["replicas"] == 2
    command = " ".join(train["template"]["spec"]["containers"][0]["command"])
    assert command == f"python train_ddp.py --data {run_dir}/dataset --out {run_dir}/model --epochs 8"
    assert evaluate["containers"][0]["command"][-2:] == ["--out", f"{run_dir}/eval"]
    for pod in (prepare, train["template"]["spec"], evaluate):
        data = next(v for v in pod["volumes"] if v["name"] == "data")
        assert data["hostPath"] == {"path": "/srv/t9k", "type": "DirectoryOrCreate"}


def test_pipeline_tensorboard_reads_the_training_checkpoint_directory(dagbag: Any) -> None:
    """The training's TensorBoard reads ``tensorboard/`` of the directory ``checkpoint_volume`` gives the
    train task instance, where the replicas write (``T9K_TENSORBOARD_DIR``), as ``tensorboard=True`` does."""
    from t9k_provider.jobclient import identity as ident
    from t9k_provider.operators import checkpoints

    dag = dagbag.dags["t9k_training_pipeline"]
    train = render_manifests(dag)["train"]
    instance = {ident.DAG_ID: dag.dag_id, ident.RUN_ID: RUN_ID, ident.TASK_ID: "train", ident.MAP_INDEX: "-1"}
    claim = dag.get_task("train").checkpoint_volume["persistentVolumeClaim"]["claimName"]
    fileset = f"t9k://pvc/{claim}/{checkpoints.subdirectory(instance)}/tensorboard"
    assert train["spec"]["tensorboardSpec"] == {"trainingLogFilesets": [fileset]}
    env = train["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "T9K_TENSORBOARD_DIR", "value": f"{checkpoints.MOUNT_PATH}/tensorboard"} in env


@pytest.mark.parametrize("queue", [None, "training"])
def test_pipeline_training_waits_whole_in_the_queue_param(dagbag: Any, queue: str | None) -> None:
    params = {} if queue is None else {"queue": queue}
    train = render_manifests(dagbag.dags["t9k_training_pipeline"], **params)["train"]
    wanted = {"queue": queue or "default", "priority": 50}
    assert train["spec"]["scheduler"] == {"t9kScheduler": wanted}


@pytest.mark.parametrize(("fail", "value"), [(False, "0"), (True, "1")])
def test_fail_training_param_reaches_the_training_script(dagbag: Any, fail: bool, value: str) -> None:
    rendered = render_manifests(dagbag.dags["t9k_training_pipeline"], fail_training=fail)
    env = rendered["train"]["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "T9K_DEMO_FAIL", "value": value} in env


def test_tensorflow_manifest_file_takes_the_worker_count_param(dagbag: Any) -> None:
    rendered = render_manifests(dagbag.dags["example_tensorflowtrainingjob"], workers=3)
    assert rendered["tf_config"]["spec"]["replicaSpecs"][0]["replicas"] == 3


def test_taskflow_example_shape(dagbag: Any) -> None:
    """Decorated functions become the kinds' operators; the sweep is mapped over the learning rates."""
    dag = dagbag.dags["example_taskflow_training"]
    assert {t: sorted(dag.get_task(t).downstream_task_ids) for t in dag.task_ids} == {
        "prepare_data": ["evaluate", "train"],
        "train": ["evaluate"],
        "evaluate": ["pick_best"],
        "pick_best": [],
    }
    kinds = {t: getattr(dag.get_task(t).operator_class, "job_kind", None) for t in ("train", "evaluate")}
    assert kinds == {"train": "PyTorchTrainingJob", "evaluate": "GenericJob"}
    assert dag.get_task("train").partial_kwargs["workers"] == 2
    assert dag.get_task("prepare_data").custom_operator_name == "@task.t9k"


@pytest.mark.parametrize(("gpus", "workers", "each"), [("0", 2, None), ("1", 1, "1"), ("4", 2, "1")])
def test_the_pipeline_trains_on_the_gpus_the_node_offers(
    monkeypatch: pytest.MonkeyPatch, gpus: str, workers: int, each: str | None
) -> None:
    """``make demo`` passes the node's GPUs (T9K_DEMO_GPUS): a GPU per worker when there are two or more, one
    worker on the only GPU, two CPU workers without."""
    import importlib.util
    from pathlib import Path

    monkeypatch.setenv("T9K_DEMO_GPUS", gpus)
    path = Path(__file__).resolve().parents[2] / "dags_examples" / "t9k_training_pipeline.py"
    spec = importlib.util.spec_from_file_location(f"pipeline_with_{gpus}_gpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (replica,) = module.TRAINING_JOB["spec"]["replicaSpecs"]
    resources = replica["template"]["spec"]["containers"][0]["resources"]
    assert replica["replicas"] == workers
    assert resources["limits"].get("nvidia.com/gpu") == each == resources["requests"].get("nvidia.com/gpu")
    load({**module.TRAINING_JOB, "metadata": {"name": "train"}})
