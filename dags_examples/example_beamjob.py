"""example_beamjob: a BeamJob runs Apache Beam's word count on a Flink cluster that the job creates.

The controller creates the FlinkCluster from ``flinkClusterTemplate`` (the flink-operator runs it), then,
once the cluster is Running, a batch/v1 Job from ``jobTemplate`` whose container gets the JobManager's
endpoint as ``FLINK_MASTER`` and ``--flink_master``; ``cleanUpCluster`` deletes the cluster when the pipeline
ends. The submit container first prints the cluster's ``/overview`` (Flink version, TaskManagers) read from
``FLINK_MASTER``, then runs the pipeline. Input and output live on shared volumes.

Runner: ``params.runner`` defaults to ``FlinkRunner``, which is what a real T9k cluster runs. On the local
cluster (``t9k-local``) the FlinkCluster is a real Flink 2.3 (JobManager and TaskManager processes started by
the local flink-operator), but Beam's FlinkRunner cannot execute there: it needs Beam's Flink job-server jar
(``beam-runners-flink-*-job-server``), which is published only on Maven Central, and this environment has no
access to it. Run the example locally with ``{"runner": "DirectRunner"}`` (``airflow dags test example_beamjob
--conf '{"runner": "DirectRunner"}'``): the pipeline then runs inside the submit pod, after the pod has shown
that it reaches the Flink cluster. ``flinkVersion``, the images and the resource limits are what a T9k
cluster uses; the local operator runs its own Flink with small memory defaults whatever they say.
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.providers.common.compat.sdk import DAG, Param

from t9k_provider.operators import BeamJobOperator

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")
DATA = {"name": "data", "persistentVolumeClaim": {"claimName": "beam-data"}}
DATA_MOUNT = {"name": "data", "mountPath": "/data"}
CODE = {"name": "workspace", "hostPath": {"path": WORKLOADS, "type": "Directory"}}
CODE_MOUNT = {"name": "workspace", "mountPath": "/workspace", "readOnly": True}

with DAG(
    dag_id="example_beamjob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["t9k", "example", "beam"],
    params={
        "runner": Param("FlinkRunner", enum=["FlinkRunner", "DirectRunner"], description="Beam runner"),
        "input": Param("/workspace/wordcount_input.txt", type="string", description="text to count"),
        "output": Param("/data/counts", type="string", description="output file prefix"),
    },
):
    BeamJobOperator(
        task_id="wordcount",
        retries=1,
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "BeamJob",
            "spec": {
                "runPolicy": {"cleanUpCluster": True},
                "flinkClusterTemplate": {
                    "spec": {
                        "flinkVersion": "1.10.1",
                        "image": {"name": "t9kpublic/flink:1.10.1"},
                        "jobManager": {
                            "accessScope": "Cluster",
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                        },
                        "taskManager": {
                            "replicas": 1,
                            "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                            "volumes": [DATA],
                            "volumeMounts": [DATA_MOUNT],
                        },
                        "flinkProperties": {"taskmanager.numberOfTaskSlots": "2"},
                    }
                },
                "jobTemplate": {
                    "spec": {
                        "backoffLimit": 0,
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "submit-job",
                                        "image": "t9kpublic/apache_beam_python3.7_sdk:2.22.0",
                                        "workingDir": "/workspace",
                                        "command": ["python", "beam_wordcount.py"],
                                        "args": [
                                            "--input={{ params.input }}",
                                            "--output={{ params.output }}",
                                            "--runner={{ params.runner }}",
                                        ],
                                        "volumeMounts": [DATA_MOUNT, CODE_MOUNT],
                                    }
                                ],
                                "volumes": [DATA, CODE],
                            }
                        },
                    }
                },
            },
        },
    )
