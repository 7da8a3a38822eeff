"""example_mpijob: an MPIJob whose launcher runs a program on two workers with mpirun.

The controller gives the workers SSH keys and runs sshd in them, writes the hostfile, and starts the launcher
(``<job>-launcher``) once every worker runs; the launcher's ``mpirun`` then starts ``worker.cmd`` on the
workers. The job succeeds when ``mpirun`` exits 0, so the launcher's log is what the task log shows. Needs an
image with Python, Open MPI and sshd (here the Horovod image of the T9k tutorials; on the local cluster, the
host's, which ``make env`` installs); each process prints its MPI rank. ``-x PATH`` gives the ranks the
launcher's PATH, so they find the same Python as the launcher, whatever the SSH session's default PATH is.
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.operators import MPIJobOperator

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")

with DAG(
    dag_id="example_mpijob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["t9k", "example", "mpi"],
):
    MPIJobOperator(
        task_id="mpi_ranks",
        retries=1,
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "MPIJob",
            "spec": {
                "worker": {
                    "replicas": 2,
                    "processesPerWorker": 1,
                    "extraMPIArgs": ["--allow-run-as-root", "-bind-to", "none", "-x", "PATH"],
                    "cmd": ["python", "/workspace/framework_env.py", "--framework", "mpi"],
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "mpi-worker",
                                    "image": "t9kpublic/horovod:sdk-0.5.2",
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
                "mca": {"btl": "^openib"},
                "ssh": {"sshAuthMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
                "runPolicy": {"cleanUpWorkers": True},
            },
        },
    )
