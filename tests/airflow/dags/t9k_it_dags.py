"""DAGs for the provider's integration tests (``test_integration.py``); pods run as local processes."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG, AirflowException

from t9k_provider.operators import (
    GenericJobOperator,
    PyTorchTrainingJobOperator,
    T9kJobOperator,
    TensorFlowTrainingJobOperator,
    XGBoostTrainingJobOperator,
)

PY = sys.executable
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def container(name: str, code: str) -> dict[str, Any]:
    return {"name": name, "image": "python:3.11", "command": [PY, "-u", "-c", code]}


def replica(
    kind_type: str, cname: str, code: str, replicas: int = 1, policy: Any = "Never"
) -> dict[str, Any]:
    return {
        "type": kind_type,
        "replicas": replicas,
        "restartPolicy": policy,
        "template": {"spec": {"containers": [container(cname, code)]}},
    }


HELLO = "import os; print('hello-from', os.environ.get('RANK', os.environ.get('HOSTNAME', '?')), flush=True)"

GENERIC = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {"replicaSpecs": [replica("worker", "main", HELLO, replicas=2, policy={"policy": "Never"})]},
}
PYTORCH = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "PyTorchTrainingJob",
    "spec": {"replicaSpecs": [replica("master", "pytorch", HELLO), replica("worker", "pytorch", HELLO)]},
}
TENSORFLOW = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "TensorFlowTrainingJob",
    "spec": {"replicaSpecs": [replica("chief", "tensorflow", HELLO), replica("worker", "tensorflow", HELLO)]},
}
XGBOOST = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "XGBoostTrainingJob",
    "spec": {"replicaSpecs": [replica("master", "xgboost", HELLO), replica("worker", "xgboost", HELLO)]},
}
FAILING = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "replicaSpecs": [
            replica(
                "worker",
                "main",
                "import sys; print('cannot open dataset shard-7: permission denied'); sys.exit(3)",
                policy={"policy": "Never"},
            )
        ]
    },
}
SLOW = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "replicaSpecs": [
            replica(
                "worker",
                "main",
                "import time; print('slow start', flush=True); time.sleep(6); print('slow done')",
                policy={"policy": "Never"},
            )
        ]
    },
}

COMMON: dict[str, Any] = {
    "poll_interval": 1.0,
    "startup_timeout": 180,
    "execution_timeout": timedelta(minutes=4),
}


class LoseWorkerAfterSubmit(GenericJobOperator):
    """Simulates a worker lost right after submitting: the first try ends while its job keeps running."""

    def _wait_here(self, context: Any, ref: Any, limits: Any) -> dict[str, Any]:
        if context["ti"].try_number == 1:
            raise AirflowException("simulated worker loss after submission")
        return super()._wait_here(context, ref, limits)


def single_task_dag(dag_id: str, factory: Any) -> DAG:
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, tags=["t9k-it"]) as dag:
        factory()
    return dag


single_task_dag(
    "it_generic", lambda: GenericJobOperator(task_id="job", manifest=GENERIC, deferrable=False, **COMMON)
)
single_task_dag(
    "it_generic_deferrable",
    lambda: GenericJobOperator(task_id="job", manifest=GENERIC, deferrable=True, **COMMON),
)
single_task_dag(
    "it_pytorch",
    lambda: PyTorchTrainingJobOperator(task_id="job", manifest=PYTORCH, deferrable=True, **COMMON),
)
single_task_dag(
    "it_tensorflow",
    lambda: TensorFlowTrainingJobOperator(task_id="job", manifest=TENSORFLOW, deferrable=False, **COMMON),
)
single_task_dag(
    "it_xgboost",
    lambda: XGBoostTrainingJobOperator(task_id="job", manifest=XGBOOST, deferrable=True, **COMMON),
)
single_task_dag("it_failing", lambda: T9kJobOperator(task_id="job", manifest=FAILING, **COMMON))
single_task_dag(
    "it_failing_deferrable",
    lambda: T9kJobOperator(task_id="job", manifest=FAILING, deferrable=True, **COMMON),
)
single_task_dag(
    "it_adopt",
    lambda: LoseWorkerAfterSubmit(
        task_id="job", manifest=SLOW, retries=1, retry_delay=timedelta(seconds=0), deferrable=False, **COMMON
    ),
)
