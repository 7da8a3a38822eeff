"""Issue 7.5 and issue 17: DAG parse cost with the provider vs the same DAGs without the provider's code.

Each sample is a fresh interpreter that imports what both sides share (``DagBag``, ``airflow.sdk``), freezes
the garbage collector's generations as the DAG processor does before it starts its parsing processes (so a
collection of Airflow's own objects, due or not depending on how many objects a side happened to allocate,
does not land in one side's figure), and builds a ``DagBag`` (what the DAG processor does to parse). In the
baseline interpreter the provider's modules are replaced, before any DAG file runs, by stand-ins: the operator
and sensor classes by plain ``BaseOperator`` subclasses taking the same arguments, the ``@task.t9k*``
decorators by Airflow's plain ``@task`` (the same functions as PythonOperator tasks). Two comparisons:

* every DAG of ``dags_examples/``, provider operators vs ``BaseOperator`` stand-ins;
* the TaskFlow example alone, ``@task.t9k*`` vs plain ``@task`` of the same shape (issue 17: within 10%),
  both for the first parse in a fresh interpreter (which imports the provider) and for parsing the file
  again in that interpreter (the DAG file's own cost).
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
TASKFLOW_EXAMPLE = DAGS / "example_taskflow_training.py"
#: Parses of the TaskFlow example after the first, in the same interpreter; their median is one sample.
REPARSES = 20
#: The TaskFlow comparison takes this many pairs per run: its samples are a few milliseconds each.
FLOW_PAIRS_PER_RUN = 3

PROBE = r"""
import gc, inspect, json, logging, statistics, sys, time, types

start = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
from airflow.sdk import BaseOperator, task
ready = time.perf_counter()
gc.freeze()  # as the DAG processor does before it starts its parsing processes

if sys.argv[1] == "baseline":
    accepted = set(inspect.signature(BaseOperator.__init__).parameters)

    class StandIn(BaseOperator):
        def __init__(self, **kwargs):
            super().__init__(**{k: v for k, v in kwargs.items() if k in accepted})

    def plain_task(python_callable=None, multiple_outputs=None, **kwargs):
        options = {k: v for k, v in kwargs.items() if k in accepted}
        return task(python_callable, multiple_outputs=multiple_outputs, **options)

    for name, stand_in in (
        ("t9k_provider.operators", lambda attr: type(attr, (StandIn,), {})),
        ("t9k_provider.sensors.job", lambda attr: type(attr, (StandIn,), {})),
        ("t9k_provider.decorators.tasks", lambda attr: plain_task),
    ):
        module = types.ModuleType(name)
        module.__getattr__ = stand_in
        sys.modules[name] = module


def parse():
    wall, cpu = time.perf_counter(), time.process_time()
    bag = DagBag(dag_folder=sys.argv[2])
    return bag, time.perf_counter() - wall, time.process_time() - cpu


bag, wall, cpu = parse()
logging.disable(logging.INFO)  # DagBag logs every parse; the first one above logged like a DAG processor
again = [parse()[2] for _ in range(int(sys.argv[3]))]
operators = sys.modules.get("t9k_provider.operators")
print(json.dumps({
    "import_s": ready - start, "wall_s": wall, "cpu_s": cpu,
    "again_cpu_s": statistics.median(again) if again else None,
    "dags": len(bag.dags), "tasks": sum(len(d.task_dict) for d in bag.dags.values()),
    "errors": len(bag.import_errors), "provider": operators is not None and "__file__" in vars(operators),
}))
"""


def probe(mode: str, dags: Path, airflow_home: Path, reparses: int = 0) -> dict:
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(dags), str(reparses)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(f"DAG parse probe ({mode}) failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def paired(runs: int, dags: Path, airflow_home: Path, reparses: int = 0) -> list[tuple[dict, dict]]:
    """(provider, baseline) samples, interleaved so that a change in machine load hits both sides alike."""
    pairs = [
        (probe("provider", dags, airflow_home, reparses), probe("baseline", dags, airflow_home, reparses))
        for _ in range(runs)
    ]
    for a, b in pairs:
        if (a["dags"], a["tasks"]) != (b["dags"], b["tasks"]) or a["dags"] == 0 or a["errors"] or b["errors"]:
            raise RuntimeError(f"the two parses differ, failed or found nothing: {a} vs {b}")
        if not a["provider"] or b["provider"]:
            raise RuntimeError("the provider run did not load the provider's operators, or the baseline did")
    return pairs


def measure(runs: int, dags: Path = DAGS, taskflow: Path = TASKFLOW_EXAMPLE) -> list[Figure]:
    with tempfile.TemporaryDirectory() as home:
        for mode in ("provider", "baseline"):  # warm-up: bytecode cached for both comparisons, as a DAG
            probe(mode, dags, Path(home))  # processor has it (``taskflow`` is one of ``dags``)
        pairs = paired(runs, dags, Path(home))
        flow = paired(FLOW_PAIRS_PER_RUN * runs, taskflow, Path(home), REPARSES)
    a0 = pairs[0][0]
    label = f"{a0['dags']} example DAGs ({a0['tasks']} tasks)"
    shape = f"TaskFlow example ({flow[0][0]['tasks']} tasks)"
    return [
        Figure(SECTION, "import DagBag + airflow.sdk (common to both)", "ms",
               [r["import_s"] * 1000 for pair in pairs for r in pair], digits=0),
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
        Figure(SECTION, f"{shape}, first parse (imports the provider), @task.t9k*: CPU", "ms",
               [a["cpu_s"] * 1000 for a, _ in flow], digits=1),
        Figure(SECTION, f"{shape}, first parse, plain @task: CPU", "ms",
               [b["cpu_s"] * 1000 for _, b in flow], digits=1),
        Figure(SECTION, f"{shape}, first parse CPU, @task.t9k* / plain @task", "x",
               [a["cpu_s"] / b["cpu_s"] for a, b in flow], target=("<=", 1.10), digits=2),
        Figure(SECTION, f"{shape}, parsed again, @task.t9k*: CPU", "ms",
               [a["again_cpu_s"] * 1000 for a, _ in flow], digits=2),
        Figure(SECTION, f"{shape}, parsed again, plain @task: CPU", "ms",
               [b["again_cpu_s"] * 1000 for _, b in flow], digits=2),
        Figure(SECTION, f"{shape}, parsed again CPU, @task.t9k* / plain @task", "x",
               [a["again_cpu_s"] / b["again_cpu_s"] for a, b in flow], target=("<=", 1.10), digits=2),
    ]  # fmt: skip
