"""DAG parse cost with the provider vs the same DAGs without the provider's code
(docs/benchmarks.md#5-dag-parse-cost).

* Every DAG of ``dags_examples/``, provider operators vs stand-ins (``PROBE``): each sample is a fresh
  interpreter that imports what both sides share (``DagBag``, ``airflow.sdk``), freezes the garbage
  collector's generations as the DAG processor does before it starts its parsing processes, and builds a
  ``DagBag``. In the baseline interpreter the provider's modules are replaced, before any DAG file runs, by
  stand-ins: the operator and sensor classes by plain ``BaseOperator`` subclasses taking the same arguments,
  the ``@task.t9k*`` decorators by Airflow's plain ``@task``. The same for the TaskFlow example alone: its
  first parse in a fresh interpreter, which imports the provider.
* The TaskFlow example against its plain copy (``plain_copy``: the same file, whose ``task`` makes
  ``@task.t9k*`` plain ``@task``), three ways: parsed again and again in one warm interpreter (the DAG
  file's own cost, ``WARM_PROBE``); forked by Airflow's own parsing process (``DagFileProcessorProcess``)
  from a parent that holds what a running ``airflow dag-processor`` holds (``PROCESSOR_PROBE``), timed as
  the DAG processor times it (fork to result) and by the child's CPU; and, the target (within
  10%), parsed by a running ``airflow dag-processor`` whose parsing processes time themselves
  (``running_processor_parses``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.airflow_deployment import Component, airflow_command, isolated_env, migrate_db
from benchmarks.stats import Figure

SECTION = "5. DAG parse cost"
DAGS = Path(__file__).resolve().parent.parent / "dags_examples"
TASKFLOW_EXAMPLE = DAGS / "example_taskflow_training.py"


@dataclass(frozen=True)
class Sizes:
    """How much each comparison samples per run."""

    #: pairs of the TaskFlow example's first parse: its samples are a few milliseconds each
    flow_pairs: int = 3
    #: parses per side of the TaskFlow example in one warm interpreter (after one of each)
    warm_rounds: int = 100
    #: parses per side in one parent process of the DAG-processor comparison (after one warm-up pair)
    processor_pairs: int = 30
    #: a running ``airflow dag-processor`` parses for this long, and at least ``running_pairs`` pairs
    running_seconds: float = 30.0
    running_pairs: int = 5


#: The smoke test's sizes (``python -m benchmarks --quick``): each comparison once, figures meaningless.
QUICK_SIZES = Sizes(flow_pairs=1, warm_rounds=3, processor_pairs=2, running_seconds=0.0, running_pairs=2)
#: The TaskFlow example's import of ``task``, after which its plain copy (``plain_copy``) redefines ``task``.
TASK_IMPORT = "from airflow.providers.common.compat.sdk import DAG, Param, task\n"

PROBE = r"""
import gc, inspect, json, sys, time, types

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
operators = sys.modules.get("t9k_provider.operators")
print(json.dumps({
    "import_s": ready - start, "wall_s": wall, "cpu_s": cpu,
    "dags": len(bag.dags), "tasks": sum(len(d.task_dict) for d in bag.dags.values()),
    "errors": len(bag.import_errors), "provider": operators is not None and "__file__" in vars(operators),
}))
"""


#: What the plain copy of a DAG file (``plain_copy``) runs right after the file imports ``task``: the file's
#: ``task`` becomes Airflow's ``task`` with every ``task.t9k*`` turned into plain ``@task`` (the same
#: functions as PythonOperator tasks, with the options ``BaseOperator`` takes). Inline, not in a module of
#: its own: where a DAG file takes ``task`` from changes what the DAG processor's parsing process costs
#: (see the note on ``running_processor_parses``).
PLAIN_TASKS = """
import inspect as _inspect  # noqa: E402

from airflow.providers.common.compat.sdk import BaseOperator as _BaseOperator  # noqa: E402

_ACCEPTED = set(_inspect.signature(_BaseOperator.__init__).parameters)
_airflow_task = task


def _plain_task(python_callable=None, multiple_outputs=None, **kwargs):
    options = {k: v for k, v in kwargs.items() if k in _ACCEPTED}
    return _airflow_task(python_callable, multiple_outputs=multiple_outputs, **options)


class _PlainTasks:
    def __call__(self, *args, **kwargs):
        return _airflow_task(*args, **kwargs)

    def __getattr__(self, name):
        return _plain_task if name.startswith("t9k") else getattr(_airflow_task, name)


task = _PlainTasks()
"""


def plain_copy(path: Path, folder: Path) -> Path:
    """A copy of the DAG file ``path`` in ``folder`` whose ``@task.t9k*`` are plain ``@task`` (its DAG id
    suffixed ``_plain``): the same file, ``PLAIN_TASKS`` inserted after its import of ``task``."""
    source = path.read_text()
    dag_id = f'dag_id="{path.stem}"'
    if source.count(TASK_IMPORT) != 1 or source.count(dag_id) != 1:
        raise RuntimeError(
            f"{path.name} no longer has {TASK_IMPORT!r} and {dag_id} once each: adapt plain_copy"
        )
    copy = folder / f"{path.stem}_plain.py"
    plain = source.replace(TASK_IMPORT, TASK_IMPORT + PLAIN_TASKS).replace(
        dag_id, f'dag_id="{path.stem}_plain"'
    )
    copy.write_text(plain)
    return copy


#: The DAG file's own cost: one interpreter parses the TaskFlow example and its plain copy in alternation
#: (ABBA), once everything is loaded and the garbage collector's generations are frozen (as in a DAG
#: processor's parsing process, whose parent's objects are frozen), so both sides see the same heap, imports
#: and machine load.
WARM_PROBE = r"""
import gc, json, logging, sys, time

from airflow.dag_processing.dagbag import DagBag

provider_file, plain_file, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = {"provider": provider_file, "baseline": plain_file}


def parse(side):
    cpu = time.process_time()
    bag = DagBag(dag_folder=files[side])
    cpu = time.process_time() - cpu
    if len(bag.dags) != 1 or bag.import_errors:
        raise RuntimeError(f"{side}: {len(bag.dags)} DAGs, errors {bag.import_errors}")
    return cpu


parse("provider"), parse("baseline")  # everything either side needs is loaded
if "t9k_provider.operators.job" not in sys.modules:
    raise RuntimeError("the provider's copy did not load the provider")
logging.disable(logging.INFO)
gc.collect()
gc.freeze()
samples = {"provider": [], "baseline": []}
for i in range(rounds):
    for side in ("provider", "baseline") if i % 2 == 0 else ("baseline", "provider"):
        samples[side].append(parse(side))
print(json.dumps(samples))
"""


def warm_parses(path: Path, airflow_home: Path, rounds: int) -> list[tuple[float, float]]:
    """(provider, plain) CPU seconds of one parse each, ``rounds`` times, in one warm interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        plain = plain_copy(path, Path(tmp))
        env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
        out = subprocess.run(
            [sys.executable, "-c", WARM_PROBE, str(path), str(plain), str(rounds)],
            capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"warm parse probe failed:\n{out.stderr[-2000:]}")
    samples = json.loads(out.stdout.strip().splitlines()[-1])
    return list(zip(samples["provider"], samples["baseline"], strict=True))


#: The probe's parent holds what a running ``airflow dag-processor`` (Airflow 3.3.2) had imported once it
#: had parsed the TaskFlow example (its ``sys.modules``, dumped from inside it, 2026-11-27): the CLI's
#: ``providers_configuration_loaded`` runs every provider's ``get_provider_info`` (so ``t9k_provider`` and
#: its ``provider_info`` are loaded, nothing else of the provider), and creating the DAG processor's ``Job``
#: row configures the ORM, which imports every model and through the deprecated ``BaseOperatorLink`` alias
#: ``airflow.sdk.bases.operatorlink``. Not loaded there: the TaskFlow decorators (the file's ``task`` comes
#: from ``airflow.providers.common.compat.sdk``, which resolves its names lazily), so every parsing process
#: imports them, on both sides. None of the modules either side's parsing process imports is in that dump.

PROCESSOR_PROBE = r"""
import gc, json, resource, selectors, sys, time
from pathlib import Path

import airflow.dag_processing.manager  # noqa: F401
import airflow.models
import structlog
from airflow.dag_processing.manager import logging_processors
from airflow.dag_processing.processor import DagFileProcessorProcess
from airflow.providers_manager import ProvidersManager
from airflow.sdk.api.client import Client
from uuid6 import uuid7

# What `airflow dag-processor` holds before it parses (see the note on PROCESSOR_PROBE): the providers'
# configuration (every provider's get_provider_info) and every ORM model (its Job row configures the mappers).
ProvidersManager().initialize_providers_configuration()
airflow.models.import_all_models()
files = {"provider": Path(sys.argv[1]).resolve(), "baseline": Path(sys.argv[2]).resolve()}
pairs = int(sys.argv[3])
client = Client(base_url=None, token="", dry_run=True)  # as the DAG processor's; the file asks it nothing
client.base_url = "http://in-process.invalid./"


def parse(mode):
    # The forked parsing process imports the provider afresh (the example) or not at all (its plain copy),
    # unless airflow_local_settings.py imported it into the parent.
    path = files[mode]
    selector = selectors.DefaultSelector()
    sink = open("/dev/null", "ab")
    logger = structlog.wrap_logger(
        structlog.BytesLogger(sink), processors=logging_processors(json_output=True), logger_name="processor"
    ).bind()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = DagFileProcessorProcess.start(
        id=uuid7(), path=path, bundle_path=path.parent, bundle_name="dags-folder",
        dag_file_rel_path=path.name, callbacks=[], selector=selector, logger=logger, logger_filehandle=sink,
        client=client,
    )
    while not proc.is_ready:  # the DAG processor's loop: service the parsing process's sockets
        for key, _ in selector.select(timeout=0.05):
            handler, on_close = key.data
            try:
                more = handler(key.fileobj)
            except (BrokenPipeError, ConnectionResetError):
                more = False
            if not more:
                on_close(key.fileobj)
                key.fileobj.close()
    wall = time.monotonic() - proc.start_time  # as the DAG processor's run_duration
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = proc.parsing_result
    if result is None or len(result.serialized_dags) != 1 or result.import_errors:
        raise RuntimeError(f"{mode} parse failed: {result}")
    sink.close()
    return wall, (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime)


parse("provider"), parse("baseline")  # warm-up: the parent pre-imports each file's airflow modules once
gc.freeze()  # as the DAG processor does before its parsing loop, so a child's collections skip its objects
samples = [(parse("provider"), parse("baseline")) for _ in range(pairs)]
print(json.dumps({"pairs": samples, "provider_in_parent": "t9k_provider.operators.job" in sys.modules}))
"""
#: What ``docs/airflow.md`` suggests for ``airflow_local_settings.py``: the DAG processor (like every Airflow
#: process) imports that file at start, so its forked parsing processes find the provider loaded.
LOCAL_SETTINGS_PREIMPORT = "import t9k_provider.decorators.tasks  # noqa: F401  once, before the forks\n"


def processor_parses(
    path: Path, airflow_home: Path, pairs: int, preimport: bool = False
) -> list[tuple[list[float], list[float]]]:
    """((wall, cpu) of ``path``, (wall, cpu) of its plain copy) per pair, in seconds; with ``preimport``,
    under an ``airflow_local_settings.py`` that imports the provider."""
    settings = airflow_home / "config" / "airflow_local_settings.py"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(LOCAL_SETTINGS_PREIMPORT if preimport else "")
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    with tempfile.TemporaryDirectory() as tmp:
        plain = plain_copy(path, Path(tmp))
        out = subprocess.run(
            [sys.executable, "-c", PROCESSOR_PROBE, str(path), str(plain), str(pairs)],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"DAG processor parse probe failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["provider_in_parent"] != preimport:
        where = "by airflow_local_settings.py" if preimport else "afresh by each parse"
        raise RuntimeError(f"the provider was not imported {where}")
    return result["pairs"]


#: Seconds a running ``airflow dag-processor`` parses the TaskFlow example and its plain copy, per run.
#: The running DAG processor's ``airflow_local_settings.py``: every parsing process it forks appends, when
#: Airflow's supervisor ends it (``os._exit``), which file it parsed, its CPU seconds and its minor page
#: faults since the fork.
TIMING_SETTINGS = """
import os, resource, sys, time


def _timed():
    cpu, faults = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    exit_ = os._exit

    def timed_exit(code):
        # Airflow imports a DAG file as the module unusual_prefix_<hash>_<file stem>.
        provider, plain = os.environ["T9K_PARSE_FILES"].split()
        names = [name for name in sys.modules if name.startswith("unusual_prefix_")]
        side = "baseline" if any(n.endswith("_" + plain) for n in names) else (
            "provider" if any(n.endswith("_" + provider) for n in names) else None
        )
        if side:
            faults_now = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            with open(os.environ["T9K_PARSE_TIMES"], "a") as out:
                out.write(f"{side} {time.process_time() - cpu} {faults_now - faults}\\n")
        exit_(code)

    os._exit = timed_exit


os.register_at_fork(after_in_child=_timed)
"""


def running_processor_parses(
    path: Path, airflow_home: Path, seconds: float, pairs: int, preimport: bool = False
) -> list[tuple[float, int, float, int]]:
    """(CPU s, minor faults) of the parsing processes of ``path`` and of its plain copy, in pairs, from a
    running ``airflow dag-processor`` (one parsing process, files re-parsed at once) in ``airflow_home``
    (migrated) that parses for ``seconds`` and at least ``pairs`` pairs (after the first two of each); with
    ``preimport``, under an ``airflow_local_settings.py`` that also imports the provider.

    The plain copy must take ``task`` as the file does: one that imported a ``task`` stand-in from a module
    of its own measured about 10 ms (1,450 minor page faults) cheaper per parsing process than the
    example, and the example taking the provider's decorators through such a module as cheap, while the
    provider's own modules and tasks cost about 4 ms there: the difference was where ``task`` came from,
    not the provider."""
    dags = airflow_home / "dags"
    shutil.rmtree(dags, ignore_errors=True)
    dags.mkdir()
    shutil.copy(path, dags / path.name)
    plain = plain_copy(path, dags)
    settings = airflow_home / "config" / "airflow_local_settings.py"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(TIMING_SETTINGS + (LOCAL_SETTINGS_PREIMPORT if preimport else ""))
    times = airflow_home / "parse-times.txt"
    times.unlink(missing_ok=True)
    bundle = [{"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
               "kwargs": {"path": str(dags), "refresh_interval": 300}}]  # fmt: skip
    env = {
        **isolated_env(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundle),
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "0",
        "T9K_PARSE_TIMES": str(times),
        "T9K_PARSE_FILES": f"{path.stem} {plain.stem}",
    }
    log = airflow_home / "dag-processor.log"
    processor = Component("dag-processor", airflow_command("dag-processor"), log)
    processor.start(env)
    began = time.monotonic()
    try:
        while time.monotonic() - began < seconds or min(map(len, _parse_times(times))) < pairs:
            if not processor.running():
                raise RuntimeError(f"the DAG processor exited:\n{processor.log_tail()}")
            if time.monotonic() - began > seconds + 300:
                break
            time.sleep(0.5)
    finally:
        processor.stop()
    provider, baseline = _parse_times(times)
    if min(len(provider), len(baseline)) < pairs:
        raise RuntimeError(f"the DAG processor parsed too little: {len(provider)} vs {len(baseline)} parses")
    return [(a[0], a[1], b[0], b[1]) for a, b in zip(provider, baseline, strict=False)]


def _parse_times(times: Path) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """The (CPU s, minor faults) recorded so far of each side's parses, but the first two of each, which
    also store the DAG."""
    sides: dict[str, list[tuple[float, int]]] = {"provider": [], "baseline": []}
    for line in times.read_text().splitlines() if times.exists() else []:
        fields = line.split()
        if len(fields) == 3:  # a line being written has fewer
            sides[fields[0]].append((float(fields[1]), int(fields[2])))
    return sides["provider"][2:], sides["baseline"][2:]


def probe(mode: str, dags: Path, airflow_home: Path) -> dict:
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(dags)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(f"DAG parse probe ({mode}) failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def paired(runs: int, dags: Path, airflow_home: Path) -> list[tuple[dict, dict]]:
    """(provider, baseline) samples, interleaved so that a change in machine load hits both sides alike."""
    pairs = [
        (probe("provider", dags, airflow_home), probe("baseline", dags, airflow_home)) for _ in range(runs)
    ]
    for a, b in pairs:
        if (a["dags"], a["tasks"]) != (b["dags"], b["tasks"]) or a["dags"] == 0 or a["errors"] or b["errors"]:
            raise RuntimeError(f"the two parses differ, failed or found nothing: {a} vs {b}")
        if not a["provider"] or b["provider"]:
            raise RuntimeError("the provider run did not load the provider's operators, or the baseline did")
    return pairs


def measure(
    runs: int, sizes: Sizes = Sizes(), dags: Path = DAGS, taskflow: Path = TASKFLOW_EXAMPLE
) -> list[Figure]:
    with tempfile.TemporaryDirectory() as home:
        for mode in ("provider", "baseline"):  # warm-up: bytecode cached for both comparisons, as a DAG
            probe(mode, dags, Path(home))  # processor has it (``taskflow`` is one of ``dags``)
        pairs = paired(runs, dags, Path(home))
        flow = paired(sizes.flow_pairs * runs, taskflow, Path(home))
        warm, processor, preimported, running, running_preimported = [], [], [], [], []
        running_home = Path(home) / "running"
        running_home.mkdir()
        migrate_db(isolated_env(running_home))
        for _ in range(runs):
            warm += warm_parses(taskflow, Path(home), sizes.warm_rounds)
            processor += processor_parses(taskflow, Path(home), sizes.processor_pairs)
            preimported += processor_parses(taskflow, Path(home), sizes.processor_pairs, preimport=True)
            running += running_processor_parses(
                taskflow, running_home, sizes.running_seconds, sizes.running_pairs
            )
            running_preimported += running_processor_parses(
                taskflow, running_home, sizes.running_seconds, sizes.running_pairs, preimport=True
            )
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
               [a["cpu_s"] / b["cpu_s"] for a, b in flow], digits=2),
        Figure(SECTION, f"{shape}, parsed again in a warm interpreter, @task.t9k*: CPU", "ms",
               [a * 1000 for a, _ in warm], digits=2),
        Figure(SECTION, f"{shape}, parsed again in a warm interpreter, plain @task: CPU", "ms",
               [b * 1000 for _, b in warm], digits=2),
        Figure(SECTION, f"{shape}, parsed again in a warm interpreter CPU, @task.t9k* / plain @task", "x",
               [a / b for a, b in warm], target=("<=", 1.10), digits=2),
        Figure(SECTION, f"{shape}, the DAG processor's parse (fork to result), @task.t9k*: wall", "ms",
               [a[0] * 1000 for a, _ in processor], digits=0),
        Figure(SECTION, f"{shape}, the DAG processor's parse (fork to result), plain @task: wall", "ms",
               [b[0] * 1000 for _, b in processor], digits=0),
        Figure(SECTION, f"{shape}, the DAG processor's parse, wall, @task.t9k* / plain @task", "x",
               [a[0] / b[0] for a, b in processor], digits=2),
        Figure(SECTION, f"{shape}, the DAG processor's parsing process, @task.t9k*: CPU", "ms",
               [a[1] * 1000 for a, _ in processor], digits=0),
        Figure(SECTION, f"{shape}, the DAG processor's parsing process, plain @task: CPU", "ms",
               [b[1] * 1000 for _, b in processor], digits=0),
        Figure(SECTION, f"{shape}, the DAG processor's parsing process CPU, @task.t9k* / plain @task", "x",
               [a[1] / b[1] for a, b in processor], digits=2),
        Figure(SECTION, f"{shape}, the DAG processor's parse, provider imported by airflow_local_settings.py:"
               " wall, @task.t9k* / plain @task", "x", [a[0] / b[0] for a, b in preimported], digits=2),
        Figure(SECTION, f"{shape}, the DAG processor's parsing process, provider imported by "
               "airflow_local_settings.py: CPU, @task.t9k* / plain @task", "x",
               [a[1] / b[1] for a, b in preimported], digits=2),
        Figure(SECTION, f"{shape}, a running airflow dag-processor's parsing process, @task.t9k*: CPU", "ms",
               [a * 1000 for a, _, _, _ in running], digits=0),
        Figure(SECTION, f"{shape}, a running airflow dag-processor's parsing process, plain @task: CPU", "ms",
               [b * 1000 for _, _, b, _ in running], digits=0),
        Figure(SECTION, f"{shape}, a running airflow dag-processor's parsing process CPU, @task.t9k* / plain "
               "@task", "x", [a / b for a, _, b, _ in running], target=("<=", 1.10), digits=2),
        Figure(SECTION, f"{shape}, a running airflow dag-processor's parsing process, @task.t9k*: minor "
               "page faults", "faults", [fa for _, fa, _, _ in running], digits=0),
        Figure(SECTION, f"{shape}, a running airflow dag-processor's parsing process, plain @task: minor "
               "page faults", "faults", [fb for _, _, _, fb in running], digits=0),
        Figure(SECTION, f"{shape}, a running airflow dag-processor's parsing process, provider imported by "
               "airflow_local_settings.py: CPU, @task.t9k* / plain @task", "x",
               [a / b for a, _, b, _ in running_preimported], digits=2),
    ]  # fmt: skip
