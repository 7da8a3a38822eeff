"""DAG-parse cost: importing the operators must not load the Kubernetes clients or the job models (beyond what
Airflow itself loaded); of `t9k_provider.jobs` only the standard-library modules of names are read.

Each check runs in a fresh interpreter so modules imported by other tests cannot hide a regression.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS

#: Airflow 3 moved the core operators to the standard provider.
EMPTY_OPERATOR = (
    "airflow.providers.standard.operators.empty" if AIRFLOW_V_3_0_PLUS else "airflow.operators.empty"
)

#: What the operators import from `t9k_provider.jobs`: the kinds and the contract, no pydantic model.
JOBS_NAMES_MODULES = ["t9k_provider.jobs", "t9k_provider.jobs.constants", "t9k_provider.jobs.contract"]

PROBE = """
import json, sys, time
start = time.perf_counter()
from airflow.providers.common.compat.sdk import DAG
mid = time.perf_counter()
airflow_loaded = set(sys.modules)  # Airflow 2 loads the kubernetes client itself
{body}
end = time.perf_counter()
print(json.dumps({{
    "dag_class_s": mid - start,
    "extra_s": end - mid,
    "loaded": sorted(m for m in set(sys.modules) - airflow_loaded
                     if m.split(".")[0] in ("kubernetes", "kubernetes_asyncio")
                     or m.startswith("t9k_provider.jobs")
                     or m.startswith("t9k_provider.hooks.t9k")
                     or m.startswith("t9k_provider.hooks.async_t9k")
                     or m.startswith("t9k_provider.decorators.transport")),
}}))
"""

WITH_PROVIDER = """
from t9k_provider.operators import GenericJobOperator, PyTorchTrainingJobOperator
from t9k_provider.sensors import T9kJobSensor
with DAG("parse_probe", schedule=None):
    GenericJobOperator(task_id="a", manifest={"kind": "GenericJob"})
    PyTorchTrainingJobOperator(task_id="b", manifest="job.yaml")
    T9kJobSensor(task_id="c", kind="GenericJob", name="x")
"""

WITH_DECORATORS = """
from airflow.providers.common.compat.sdk import task
with DAG("parse_probe", schedule=None):
    @task.t9k_pytorch(workers=2)
    def train(lr: float) -> float:
        return lr
    train(0.1)
    train.expand(lr=[0.2, 0.3])
"""

WITHOUT_PROVIDER = f"""
from {EMPTY_OPERATOR} import EmptyOperator
with DAG("parse_probe", schedule=None):
    EmptyOperator(task_id="a")
"""


def probe(body: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=body)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(300)
def test_operators_import_without_kubernetes_clients_or_models() -> None:
    with_provider = probe(WITH_PROVIDER)
    assert with_provider["loaded"] == JOBS_NAMES_MODULES
    without = probe(WITHOUT_PROVIDER)
    print(
        f"\nDAG parse: Airflow's DAG class {with_provider['dag_class_s']:.2f}s; "
        f"DAG with T9k operators +{with_provider['extra_s']:.3f}s; "
        f"DAG with EmptyOperator +{without['extra_s']:.3f}s"
    )


@pytest.mark.timeout(300)
def test_decorated_tasks_parse_without_kubernetes_clients_models_or_the_call_transport() -> None:
    """A decorated task reads no source and encodes nothing until it runs; of the jobs package it loads only
    what the operators it builds on load."""
    assert probe(WITH_DECORATORS)["loaded"] == JOBS_NAMES_MODULES
