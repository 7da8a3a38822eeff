"""example_tensorflowtrainingjob: a TensorFlowTrainingJob from a Jinja-templated YAML file.

``manifest="manifests/tensorflowtrainingjob.yaml"`` is found through the DAG's ``template_searchpath``
and rendered with the task's context (here: ``params``), so the replica count is a DAG param. Each worker
checks the ``TF_CONFIG`` the controller injected (its own entry must be in the cluster spec). Swap the image
and command for your ``tf.distribute`` script on a real cluster.
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.providers.common.compat.sdk import DAG, Param

from t9k_provider.operators import TensorFlowTrainingJobOperator

HERE = Path(__file__).resolve().parent

with DAG(
    dag_id="example_tensorflowtrainingjob",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    template_searchpath=[str(HERE)],
    params={
        "workers": Param(2, type="integer", minimum=1, maximum=8),
        "workloads": Param(str(HERE / "workloads"), type="string"),
    },
    tags=["t9k", "example", "tensorflow"],
):
    TensorFlowTrainingJobOperator(
        task_id="tf_config",
        retries=1,
        manifest="manifests/tensorflowtrainingjob.yaml",
    )
