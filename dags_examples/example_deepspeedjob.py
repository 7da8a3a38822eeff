"""example_deepspeedjob: a DeepSpeedJob; worker-0 launches the script on both workers with ``deepspeed``.

Every worker runs sshd; worker-0 also runs ``deepspeed --hostfile /t9k/hostfile framework_env.py --framework
rank`` (``config.run.python``), which reaches the other worker over pdsh/SSH and sets ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` for each process. The job follows worker-0, whose log is
the task log. ``slotsPerWorker`` is the processes per worker (normally its GPU count).
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.operators import DeepSpeedJobOperator

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")

with DAG(
    dag_id="example_deepspeedjob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["t9k", "example", "deepspeed"],
):
    DeepSpeedJobOperator(
        task_id="deepspeed_ranks",
        retries=1,
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "DeepSpeedJob",
            "spec": {
                "config": {
                    "slotsPerWorker": 1,
                    # the script reads LOCAL_RANK from its environment instead of a --local_rank argument
                    "localRank": False,
                    "run": {"python": ["/workspace/framework_env.py", "--framework", "rank"]},
                },
                "runPolicy": {"backoffLimit": 1, "cleanUpPolicy": "Unfinished"},
                "worker": {
                    "replicas": 2,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": "deepspeed/deepspeed:v072_torch112_cu117",
                                    "volumeMounts": [
                                        {"name": "workspace", "mountPath": "/workspace", "readOnly": True}
                                    ],
                                }
                            ],
                            "volumes": [
                                {"name": "workspace", "hostPath": {"path": WORKLOADS, "type": "Directory"}}
                            ],
                        }
                    },
                },
            },
        },
    )
