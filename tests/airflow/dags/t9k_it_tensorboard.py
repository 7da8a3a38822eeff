"""DAGs for training tasks' TensorBoards (``test_tensorboard_on_cluster.py``): ``tensorboard=True`` on a
scratch directory (deferred, so the link comes from the operator that resumed) and on a claim checkpoint
volume across a retry, and operator jobs whose ``tensorboardSpec`` names a missing claim or an unsupported
file set."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG, task

from t9k_provider.operators import PyTorchTrainingJobOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")
STEPS = 4
CRASH_AFTER = 2
CHECKPOINT_CLAIM = "tb-it-checkpoints"
MISSING_CLAIM = "tb-it-no-such-claim"
BAD_FILESETS = {"missing_claim": f"t9k://pvc/{MISSING_CLAIM}/logs", "unsupported": "s3://tb-it-bucket/logs"}

with DAG("it_tb_scratch", schedule=None, start_date=START, catchup=False):

    @task.t9k_pytorch(workers=1, tensorboard=True, poll_interval=1, deferrable=True, wait_before_defer=0)
    def train(steps: int) -> int:
        """Report a falling loss every step: report() writes it to T9K_TENSORBOARD_DIR too."""
        from t9k_provider.progress import report

        for step in range(1, steps + 1):
            report(step, total=steps, loss=round(1.0 / step, 4))
        return steps

    train(STEPS)

CHECKPOINTS = {"persistentVolumeClaim": {"claimName": CHECKPOINT_CLAIM}}

with DAG("it_tb_resume", schedule=None, start_date=START, catchup=False):

    @task.t9k_pytorch(
        workers=1, tensorboard=True, poll_interval=1, retries=1, retry_delay=timedelta(seconds=1),
        retry_on_job_failure=True, checkpoint_volume=CHECKPOINTS,
    )  # fmt: skip
    def train(steps: int, crash_after: int) -> int:
        """Try 1 reports steps 1..crash_after and crashes; try 2 goes on from there, as a resumed training."""
        import os

        from t9k_provider.progress import report

        first = os.environ["T9K_TRY_NUMBER"] == "1"
        for step in range(1 if first else crash_after + 1, steps + 1):
            report(step, total=steps, loss=round(1.0 / step, 4))
            if first and step == crash_after:
                raise RuntimeError(f"simulated crash after step {step}")
        return int(os.environ["T9K_TRY_NUMBER"])

    train(STEPS, CRASH_AFTER)


def training(fileset: str) -> dict[str, Any]:
    """A one-worker PyTorchTrainingJob that succeeds at once, with a TensorBoard over ``fileset``."""
    container = {
        "name": "pytorch",
        "image": "python:3.11",
        "command": [sys.executable, "-c", "print('done')"],
    }
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "spec": {
            "tensorboardSpec": {"trainingLogFilesets": [fileset]},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
            ],
        },
    }


with DAG("it_tb_bad_filesets", schedule=None, start_date=START, catchup=False):
    for task_id, fileset in BAD_FILESETS.items():
        PyTorchTrainingJobOperator(
            task_id=task_id, manifest=training(fileset), poll_interval=1, deferrable=False, retries=0
        )
