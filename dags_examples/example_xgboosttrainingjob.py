"""example_xgboosttrainingjob: an XGBoostTrainingJob with one master and two workers.

The controller gives every replica ``MASTER_ADDR`` (the master), ``MASTER_PORT``, ``RANK`` (master 0, workers
1..n) and ``WORLD_SIZE``: what a Rabit/``xgboost.collective`` script turns into its tracker settings. The
script proves the wiring with a gloo all-reduce over all three replicas (hence a torch image; use an XGBoost
image and your training script for real work). The master decides the job's outcome, so its log is the one
copied into the task log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.operators import XGBoostTrainingJobOperator

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")


def replica(replica_type: str, replicas: int) -> dict[str, Any]:
    return {
        "type": replica_type,
        "replicas": replicas,
        "restartPolicy": "OnFailure",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "xgboost",
                        "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                        "workingDir": "/workspace",
                        "command": ["python", "framework_env.py", "--framework", "rank"],
                        "ports": [{"name": "xgboostjob-port", "containerPort": 9999}],
                        "volumeMounts": [{"name": "workspace", "mountPath": "/workspace", "readOnly": True}],
                    }
                ],
                "volumes": [{"name": "workspace", "hostPath": {"path": WORKLOADS, "type": "Directory"}}],
            }
        },
    }


with DAG(
    dag_id="example_xgboosttrainingjob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["t9k", "example", "xgboost"],
):
    XGBoostTrainingJobOperator(
        task_id="rabit_env",
        retries=1,
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "XGBoostTrainingJob",
            "spec": {
                "runPolicy": {"backoffLimit": 1, "cleanUpPolicy": "Unfinished"},
                "replicaSpecs": [replica("master", 1), replica("worker", 2)],
            },
        },
    )
