"""example_pytorchtrainingjob: a two-worker PyTorchTrainingJob, waited for in deferrable mode.

The controller injects ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE`` into every worker; the
script all-reduces the ranks over gloo, which only works if all of them reach the master. With
``deferrable=True`` the task hands the wait to the triggerer and frees its worker slot; ``log_replicas="all"``
copies every worker's log into the task log.
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.operators import PyTorchTrainingJobOperator

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")

with DAG(
    dag_id="example_pytorchtrainingjob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["t9k", "example", "pytorch"],
):
    PyTorchTrainingJobOperator(
        task_id="allreduce",
        retries=1,
        deferrable=True,
        poll_interval=2,
        get_logs=True,
        log_replicas="all",
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "PyTorchTrainingJob",
            "spec": {
                "runPolicy": {"backoffLimit": 1, "cleanUpPolicy": "Unfinished"},
                "replicaSpecs": [
                    {
                        "type": "worker",
                        "replicas": 2,
                        "restartPolicy": "OnFailure",
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "pytorch",
                                        "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                                        "workingDir": "/workspace",
                                        "command": ["python", "framework_env.py", "--framework", "rank"],
                                        "volumeMounts": [
                                            {"name": "workspace", "mountPath": "/workspace", "readOnly": True}
                                        ],
                                    }
                                ],
                                "volumes": [
                                    {
                                        "name": "workspace",
                                        "hostPath": {"path": WORKLOADS, "type": "Directory"},
                                    }
                                ],
                            }
                        },
                    }
                ],
            },
        },
    )
