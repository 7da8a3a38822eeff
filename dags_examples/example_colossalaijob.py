"""example_colossalaijob: a ColossalAIJob, whose launcher starts the training on every worker over SSH.

Workers must have a container named ``worker``; the controller replaces its command by sshd and starts the
launcher (``<job>-launcher``) once every worker runs. The launcher runs ``colossalai run --hostfile
/etc/colossalai/hostfile --nproc_per_node 1 --master_addr <job>-worker-0 framework_env.py --framework
colossalai``, which logs in to each worker over SSH (fabric), changes to the launcher's working directory,
exports the launcher's environment (so its ``PATH`` finds the same Python) on top of the worker container's
own (its ``env``, Secrets included: each SSH session sources what the worker wrote at start) and starts
torchrun there. Each rank
initialises with ``colossalai.launch_from_torch()`` (gloo on CPU) and the ranks all-reduce. The script lives
on the workers' volume; the launcher only needs the same working directory. The ranks' output reaches the
launcher's log, which is the task log. ``colossalai run`` 0.5 exits 1 when torchrun fails on any worker (the
job then fails); T9k documents that older launchers end 0 whatever the training did, so the log is the record.
On the local cluster, the host is the image: ``make env`` installs ``colossalai`` (CPU) and sshd.
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
        # status and launcher log every 3 s (default 10): a short job reports its end sooner
        poll_interval=3,
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
                    "command": ["framework_env.py", "--framework", "colossalai"],
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
