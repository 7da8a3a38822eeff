"""Per-task overhead of the T9k operator against the cncf-kubernetes operators, side by side
(docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators).

One local cluster (real controller, process kubelet) serves both halves of the benchmark, one after the
other: a fresh Airflow running the DAG of ``benchmarks.overhead_dag`` under ``dag.test()`` (every task and
trigger in one process), then the same DAG in a real deployment (``benchmarks.airflow_deployment``: separate
scheduler, triggerer, DAG processor and API server, LocalExecutor), where a deferral is a round trip through
the triggerer and the scheduler. In that DAG every variant (``GenericJobOperator``,
``KubernetesJobOperator``, ``KubernetesPodOperator``, each non-deferrable and deferrable, all at their
default settings, plus the T9k operator deferring at once) runs the same work ``rounds`` times, interleaved.
A task's overhead is its wall time (the task instance's start to end) minus the work's own time (the same
command run directly on the host, measured after each half). Requests are counted by the API server
between two tasks: those of the Airflow processes (their clients send their own User-Agent) and all of them
(controller, kubelet and Job controller included). For the T9k tasks a watch on jobs and pods stamps each
step on the way (submit, controller reaction, scheduling, process start, status propagation).

Each figure is over the tasks of one run (>= 10 per variant for ``pass``): median, spread (min-max) and
p90 across tasks, not across runs, as a run of each half takes several minutes.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks import machine
from benchmarks.airflow_deployment import AirflowDeployment
from benchmarks.api import Watch, progress
from benchmarks.overhead_dag import (
    AGENT,
    DAG_ID,
    NAMESPACE,
    T9K,
    T9K_TASK_LABEL,
    VARIANTS,
    WORKS,
    client_env,
    plan,
    task_lines,
    write_dag_folder,
)
from benchmarks.stats import Figure, percentile
from t9k_provider.controller.engine.names import LABEL_OWNER_NAME
from t9k_provider.testing import LocalCluster
from t9k_provider.waiting.status import parse_time

SECTION = "7. Per-task overhead against the cncf-kubernetes operators"
#: The T9k task's way, in order: (label, the stamp that ends the step).
STEPS = (
    ("Airflow task start -> job created (operator start, submit)", "job"),
    ("job created -> its pod created (controller reaction)", "pod"),
    ("pod created -> bound to a node (scheduling)", "bound"),
    ("bound -> pod Succeeded (process start, the work, process exit)", "pod_done"),
    ("pod Succeeded -> job Succeeded (status propagation)", "job_done"),
    ("job Succeeded -> Airflow task end (detection, log collection, Airflow)", "end"),
)
#: Targets of the T9k task under ``dag.test()`` (docs/benchmarks.md#targets): its overhead, non-deferrable;
#: the deferrable task's above it (same round); its pod's start above the work's own time; the fresh
#: cluster's first T9k task above the others' median. In a deployment the overhead target stays 1 s.
DAG_TEST_OVERHEAD = 0.20
DEFERRABLE_ABOVE = 0.05
POD_START_ABOVE_WORK = 0.10
FIRST_TASK_ABOVE = 0.5
#: Index of the pod's start (bound -> pod Succeeded) in ``STEPS``.
POD_START = next(i for i, (_, stamp) in enumerate(STEPS) if stamp == "pod_done")
#: Seconds two watch streams' deliveries of causally ordered events may come out of order.
WATCH_SKEW = 0.05
#: Seconds a task may take at most, by work (the wait of the slowest operator included), before a run of
#: the DAG is given up.
TASK_BUDGET = {"pass": 60.0, "sleep20": 90.0}


class Stamps:
    """When the watches first saw each step of each T9k job, by the benchmark task label of the job."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.job_task: dict[str, str] = {}
        self.seen: dict[str, dict[str, float]] = defaultdict(dict)

    def clear(self) -> None:
        """Forget every stamp: each run's DAG has the same task ids."""
        with self.lock:
            self.job_task.clear()
            self.seen.clear()

    def _stamp(self, task: str | None, step: str, when: float) -> None:
        if task is not None:
            self.seen[task].setdefault(step, when)

    def on_job(self, type_: str, obj: dict[str, Any], _received: float) -> None:
        now = time.time()
        meta = obj.get("metadata") or {}
        task = (meta.get("labels") or {}).get(T9K_TASK_LABEL)
        if task is None or type_ == "DELETED":
            return
        with self.lock:
            self.job_task[meta["name"]] = task
            self._stamp(task, "job", now)
            if (obj.get("status") or {}).get("phase") == "Succeeded":
                self._stamp(task, "job_done", now)

    def on_pod(self, type_: str, obj: dict[str, Any], _received: float) -> None:
        now = time.time()
        meta = obj.get("metadata") or {}
        if type_ == "DELETED":
            return
        with self.lock:
            task = self.job_task.get((meta.get("labels") or {}).get(LABEL_OWNER_NAME, ""))
            phase = (obj.get("status") or {}).get("phase")
            self._stamp(task, "pod", now)
            if (obj.get("spec") or {}).get("nodeName"):
                self._stamp(task, "bound", now)
            if phase == "Succeeded":
                self._stamp(task, "pod_done", now)

    def steps(self, task: str, start: float, end: float) -> list[float] | None:
        """Each step's seconds for one task, or None when a stamp is missing or out of order.

        The job's and the pod's stamps come from two watch streams read by two threads: a job seen
        Succeeded a moment before its pod (the controller wrote it after the pod's) is the streams' skew,
        and counts as a step of 0; more than ``WATCH_SKEW`` out of order is a broken stamp."""
        with self.lock:
            seen = dict(self.seen.get(task, {}))
        seen["end"] = end
        stamps = [start] + [seen.get(step) for _, step in STEPS]
        if any(s is None for s in stamps):
            return None
        steps = [b - a for a, b in itertools.pairwise(stamps)]  # type: ignore[operator]
        if min(steps) < -WATCH_SKEW:
            return None
        return [max(0.0, step) for step in steps]

    def explain(self, task: str, start: float, end: float) -> str:
        """The stamps of one task relative to its start, by step (None: never seen)."""
        with self.lock:
            seen = dict(self.seen.get(task, {}))
        seen["end"] = end
        return ", ".join(
            f"{step} {'never' if seen.get(step) is None else f'{seen[step] - start:+.3f} s'}"
            for _, step in STEPS
        )


def step_rows(
    stamps: Stamps, tasks: list[dict[str, Any]], variants: tuple[str, ...]
) -> dict[str, list[list[float]]]:
    """Each T9k variant's steps, one row per successful `python3 -c pass` task. A variant none of whose tasks
    succeeded (lost to Airflow's stale-event race, say) has no entry: the report counts its failed tasks
    instead of giving step figures with no sample. One with successes but no complete stamps keeps its empty
    entry, which the plausibility check fails."""
    steps: dict[str, list[list[float]]] = {}
    for variant in variants:
        done = [t for t in tasks if (t["variant"], t["work"], t["state"]) == (variant, "pass", "success")]
        if VARIANTS[variant].operator == T9K and done:
            steps[variant] = []
            for t in done:
                row = stamps.steps(t["task"], t["start"], t["end"])
                if row is None:  # said, so that a failed check shows what the watches saw
                    progress(
                        f"{t['task']}: incomplete steps, {stamps.explain(t['task'], t['start'], t['end'])}"
                    )
                else:
                    steps[variant].append(row)
    return steps


def work_seconds(work: str) -> list[float]:
    """The work's own time: its command run directly on the host (wall time, 7 samples; 3 of the sleep).
    Taken after the tasks, on the settled cluster they ran on: right after the cluster's start its processes'
    imports slowed ``python3 -c pass`` 3-5x (0.031-0.059 s against 0.008-0.018 s), which flattered every
    overhead measured against it."""
    times = []
    for _ in range(7 if work == "pass" else 3):
        began = time.perf_counter()
        subprocess.run([sys.executable, *WORKS[work]], check=True)
        times.append(time.perf_counter() - began)
    return times


def write_spec(cluster: LocalCluster, work_dir: Path, spec: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    work_dir.mkdir(parents=True, exist_ok=True)
    spec = dict(
        spec, kubeconfig=str(cluster.kubeconfig), base_url=cluster.base_url, token=cluster.token,
        airflow_home=str(work_dir / "airflow"), counts_file=str(work_dir / "counts.jsonl"),
    )  # fmt: skip
    spec_file = work_dir / "spec.json"
    spec_file.write_text(json.dumps(spec))
    return spec_file, spec


def checked(tasks: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    failed = [t["task"] for t in tasks if t["state"] != "success"]
    if failed:
        progress(f"tasks that did not succeed (left out of the figures): {', '.join(failed)}")
    if not tasks or len(failed) == len(tasks):
        raise RuntimeError(f"no measured task of the overhead DAG succeeded; see {where}")
    return tasks


def run_dag(cluster: LocalCluster, work_dir: Path, spec: dict[str, Any]) -> list[dict]:
    """One ``dag.test()`` in a fresh Airflow; returns its task lines."""
    spec_file, spec = write_spec(cluster, work_dir, spec)
    timeout = 300 + sum(TASK_BUDGET[work] for _, _, work in plan(spec))
    # stdout (the task lines among the tasks' own logs) kept whole, so a failed task's error can be read
    out, err = work_dir / "dag-test.out", work_dir / "dag-test.log"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.overhead_dag", str(spec_file)],
            stdout=stdout, stderr=stderr, timeout=timeout, check=False, env=os.environ | client_env(),
        )  # fmt: skip
    where = f"{out} and {err}"
    text = out.read_text(errors="replace")
    lines = [json.loads(x) for x in text.splitlines() if x.startswith('{"task"')]
    if proc.returncode != 0:
        raise RuntimeError(f"dag.test() of the overhead DAG failed (exit {proc.returncode}); see {where}")
    lost = pod_discovery_failures(text + err.read_text(errors="replace"))
    for t in lines:
        t["upstream"] = POD_DISCOVERY if t["task"] in lost else None
    return checked(lines, where)


def run_deployment(cluster: LocalCluster, work_dir: Path, spec: dict[str, Any]) -> list[dict]:
    """One run of the DAG in a fresh real deployment; returns its task lines."""
    spec_file, spec = write_spec(cluster, work_dir, spec)
    timeout = 300 + 1.5 * sum(TASK_BUDGET[work] for _, _, work in plan(spec))
    dags = write_dag_folder(work_dir / "dags")
    env = client_env() | {"T9K_BENCH_SPEC": str(spec_file)}
    with AirflowDeployment(work_dir / "airflow", dags, cluster.kubeconfig, env=env) as airflow:
        airflow.wait_for_dags([DAG_ID], timeout=300)
        run_id = airflow.trigger(DAG_ID)
        airflow.wait_for_run(DAG_ID, run_id, timeout)
        logs = airflow.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
        instances = [
            SimpleNamespace(
                task_id=ti["task_id"],
                state=ti["state"],
                start_date=parse_time(ti["start_date"]),
                end_date=parse_time(ti["end_date"]),
            )
            for ti in airflow.task_instances(DAG_ID, run_id)
        ]
    tasks = task_lines(spec, instances)
    raced = stale_event_failures(airflow.logs / "scheduler.log")
    task_logs = "".join(f.read_text(errors="replace") for f in logs.rglob("*.log"))
    lost = pod_discovery_failures(task_logs)
    for t in tasks:
        t["parse"] = parse_seconds(logs / f"task_id={t['task']}")
        t["upstream"] = STALE_EVENT if t["task"] in raced else POD_DISCOVERY if t["task"] in lost else None
    return checked(tasks, str(airflow.logs))


#: Known upstream bugs that can fail a task of the DAG, as the report names them (a task lost to one is
#: counted apart and left out of the figures).
STALE_EVENT = "Airflow's stale executor event after a deferral (apache/airflow#72716)"
POD_DISCOVERY = (
    "KubernetesJobOperator's pod discovery, which lists the Job's pods four times without a pause and fails "
    "the task when the Job controller has not created them yet (apache/airflow#70585)"
)


def pod_discovery_failures(logs: str) -> set[str]:
    """Tasks whose KubernetesJobOperator gave up on finding its Job's pods (`POD_DISCOVERY`): its error names
    the label selector, which holds the task's id."""
    return set(re.findall(r"No pods running with labels \S*task_id=(\w+)", logs))


def stale_event_failures(scheduler_log: Path) -> set[str]:
    """Tasks the scheduler failed on the stale "success" event of the worker that exited on deferral, after
    the trigger had already resumed them (Airflow's race, apache/airflow#72716): it logs each as
    "reported that the task instance <TaskInstance: DAG.TASK ...> finished with state success, but the task
    instance's state attribute is running"."""
    pattern = re.compile(
        rf"reported that the task instance <TaskInstance: {DAG_ID}\.(\w+) .*finished with state success, "
        r"but the task instance's state attribute is (?:running|queued|scheduled)"
    )
    text = scheduler_log.read_text(errors="replace") if scheduler_log.exists() else ""
    return {m[1] for m in pattern.finditer(text)}


def parse_seconds(task_logs: Path) -> float:
    """What the task's processes spent parsing the DAG file before running it (every task process of Airflow 3
    parses its DAG file once it has started: once per start, so twice for a deferred task), from the
    ``dag_file_parse_ms`` of each try's log; 0 when the log does not say (Airflow 2)."""
    total = 0
    for log in task_logs.glob("attempt=*.log"):
        if not re.fullmatch(r"attempt=\d+\.log", log.name):
            continue  # a trigger's log
        for line in log.read_text(errors="replace").splitlines():
            if '"dag_file_parse_ms"' in line:
                total += int(json.loads(line)["dag_file_parse_ms"])
    return total / 1000


#: The halves, in the order they run: (name in the report, how a run of the DAG is made).
HALVES: dict[str, Callable[[LocalCluster, Path, dict[str, Any]], list[dict]]] = {
    "dag.test()": run_dag,
    "deployment": run_deployment,
}


def summarize(
    tasks: list[dict[str, Any]], work_time: dict[str, float]
) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per (work, variant), one sample per successful task: overhead, overhead less the task processes' DAG
    file parse, requests of the Airflow processes, requests of all clients."""
    out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(
        lambda: {"overhead": [], "less_parse": [], "airflow_requests": [], "all_requests": []}
    )
    for t in tasks:
        if t["state"] != "success":
            continue
        row = out[(t["work"], t["variant"])]
        row["overhead"].append(t["end"] - t["start"] - work_time[t["work"]])
        row["less_parse"].append(t["end"] - t["start"] - work_time[t["work"]] - t.get("parse", 0.0))
        row["airflow_requests"].append(t["requests"].get(AGENT, 0))
        row["all_requests"].append(sum(t["requests"].values()))
    return dict(out)


def round_ratios(
    tasks: list[dict[str, Any]], work_time: float, ours: str, theirs: list[str], less_parse: bool = False
) -> list[float]:
    """Per round: our task's overhead over the best of the other variants' overheads in the same round (of
    those that succeeded); with ``less_parse``, each overhead less its task processes' DAG file parse."""
    by_round: dict[str, dict[str, float]] = defaultdict(dict)
    for t in tasks:
        if t["state"] == "success":
            parse = t.get("parse", 0.0) if less_parse else 0.0
            by_round[t["task"].split("_", 1)[0]][t["variant"]] = t["end"] - t["start"] - work_time - parse
    return [
        r[ours] / min(r[v] for v in theirs if v in r)
        for r in by_round.values()
        if ours in r and any(v in r for v in theirs)
    ]


@contextmanager
def stamped_cluster(directory: Path) -> Iterator[tuple[LocalCluster, Stamps]]:
    """A fresh local cluster with its controller, and the stamps its T9k jobs' steps leave on two watches."""
    with LocalCluster(directory, controller=True) as cluster:
        stamps = Stamps()
        watches = (
            Watch(cluster, f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{NAMESPACE}/genericjobs",
                  stamps.on_job),
            Watch(cluster, f"/api/v1/namespaces/{NAMESPACE}/pods", stamps.on_pod),
        )  # fmt: skip
        for w in watches:
            w.start()
            w.ready.wait(10)
        try:
            yield cluster, stamps
        finally:
            for w in watches:
                w.stop()


def measure(
    work: Path,
    rounds: dict[str, int],
    works: tuple[str, ...],
    variants: tuple[str, ...] = tuple(VARIANTS),
    cncf_poll: float | None = None,
) -> list[Figure]:
    """``cncf_poll``: the cncf operators' shorter polling (`overhead_dag.measured_task`), smoke test only."""
    out: list[Figure] = []
    with stamped_cluster(work / "overhead-cluster") as (cluster, stamps):
        for half, run in HALVES.items():
            stamps.clear()
            load = machine.load_average()
            spec = {
                "variants": list(variants),
                "works": list(works),
                "rounds": rounds,
                "cncf_poll": cncf_poll,
            }
            half_dir = work / f"overhead-{half.strip('()').replace('.', '-')}"
            tasks = run(cluster, half_dir, spec)
            work_samples = {w: work_seconds(w) for w in works}
            (half_dir / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
            load += f" at its start, {machine.load_average()} at its end"
            steps = step_rows(stamps, tasks, variants)
            out += figures(half, tasks, work_samples, steps, works, variants, load)
            progress(f"overhead, {half}: done ({len(tasks)} tasks)")
    return out


def figures(
    half: str,
    tasks: list[dict[str, Any]],
    work_samples: dict[str, list[float]],
    steps: dict[str, list[list[float]]],
    works: tuple[str, ...],
    variants: tuple[str, ...],
    load: str,
) -> list[Figure]:
    """One half's figures; each over its tasks (median, min-max, and the p90 in the name). ``load``: the
    machine's load average during the half, noted on its first figure."""
    work_time = {w: statistics.median(samples) for w, samples in work_samples.items()}
    rows = summarize(tasks, work_time)
    out: list[Figure] = []
    for work in works:
        label = f"{half}, " + ("`python3 -c pass`" if work == "pass" else "a 20 s sleep")
        out.append(Figure(SECTION, f"{label}: the work's own time, run directly", "s", work_samples[work],
                          note=f"load average {load}", digits=3))  # fmt: skip
        for variant in variants:
            v, name = VARIANTS[variant], f"{label}, {VARIANTS[variant].title}"
            mine = [t for t in tasks if (t["work"], t["variant"]) == (work, variant)]
            lost = [t for t in mine if t["state"] != "success"]
            if lost:
                causes = Counter(t["upstream"] for t in lost if t.get("upstream"))
                known = ", ".join(f"{n} of them by {cause}" for cause, n in causes.items())
                out.append(Figure(SECTION, f"{name}: tasks failed, of {len(mine)}", "tasks", [len(lost)],
                                  note=f"{known or 'none of them by a known upstream bug'}; left out of the "
                                  "figures", digits=0))  # fmt: skip
            if (work, variant) not in rows:
                continue
            row = rows[(work, variant)]
            target = None
            if v.operator == T9K and not v.defer_at_once:
                target = ("<=", DAG_TEST_OVERHEAD if half == "dag.test()" and not v.deferrable else 1.0)
            overhead = row["overhead"]
            note = f"p90 {percentile(overhead, 90):.2f} s"
            out.append(Figure(SECTION, f"{name}: overhead per task ({len(overhead)} tasks)", "s", overhead,
                              target, note=note, digits=2, zero_ok=True))  # fmt: skip
            if any(t.get("parse") for t in tasks):
                out.append(Figure(SECTION, f"{name}: overhead less the task processes' DAG file parse", "s",
                                  row["less_parse"], digits=2, zero_ok=True))  # fmt: skip
            out += [
                Figure(SECTION, f"{name}: API requests per task by the Airflow processes", "requests",
                       row["airflow_requests"], digits=0),
                Figure(SECTION, f"{name}: API requests per task, all clients (controller, kubelet...)",
                       "requests", row["all_requests"], digits=0),
            ]  # fmt: skip
        for deferrable in (False, True):
            mode = [v for v in variants if VARIANTS[v].deferrable == deferrable]
            theirs = [v for v in mode if VARIANTS[v].operator != T9K]
            for ours in (v for v in mode if VARIANTS[v].operator == T9K):
                same_work = [t for t in tasks if t["work"] == work]
                ratios = round_ratios(same_work, work_time[work], ours, theirs)
                if not theirs or not ratios:
                    continue
                target = None if VARIANTS[ours].defer_at_once else ("<=", 0.2)
                name = f"{label}, {VARIANTS[ours].title}: T9k overhead / best cncf operator's, per round"
                out.append(Figure(SECTION, name, "x", ratios, target, digits=2))
                if any(t.get("parse") for t in tasks):
                    less = round_ratios(same_work, work_time[work], ours, theirs, less_parse=True)
                    out.append(Figure(SECTION, f"{name}, each less its DAG file parse", "x", less, digits=2))
    for variant, per_task in steps.items():
        for i, (step, _) in enumerate(STEPS):
            out.append(Figure(SECTION, f"{half}, {VARIANTS[variant].title}, `python3 -c pass`: {step}", "s",
                              [row[i] for row in per_task], digits=3, zero_ok=True))  # fmt: skip
    return out + limits(half, tasks, work_time.get("pass"), steps)


def limits(
    half: str, tasks: list[dict[str, Any]], work: float | None, steps: dict[str, list[list[float]]]
) -> list[Figure]:
    """What the T9k task may cost above what it cannot avoid, under ``dag.test()`` (``pass`` work): its
    pod's start above the work's own time, the deferrable task above the non-deferrable one of its round,
    and the fresh cluster's first T9k task above the others."""
    if half != "dag.test()" or work is None:
        return []
    out: list[Figure] = []
    label = f"{half}, `python3 -c pass`, GenericJobOperator"
    if steps.get("t9k"):
        name = f"{label}, non-deferrable: bound -> pod Succeeded, less the work's own time"
        out.append(Figure(SECTION, name, "s", [row[POD_START] - work for row in steps["t9k"]],
                          ("<=", POD_START_ABOVE_WORK), digits=3, zero_ok=True))  # fmt: skip
    done = [t for t in tasks if t["work"] == "pass" and t["state"] == "success"]
    by_round: dict[str, dict[str, float]] = defaultdict(dict)
    for t in done:
        by_round[t["task"].split("_", 1)[0]][t["variant"]] = t["end"] - t["start"]
    above = [r["t9k-deferrable"] - r["t9k"] for r in by_round.values() if {"t9k", "t9k-deferrable"} <= set(r)]
    if above:
        name = f"{label}, deferrable: overhead above the non-deferrable task's, per round"
        out.append(Figure(SECTION, name, "s", above, ("<=", DEFERRABLE_ABOVE), digits=3, zero_ok=True))
    ours = sorted((t for t in done if VARIANTS[t["variant"]].operator == T9K), key=lambda t: t["start"])
    if len(ours) > 1:  # one sample per other task: their median is the first task above the others' median
        first = ours[0]["end"] - ours[0]["start"]
        gaps = [first - (t["end"] - t["start"]) for t in ours[1:]]
        out.append(Figure(SECTION, f"{label}: the fresh cluster's first T9k task above the others", "s",
                          gaps, ("<=", FIRST_TASK_ABOVE), digits=3, zero_ok=True))  # fmt: skip
    return out
