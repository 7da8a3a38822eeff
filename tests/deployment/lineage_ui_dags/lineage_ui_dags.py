"""DAGs of ``test_lineage_and_ui.py``: what a person and a lineage backend see of a training, in a real
deployment. Replicas run as local processes; the host directories they mount are under ``DATA``.

``lin_train`` trains with ``@task.t9k_pytorch`` (two workers, progress reports, a TensorBoard, a checkpoint
volume, a data set read-only and a model directory written, the model as the task's outlet) and then waits
at the gate its run's conf names, so the browser sees it running; ``lin_fail`` is a training whose worker 0
reports a step and fails.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pendulum
from airflow.providers.common.compat.assets import Asset
from airflow.providers.common.compat.sdk import DAG, task

from t9k_provider.operators import GenericJobOperator, PyTorchTrainingJobOperator

PY = sys.executable
START = pendulum.datetime(2026, 1, 1, tz="UTC")
#: Host directories of the data set and the model: the test sets this in every component's environment.
DATA = os.environ.get("T9K_LINEAGE_UI_DATA", "/nonexistent")
CHECKPOINTS = {"persistentVolumeClaim": {"claimName": "t9k-checkpoints"}}
MODEL = Asset(f"file://{DATA}/models/model.pt")
TRAIN_STEPS = 12
FAIL_TOTAL = 10


def host_dir(name: str, path: str, read_only: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """A volume of the host directory ``DATA/path`` and its mount at ``/<name>``."""
    volume = {"name": name, "hostPath": {"path": f"{DATA}/{path}", "type": "DirectoryOrCreate"}}
    return volume, {"name": name, "mountPath": f"/{name}", "readOnly": read_only}


DATASET, DATASET_MOUNT = host_dir("dataset", "dataset", read_only=True)
MODELS, MODELS_MOUNT = host_dir("models", "models", read_only=False)

with DAG(dag_id="lin_train", schedule=None, start_date=START, default_args={"retries": 0}):
    prepare = GenericJobOperator(
        task_id="prepare",
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "GenericJob",
            "spec": {
                "successRules": [{"worker": [0]}],
                "failureRules": [{"worker": [0]}],
                "replicaSpecs": [
                    {
                        "type": "worker",
                        "replicas": 1,
                        "restartPolicy": {"policy": "Never"},
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "python:3.11",
                                        "command": [PY, "-c", "print('data ready')"],
                                    }
                                ]
                            }
                        },
                    }
                ],
            },
        },
        poll_interval=1,
    )

    @task.t9k_pytorch(
        workers=2,
        tensorboard=True,
        checkpoint_volume=CHECKPOINTS,
        volumes=[DATASET, MODELS],
        volume_mounts=[DATASET_MOUNT, MODELS_MOUNT],
        outlets=[MODEL],
        log_replicas="worker",
        deferrable=True,
        wait_before_defer=0,
        poll_interval=2,
        # the job ends with worker 0; keep worker 1's pod, which may still be finishing, for the usage
        run_policy={"cleanUpPolicy": "None"},
    )
    def train(gate: str, steps: int) -> float:
        """Reports every step (the loss goes to TensorBoard too), waits at ``gate``, writes the model."""
        import os
        import time
        from pathlib import Path

        from t9k_provider.progress import report

        rank = int(os.environ["RANK"])
        loss = 1.0
        for step in range(1, steps + 1):
            loss = round(1.0 / step, 4)
            print(f"epoch {step}/{steps} loss={loss} rank={rank}", flush=True)
            report(step, total=steps, loss=loss)
            time.sleep(0.5)
        until = time.time() + 300  # a gate never opened lets it go: a failed test leaves nothing running
        while not Path(gate).exists() and time.time() < until:
            time.sleep(0.2)
        if rank == 0:
            Path("/models/model.pt").write_text(f"loss={loss}\n")
        return loss

    prepare >> train("{{ dag_run.conf['gate'] }}", TRAIN_STEPS)


#: Worker 1 succeeds and says so in the file its run's conf names; worker 0 then reports step 1 of FAIL_TOTAL
#: and exits 1, and the job fails with it (a PyTorchTrainingJob without a master ends as worker 0 does). Both
#: replicas ran, in that order, whatever the machine's load.
FAILING = f"""
import os, pathlib, sys, time
from t9k_provider.progress import report
done = pathlib.Path("{{{{ dag_run.conf['marker'] }}}}")
if os.environ["RANK"] == "1":
    done.touch()
    sys.exit(0)
until = time.time() + 120
while not done.exists() and time.time() < until:
    time.sleep(0.1)
report(1, total={FAIL_TOTAL}, loss=0.9)
print("rank 0 diverged", flush=True)
sys.exit(1)
"""

with DAG(dag_id="lin_fail", schedule=None, start_date=START, default_args={"retries": 0}):
    PyTorchTrainingJobOperator(
        task_id="train",
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "PyTorchTrainingJob",
            "spec": {
                "runPolicy": {"cleanUpPolicy": "None"},
                "replicaSpecs": [
                    {
                        "type": "worker",
                        "replicas": 2,
                        "restartPolicy": "Never",
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "pytorch",
                                        "image": "python:3.11",
                                        "command": [PY, "-u", "-c", FAILING],
                                        "volumeMounts": [DATASET_MOUNT],
                                    }
                                ],
                                "volumes": [DATASET],
                            }
                        },
                    }
                ],
            },
        },
        poll_interval=1,
    )
