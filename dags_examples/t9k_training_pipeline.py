"""t9k_training_pipeline: prepare data, train with 2-worker DDP, evaluate, and hand the result on via XCom.

What it shows:

* ``prepare_data``: a GenericJob writes a deterministic synthetic data set to the shared volume.
* ``train``: a PyTorchTrainingJob with two workers trains a small MLP with torch.distributed (gloo, CPU).
  The controller injects ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE``; rank 0 writes
  ``model.pt`` and ``metrics.json``. The workers' logs (one ``epoch i/n loss=...`` line per epoch) stream
  into the task log. Rank 0 reports every step (``t9k_provider.progress.report``): the task log shows a
  ``progress: step i/n, rate, ETA, loss`` line every few seconds, the task pushes XCom ``t9k_progress``,
  and a job without a report for ``progress_timeout`` is stopped and the task retried. Every epoch rank 0
  checkpoints to ``T9K_CHECKPOINT_DIR`` (``checkpoint_volume``), and a retry resumes from there
  (docs/airflow.md#watching-and-resuming-training-runs). The job has a TensorBoard (``tensorboardSpec``)
  over ``tensorboard/`` of that checkpoint directory, where rank 0 writes each epoch's loss and ``report()``
  each step's: the task's "TensorBoard" link opens it, and its curves go on across retries.
* The training waits in a T9k Queue (the param ``queue``; ``default`` is open and without quota on the local
  cluster): while another training holds the Queue's quota, the task log says its place in line, the jobs
  ahead with their ETAs and when it is expected to start (docs/airflow.md#waiting-in-a-queue).
* ``evaluate`` submits a GenericJob without waiting (``wait_for_completion=False``) and
  ``wait_for_evaluation``, a ``T9kJobSensor`` in reschedule mode, waits for it without holding a worker slot.
* ``report`` reads the evaluation job's ``EVAL {...}`` line through the hook and returns the metrics (XCom).

Every job mounts the shared data directory (``params.data_root``, a hostPath by default; use a
``persistentVolumeClaim`` on a multi-node cluster) at ``/data`` and the workload scripts at ``/workspace``.
Job failures are not retried by Airflow (the operator fails the task with the replica's reason and last log
lines); ``retries`` cover API trouble, a lost worker (the retry adopts the running job) and a stalled
training (``progress_timeout``: the retry's new job resumes from the last checkpoint). Set the param
``fail_training`` (or ``T9K_DEMO_FAIL=1`` in the environment that parses this file) to make the training
script exit 1 and see a failure end to end.
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG, Param, task

from t9k_provider.operators import GenericJobOperator, PyTorchTrainingJobOperator
from t9k_provider.sensors import T9kJobSensor

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")
#: Any image with python, torch and numpy. train_ddp.py reports with t9k_provider.progress where the image has
#: the package (the local cluster's replicas run the provider's interpreter) and prints the same progress line
#: itself where it does not.
IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
RUN_DIR = "/data/runs/{{ run_id | pathsafe }}"
NAMESPACE = "default"
#: The training's checkpoints (``checkpoint_volume``): mounted in every replica at ``T9K_CHECKPOINT_DIR``,
#: a sub-directory per task instance that every try finds again. On the local cluster a claim is a directory
#: of the cluster's state (``<state dir>/volumes/default/t9k-checkpoints``; no PersistentVolumeClaim object
#: needed); on a real cluster create a ``ReadWriteMany`` PVC named ``t9k-checkpoints`` in the namespace (both
#: workers mount it, across nodes).
CHECKPOINT_CLAIM = "t9k-checkpoints"
CHECKPOINTS = {"persistentVolumeClaim": {"claimName": CHECKPOINT_CLAIM}}
#: The training's TensorBoard logs: ``tensorboard/`` of its checkpoint directory, which is
#: ``<dag>/<run>/<task>`` on the claim (docs/airflow.md#checkpoints-across-retries), as ``tensorboard=True``
#: puts a decorated task's. ``T9K_TENSORBOARD_DIR`` is where the replicas see it (``report()`` writes there).
TENSORBOARD_DIR = "/t9k/checkpoints/tensorboard"
TENSORBOARD_FILESET = (
    f"t9k://pvc/{CHECKPOINT_CLAIM}/t9k_training_pipeline/{{{{ run_id | pathsafe }}}}/train/tensorboard"
)


def pathsafe(value: str) -> str:
    """Run ids contain ``:`` and ``+``; keep directory names portable."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", value)


def volumes() -> list[dict[str, Any]]:
    return [
        {"name": "data", "hostPath": {"path": "{{ params.data_root }}", "type": "DirectoryOrCreate"}},
        {"name": "workspace", "hostPath": {"path": WORKLOADS, "type": "Directory"}},
    ]


def container(name: str, args: list[str], env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "workingDir": "/workspace",
        "command": ["python", *args],
        "env": env or [],
        "resources": {
            "requests": {"cpu": "500m", "memory": "512Mi"},
            "limits": {"cpu": "1", "memory": "2Gi"},
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "workspace", "mountPath": "/workspace", "readOnly": True},
        ],
    }


def single_replica_job(name: str, args: list[str]) -> dict[str, Any]:
    """A one-replica GenericJob that succeeds or fails with its only replica."""
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"labels": {"app.kubernetes.io/part-of": "t9k-training-pipeline"}},
        "spec": {
            "successRules": [{"worker": [0]}],
            "failureRules": [{"worker": [0]}],
            "cleanUpPolicy": "Unfinished",
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 1,
                    "restartPolicy": {"policy": "OnFailure", "limit": 2},
                    "template": {"spec": {"containers": [container(name, args)], "volumes": volumes()}},
                }
            ],
        },
    }


#: GPUs the cluster offers the training (``make demo`` sets it from the node): with two or more, each of the
#: two workers gets one and trains with NCCL; with one, a single worker does; with none, two workers train on
#: the CPU with gloo. The training script picks its device from what its replica sees.
GPUS = int(os.environ.get("T9K_DEMO_GPUS", "0") or 0)
TRAIN_WORKERS = 1 if GPUS == 1 else 2


def training_container() -> dict[str, Any]:
    main = container(
        "pytorch", TRAIN_ARGS, [FAIL_SWITCH, {"name": "T9K_TENSORBOARD_DIR", "value": TENSORBOARD_DIR}]
    )
    if GPUS:
        for key in ("requests", "limits"):
            main["resources"][key]["nvidia.com/gpu"] = "1"
    return main


TRAIN_ARGS = [
    "train_ddp.py",
    "--data",
    f"{RUN_DIR}/dataset",
    "--out",
    f"{RUN_DIR}/model",
    "--epochs",
    "{{ params.epochs }}",
]
FAIL_SWITCH = {"name": "T9K_DEMO_FAIL", "value": "{{ '1' if params.fail_training else '0' }}"}
TRAINING_JOB: dict[str, Any] = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "PyTorchTrainingJob",
    "metadata": {"labels": {"app.kubernetes.io/part-of": "t9k-training-pipeline"}},
    "spec": {
        # Both workers start together or not at all (a gang), when the T9k Queue admits the whole job.
        "scheduler": {"t9kScheduler": {"queue": "{{ params.queue }}", "priority": 50}},
        # A restarted DDP rank cannot rejoin its peers' collective: let the job fail as a whole instead.
        "runPolicy": {"backoffLimit": 0, "activeDeadlineSeconds": 1800, "cleanUpPolicy": "Unfinished"},
        "tensorboardSpec": {"trainingLogFilesets": [TENSORBOARD_FILESET]},
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": TRAIN_WORKERS,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [training_container()],
                        "volumes": volumes(),
                    }
                },
            }
        ],
    },
}


with DAG(
    dag_id="t9k_training_pipeline",
    description="GenericJob data prep -> 2-worker PyTorch DDP training -> evaluation -> metrics in XCom",
    doc_md=__doc__,
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    # The jobs take seconds to minutes: check their status every 3 s rather than the operators' default 10 s.
    default_args={"retries": 2, "retry_delay": timedelta(seconds=20), "poll_interval": 3},
    user_defined_filters={"pathsafe": pathsafe},
    params={
        "data_root": Param(
            os.environ.get("T9K_DEMO_DATA_ROOT", "/tmp/t9k-demo-data"),
            type="string",
            description="Host directory mounted at /data in every job (one sub-directory per run).",
        ),
        "epochs": Param(8, type="integer", minimum=1, maximum=1000),
        "queue": Param(
            "default",
            type="string",
            description="The T9k Queue the training waits in (spec.scheduler.t9kScheduler.queue).",
        ),
        "fail_training": Param(
            os.environ.get("T9K_DEMO_FAIL", "").lower() in {"1", "true", "yes"},
            type="boolean",
            description="Make the training script exit 1 after its first epoch.",
        ),
    },
    tags=["t9k", "example", "pytorch"],
) as dag:
    prepare_data = GenericJobOperator(
        task_id="prepare_data",
        namespace=NAMESPACE,
        manifest=single_replica_job("prepare", ["prepare_data.py", "--out", f"{RUN_DIR}/dataset"]),
    )

    train = PyTorchTrainingJobOperator(
        task_id="train",
        namespace=NAMESPACE,
        manifest=TRAINING_JOB,
        get_logs=True,
        log_replicas="worker",  # both ranks, each line prefixed with its pod
        execution_timeout=timedelta(minutes=30),
        checkpoint_volume=CHECKPOINTS,
        # Rank 0 reports every step: 5 minutes without one is a hung rank, not a slow epoch.
        progress_timeout=timedelta(minutes=5),
    )

    evaluate = GenericJobOperator(
        task_id="evaluate",
        namespace=NAMESPACE,
        manifest=single_replica_job(
            "evaluate",
            [
                "evaluate.py",
                "--data",
                f"{RUN_DIR}/dataset",
                "--model",
                f"{RUN_DIR}/model",
                "--out",
                f"{RUN_DIR}/eval",
            ],
        ),
        wait_for_completion=False,
    )

    wait_for_evaluation = T9kJobSensor(
        task_id="wait_for_evaluation",
        kind="GenericJob",
        name="{{ ti.xcom_pull(task_ids='evaluate', key='t9k_job')['name'] }}",
        namespace=NAMESPACE,
        mode="reschedule",
        poke_interval=1,
        timeout=600,
    )

    @task
    def report(job: dict[str, Any]) -> dict[str, Any]:
        """Parse the evaluation job's ``EVAL {...}`` log line: the metrics become this task's XCom."""
        from t9k_provider.hooks.t9k import T9kHook
        from t9k_provider.replicalogs.targets import pod_selector

        hook = T9kHook()
        for pod in hook.list_pods(job["namespace"], pod_selector(job["kind"], job["name"])):
            log = hook.read_pod_log(job["namespace"], pod["metadata"]["name"], "evaluate")
            for line in log.splitlines():
                _, _, text = line.partition(" ")  # drop the timestamp
                if text.startswith("EVAL "):
                    metrics = json.loads(text.removeprefix("EVAL "))
                    print(f"evaluation of job {job['name']}: {metrics}")
                    return {**metrics, "job": job["name"]}
        raise ValueError(f"no EVAL line in the logs of job {job['namespace']}/{job['name']}")

    prepare_data >> train >> evaluate >> wait_for_evaluation
    wait_for_evaluation >> report(evaluate.output)
