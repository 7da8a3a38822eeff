"""Issue 7.5: DAG parse cost of the example DAGs, with the provider vs the same DAGs on BaseOperator alone.

Each sample is a fresh interpreter that builds a ``DagBag`` of ``dags_examples/`` (what the DAG processor
does to parse them). In the baseline interpreter the provider's operator and sensor modules are replaced,
before any DAG file runs, by stand-ins whose classes are plain ``BaseOperator`` subclasses taking the same
arguments: the same DAGs, without the provider's code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.stats import Figure

SECTION = "5. DAG parse cost"
DAGS = Path(__file__).resolve().parent.parent / "dags_examples"

PROBE = r"""
import inspect, json, sys, time, types

start = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
from airflow.sdk import BaseOperator
ready = time.perf_counter()

if sys.argv[1] == "baseoperator":
    accepted = set(inspect.signature(BaseOperator.__init__).parameters)

    class StandIn(BaseOperator):
        def __init__(self, **kwargs):
            super().__init__(**{k: v for k, v in kwargs.items() if k in accepted})

    for name in ("t9k_provider.operators", "t9k_provider.sensors.job"):
        module = types.ModuleType(name)
        module.__getattr__ = lambda attr: type(attr, (StandIn,), {})
        sys.modules[name] = module

wall, cpu = time.perf_counter(), time.process_time()
bag = DagBag(dag_folder=sys.argv[2])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
operators = sys.modules["t9k_provider.operators"]
print(json.dumps({
    "import_s": ready - start, "wall_s": wall, "cpu_s": cpu, "dags": len(bag.dags),
    "tasks": sum(len(d.task_dict) for d in bag.dags.values()), "errors": len(bag.import_errors),
    "provider": "__file__" in vars(operators),
}))
"""


def probe(mode: str, dags: Path, airflow_home: Path) -> dict:
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(dags)], capture_output=True, text=True, timeout=300, env=env
    )
    if out.returncode != 0:
        raise RuntimeError(f"DAG parse probe ({mode}) failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(runs: int, dags: Path = DAGS) -> list[Figure]:
    with_provider, baseline = [], []
    with tempfile.TemporaryDirectory() as home:
        for mode in ("provider", "baseoperator"):  # warm-up: bytecode cached, as a DAG processor has it
            probe(mode, dags, Path(home))
        for _ in range(runs):  # interleaved, so a change in machine load hits both sides alike
            with_provider.append(probe("provider", dags, Path(home)))
            baseline.append(probe("baseoperator", dags, Path(home)))
    for a, b in zip(with_provider, baseline, strict=True):
        if (a["dags"], a["tasks"]) != (b["dags"], b["tasks"]) or a["dags"] == 0 or a["errors"] or b["errors"]:
            raise RuntimeError(f"the two parses differ, failed or found nothing: {a} vs {b}")
        if not a["provider"] or b["provider"]:
            raise RuntimeError("the provider run did not load the provider's operators, or the baseline did")
    pairs = list(zip(with_provider, baseline, strict=True))
    label = f"{with_provider[0]['dags']} example DAGs ({with_provider[0]['tasks']} tasks)"
    return [
        Figure(SECTION, "import DagBag + airflow.sdk (common to both)", "ms",
               [r["import_s"] * 1000 for r in with_provider + baseline], digits=0),
        Figure(SECTION, f"DagBag parse of {label}, provider operators: wall", "ms",
               [a["wall_s"] * 1000 for a, _ in pairs], digits=0),
        Figure(SECTION, f"DagBag parse of {label}, BaseOperator stand-ins: wall", "ms",
               [b["wall_s"] * 1000 for _, b in pairs], digits=0),
        Figure(SECTION, f"DagBag parse of {label}, provider operators: CPU", "ms",
               [a["cpu_s"] * 1000 for a, _ in pairs], digits=0),
        Figure(SECTION, f"DagBag parse of {label}, BaseOperator stand-ins: CPU", "ms",
               [b["cpu_s"] * 1000 for _, b in pairs], digits=0),
        Figure(SECTION, "provider overhead per parse process (CPU)", "ms",
               [(a["cpu_s"] - b["cpu_s"]) * 1000 for a, b in pairs], digits=0, zero_ok=True),
        Figure(SECTION, "parse CPU, provider / BaseOperator", "x",
               [a["cpu_s"] / b["cpu_s"] for a, b in pairs], digits=2),
    ]  # fmt: skip
