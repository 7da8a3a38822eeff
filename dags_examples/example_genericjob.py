"""example_genericjob: build your own distributed job with a GenericJob.

A GenericJob injects nothing, so this DAG wires a two-replica gloo rendezvous by hand with GenericJob variable
substitution: ``$(rank)``, ``$(replicas[worker])``, ``$(service.worker[0].host)`` and
``$(service.port[gloo])`` (the per-replica Services exist because ``spec.service.ports`` is set). The job
succeeds when both workers finish (``successRules``) and fails as soon as either fails (``failureRules``).
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.operators import GenericJobOperator

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")

with DAG(
    dag_id="example_genericjob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["t9k", "example"],
):
    GenericJobOperator(
        task_id="rendezvous",
        retries=1,
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "GenericJob",
            "spec": {
                "service": {"ports": [{"name": "gloo", "port": 29500}]},
                "successRules": [{"worker": [0, 1]}],
                "failureRules": [{"worker": [0]}, {"worker": [1]}],
                "cleanUpPolicy": "Unfinished",
                "replicaSpecs": [
                    {
                        "type": "worker",
                        "replicas": 2,
                        "restartPolicy": {"policy": "Never"},
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "worker",
                                        "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                                        "workingDir": "/workspace",
                                        "command": ["python", "framework_env.py", "--framework", "rank"],
                                        "env": [
                                            {"name": "MASTER_ADDR", "value": "$(service.worker[0].host)"},
                                            {"name": "MASTER_PORT", "value": "$(service.port[gloo])"},
                                            {"name": "RANK", "value": "$(rank)"},
                                            {"name": "WORLD_SIZE", "value": "$(replicas[worker])"},
                                        ],
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
