"""DAG-parse cost: what a DAG file's parse loads of the provider. Importing the operators must not load the
Kubernetes clients or the job models (beyond what Airflow itself loaded); of `t9k_provider.jobs` only the
kind names and the contract's constants are read; nor Airflow's retry policies (the provider's default one is
built in the worker, when first consulted). A DAG of operators, sensors or decorators loads the
modules their constructors need and builds the classes of the kinds it uses: nothing that only runs a task
(status, reattach, log and diagnostics helpers, the call transport, the source analysis).

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

#: Everything of the provider that a DAG of kind operators loads while it is parsed.
OPERATOR_PARSE_MODULES = [
    "t9k_provider.hooks",
    "t9k_provider.hooks.errors",  # the exception types a failure raises (and the retry policy names)
    "t9k_provider.jobs",
    "t9k_provider.jobs.constants",
    "t9k_provider.jobs.contract",  # the annotation `checkpoint_volume` exposes (constants, stdlib only)
    "t9k_provider.links",
    "t9k_provider.links.job",
    "t9k_provider.operators",
    "t9k_provider.operators.checkpoints",
    "t9k_provider.operators.failures",
    "t9k_provider.operators.job",
    "t9k_provider.operators.kill",
    "t9k_provider.operators.kinds",
    "t9k_provider.operators.lineage_hooks",  # the OpenLineage provider's methods (import nothing)
    "t9k_provider.operators.manifest",
    "t9k_provider.operators.options",
    "t9k_provider.version_compat",
]
#: ... and a DAG of `@task.t9k*` tasks: the base operator without the kind operators, so no kind names either.
DECORATOR_PARSE_MODULES = sorted(
    [
        *(m for m in OPERATOR_PARSE_MODULES if m.rpartition(".")[2] not in ("kinds", "constants")),
        "t9k_provider.decorators",
        "t9k_provider.decorators.manifests",
        "t9k_provider.decorators.operator",
        "t9k_provider.decorators.source",
        "t9k_provider.decorators.tasks",
        "t9k_provider.kube",
        "t9k_provider.kube.resources",
    ]
)

PROBE = """
import json, sys, time
start = time.perf_counter()
from airflow.providers.common.compat.sdk import DAG
mid = time.perf_counter()
airflow_loaded = set(sys.modules)  # Airflow 2 loads the kubernetes client itself
{body}
end = time.perf_counter()
built = [
    name
    for module in ("t9k_provider.operators.kinds", "t9k_provider.decorators.operator")
    for name, value in vars(sys.modules.get(module, sys)).items()
    if isinstance(value, type) and getattr(value, "__module__", None) == module
    and (name.endswith("JobOperator") or name.endswith("JobDecoratedOperator"))
]
print(json.dumps({{
    "dag_class_s": mid - start,
    "extra_s": end - mid,
    # the provider's package and metadata are read by Airflow's provider discovery, whatever the DAG uses
    "loaded": sorted(m for m in set(sys.modules) - airflow_loaded
                     if (m.split(".")[0] in ("kubernetes", "kubernetes_asyncio", "t9k_provider", "symtable")
                         or m == "airflow.sdk.definitions.retry_policy")
                     and m not in ("t9k_provider", "t9k_provider.provider_info")),
    "built": sorted(built),
}}))
"""

WITH_OPERATORS = """
from t9k_provider.operators import GenericJobOperator, PyTorchTrainingJobOperator
with DAG("parse_probe", schedule=None):
    GenericJobOperator(task_id="a", manifest={"kind": "GenericJob"})
    PyTorchTrainingJobOperator(task_id="b", manifest="job.yaml")
"""

WITH_SENSOR = """
from t9k_provider.sensors import T9kJobSensor
with DAG("parse_probe", schedule=None):
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
def test_operators_parse_without_kubernetes_clients_models_or_run_time_helpers() -> None:
    with_operators = probe(WITH_OPERATORS)
    assert with_operators["loaded"] == OPERATOR_PARSE_MODULES
    assert with_operators["built"] == ["GenericJobOperator", "PyTorchTrainingJobOperator"]
    without = probe(WITHOUT_PROVIDER)
    print(
        f"\nDAG parse: Airflow's DAG class {with_operators['dag_class_s']:.2f}s; "
        f"DAG with T9k operators +{with_operators['extra_s']:.3f}s; "
        f"DAG with EmptyOperator +{without['extra_s']:.3f}s"
    )


@pytest.mark.timeout(300)
def test_sensor_parses_without_kubernetes_clients_models_or_status_helpers() -> None:
    assert probe(WITH_SENSOR)["loaded"] == [
        "t9k_provider.operators",
        "t9k_provider.operators.options",
        "t9k_provider.sensors",
        "t9k_provider.sensors.job",
    ]


@pytest.mark.timeout(300)
def test_decorated_tasks_parse_without_kubernetes_clients_models_or_the_call_transport() -> None:
    """A decorated task reads no source and encodes nothing until it runs; it loads what the operators load
    and the decorators' own parse-time modules, and builds the one class of the decorator it uses."""
    with_decorators = probe(WITH_DECORATORS)
    assert with_decorators["loaded"] == DECORATOR_PARSE_MODULES
    assert with_decorators["built"] == ["PyTorchTrainingJobDecoratedOperator"]
