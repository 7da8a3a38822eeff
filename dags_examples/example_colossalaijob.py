"""example_colossalaijob: a ColossalAIJob, whose launcher starts the training on every worker over SSH.

The launcher runs ``colossalai run --hostfile ... --nproc_per_node 1 framework_env.py --framework rank``,
which starts torchrun on each worker; the script all-reduces the ranks to prove the process group forms.
Workers must have a container named ``worker``; its command is replaced by sshd. The launcher ends 0 even when
training fails, so the job's outcome is read from the launcher's log, which the task log shows.
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.operators import ColossalAIJobOperator

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")
IMAGE = "hpcaitech/colossalai:0.3.0"

with DAG(
    dag_id="example_colossalaijob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["t9k", "example", "colossalai"],
):
    ColossalAIJobOperator(
        task_id="colossalai_ranks",
        retries=1,
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "ColossalAIJob",
            "spec": {
                "ssh": {"authMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
                "launcher": {
                    "image": IMAGE,
                    "workingDir": "/workspace",
                    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
                },
                "worker": {
                    "replicas": 2,
                    "procPerWorker": 1,
                    "command": ["framework_env.py", "--framework", "rank"],
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": IMAGE,
                                    "workingDir": "/workspace",
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
                "runPolicy": {"cleanUpWorkers": True},
            },
        },
    )
