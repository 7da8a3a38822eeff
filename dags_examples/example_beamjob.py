"""example_beamjob: a BeamJob runs Apache Beam's word count on a Flink cluster that the job creates.

The controller creates the FlinkCluster from ``flinkClusterTemplate`` (this needs the flink-operator), then a
batch/v1 Job from ``jobTemplate`` that submits the pipeline; ``cleanUpCluster`` deletes the cluster when the
pipeline ends. Input and output live on a shared volume (a PVC here).
"""

from __future__ import annotations

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.operators import BeamJobOperator

with DAG(
    dag_id="example_beamjob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["t9k", "example", "beam"],
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
                            "replicas": 2,
                            "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                        },
                        "flinkProperties": {"taskmanager.numberOfTaskSlots": "1"},
                    }
                },
                "jobTemplate": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "OnFailure",
                                "containers": [
                                    {
                                        "name": "submit-job",
                                        "image": "t9kpublic/apache_beam_python3.7_sdk:2.22.0",
                                        "command": ["python3", "-m", "apache_beam.examples.wordcount"],
                                        "args": ["--input", "/data/input.txt", "--output", "/data/counts"],
                                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                                    }
                                ],
                                "volumes": [
                                    {"name": "data", "persistentVolumeClaim": {"claimName": "beam-data"}}
                                ],
                            }
                        }
                    }
                },
            },
        },
    )
