"""Issue 14.1: per-task overhead of the T9k operator against the cncf-kubernetes operators, side by side.

One local cluster (real controller, process kubelet) serves every run. Each run is a fresh Airflow
(``benchmarks.overhead_dag``, its own home and database) running one DAG under ``dag.test()`` in which
every variant (``GenericJobOperator``, ``KubernetesJobOperator``, ``KubernetesPodOperator``, each
non-deferrable and deferrable, all at their default settings) runs the same work ``rounds`` times,
interleaved. A task's overhead is its wall time (the task instance's start to end) minus the work's own
time (the same command run directly on the host, measured in the same run). Requests are counted by the API
server between two tasks: those of the Airflow process (its clients send their own User-Agent) and all of
them (controller, kubelet and Job controller included). For the T9k tasks a watch on jobs and pods stamps
each step on the way (submit, controller reaction, scheduling, process start, status propagation).

The same DAG can run in a real deployment (the real-deployment harness of the Airflow production issue):
see ``overhead_dag.build_dag``, which needs only the spec file, and ``summarize``, which needs only the
task lines it prints.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.api import Watch, progress
from benchmarks.overhead_dag import AGENT, NAMESPACE, T9K_TASK_LABEL, VARIANTS, WORKS, plan
from benchmarks.stats import Figure, percentile
from t9k_provider.controller.engine.names import LABEL_OWNER_NAME
from t9k_provider.local.testing import LocalCluster

SECTION = "7. Per-task overhead against the cncf-kubernetes operators"
MODES = {False: "non-deferrable", True: "deferrable"}
#: The T9k task's way, in order: (label, the stamp that ends the step).
STEPS = (
    ("Airflow task start -> job created (operator start, submit)", "job"),
    ("job created -> its pod created (controller reaction)", "pod"),
    ("pod created -> bound to a node (scheduling)", "bound"),
    ("bound -> pod Succeeded (process start, the work, process exit)", "pod_done"),
    ("pod Succeeded -> job Succeeded (status propagation)", "job_done"),
    ("job Succeeded -> Airflow task end (detection, log collection, Airflow)", "end"),
)


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
        """Each step's seconds for one task, or None when a stamp is missing or out of order."""
        with self.lock:
            seen = dict(self.seen.get(task, {}))
        seen["end"] = end
        stamps = [start] + [seen.get(step) for _, step in STEPS]
        if any(s is None for s in stamps):
            return None
        steps = [b - a for a, b in itertools.pairwise(stamps)]  # type: ignore[operator]
        return steps if min(steps) >= 0 else None


def work_seconds(work: str, samples: int = 7) -> float:
    """The work's own time: its command run directly on the host (median wall time)."""
    times = []
    for _ in range(samples if work == "pass" else 1):
        began = time.perf_counter()
        subprocess.run([sys.executable, *WORKS[work]], check=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def run_dag(cluster: LocalCluster, work_dir: Path, spec: dict[str, Any], timeout: float) -> list[dict]:
    """One ``dag.test()`` in a fresh Airflow; returns its task lines."""
    work_dir.mkdir(parents=True, exist_ok=True)
    spec = dict(
        spec, kubeconfig=str(cluster.kubeconfig), base_url=cluster.base_url, token=cluster.token,
        airflow_home=str(work_dir / "airflow"), counts_file=str(work_dir / "counts.jsonl"),
    )  # fmt: skip
    spec_file = work_dir / "spec.json"
    spec_file.write_text(json.dumps(spec))
    with open(work_dir / "dag-test.log", "wb") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.overhead_dag", str(spec_file)],
            stdout=subprocess.PIPE, stderr=log, timeout=timeout, check=False,
        )  # fmt: skip
    lines = [json.loads(x) for x in proc.stdout.decode().splitlines() if x.startswith("{")]
    tasks = [x for x in lines if "task" in x]
    failed = [t["task"] for t in tasks if t["state"] != "success"]
    if failed:
        progress(f"tasks that did not succeed (left out of the figures): {', '.join(failed)}")
    if proc.returncode != 0 or len(failed) == len(tasks):
        raise RuntimeError(f"dag.test() of the overhead DAG failed (exit {proc.returncode}); see {log.name}")
    return tasks


def summarize(
    tasks: list[dict[str, Any]], work_time: dict[str, float]
) -> dict[tuple[str, str], dict[str, float]]:
    """Per (work, variant): overhead median/p90/p10 and requests per task, from one run's task lines."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for t in tasks:
        if t["state"] == "success":
            groups[(t["work"], t["variant"])].append(t)
    out = {}
    for key, group in groups.items():
        overheads = [t["end"] - t["start"] - work_time[key[0]] for t in group]
        out[key] = {
            "median": statistics.median(overheads),
            "p90": percentile(overheads, 90),
            "p10": percentile(overheads, 10),
            "airflow_requests": statistics.median(t["requests"].get(AGENT, 0) for t in group),
            "all_requests": statistics.median(sum(t["requests"].values()) for t in group),
        }
    return out


def measure(
    work: Path, runs: int, rounds: int, works: tuple[str, ...], variants: tuple[str, ...] = tuple(VARIANTS)
) -> list[Figure]:
    per_run: list[dict[tuple[str, str], dict[str, float]]] = []
    steps: dict[str, list[list[float]]] = defaultdict(list)  # variant -> per run, median seconds per step
    work_times: list[dict[str, float]] = []
    with LocalCluster(work / "overhead-cluster", controller=True) as cluster:
        stamps = Stamps()
        jobs = Watch(cluster, f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{NAMESPACE}/genericjobs",
                     stamps.on_job)  # fmt: skip
        pods = Watch(cluster, f"/api/v1/namespaces/{NAMESPACE}/pods", stamps.on_pod)
        for w in (jobs, pods):
            w.start()
            w.ready.wait(10)
        try:
            for run in range(runs):
                stamps.clear()
                work_time = {w: work_seconds(w) for w in works}
                spec = {"variants": list(variants), "works": list(works), "rounds": rounds}
                per_task = 40.0 + (25.0 if "sleep20" in works else 0.0)
                tasks = run_dag(cluster, work / f"overhead-{run}", spec, 300 + per_task * len(plan(spec)))
                per_run.append(summarize(tasks, work_time))
                work_times.append(work_time)
                for variant in variants:
                    if VARIANTS[variant][0] != "GenericJobOperator":
                        continue
                    ours = [
                        t
                        for t in tasks
                        if (t["variant"], t["work"], t["state"]) == (variant, "pass", "success")
                    ]
                    rows = [stamps.steps(t["task"], t["start"], t["end"]) for t in ours]
                    complete = [r for r in rows if r is not None]
                    if complete:
                        steps[variant].append([statistics.median(col) for col in zip(*complete, strict=True)])
                progress(f"overhead run {run + 1}/{runs} done ({len(tasks)} tasks)")
        finally:
            jobs.stop()
            pods.stop()
    return figures(per_run, steps, work_times, rounds, works, variants)


def figures(
    per_run: list[dict[tuple[str, str], dict[str, float]]],
    steps: dict[str, list[list[float]]],
    work_times: list[dict[str, float]],
    rounds: int,
    works: tuple[str, ...],
    variants: tuple[str, ...],
) -> list[Figure]:
    out: list[Figure] = []
    for work in works:
        label = "`python3 -c pass`" if work == "pass" else "a 20 s sleep"
        out.append(Figure(SECTION, f"{label}: the work's own time, run directly", "s",
                          [w[work] for w in work_times], digits=3))  # fmt: skip
        for variant in variants:
            operator, deferrable = VARIANTS[variant]
            name = f"{label}, {operator}, {MODES[deferrable]}"
            target = ("<=", 1.0) if operator == "GenericJobOperator" else None
            rows = [r[(work, variant)] for r in per_run]
            out += [
                Figure(SECTION, f"{name}: overhead, median of {rounds} tasks", "s",
                       [r["median"] for r in rows], target, digits=2, zero_ok=True),
                Figure(SECTION, f"{name}: overhead, p90", "s", [r["p90"] for r in rows], digits=2,
                       zero_ok=True),
                Figure(SECTION, f"{name}: overhead, p90 - p10 within a run", "s",
                       [r["p90"] - r["p10"] for r in rows], digits=2, zero_ok=True),
                Figure(SECTION, f"{name}: API requests per task by the Airflow process", "requests",
                       [r["airflow_requests"] for r in rows], digits=0),
                Figure(SECTION, f"{name}: API requests per task, all clients (controller, kubelet...)",
                       "requests", [r["all_requests"] for r in rows], digits=0),
            ]  # fmt: skip
        for deferrable, mode in MODES.items():
            ours = [v for v in variants if VARIANTS[v] == ("GenericJobOperator", deferrable)]
            theirs = [
                v for v in variants if VARIANTS[v][0] != "GenericJobOperator" and VARIANTS[v][1] == deferrable
            ]
            if not ours or not theirs:
                continue
            ratios = [
                r[(work, ours[0])]["median"] / min(r[(work, v)]["median"] for v in theirs) for r in per_run
            ]
            name = f"{label}, {mode}: T9k overhead / best cncf operator's (same run)"
            out.append(Figure(SECTION, name, "x", ratios, ("<=", 0.2), digits=2))
    for variant, per_step in steps.items():
        operator, deferrable = VARIANTS[variant]
        for i, (step, _) in enumerate(STEPS):
            out.append(Figure(SECTION, f"{operator} {MODES[deferrable]}, `python3 -c pass`: {step}", "s",
                              [run[i] for run in per_step], digits=3, zero_ok=True))  # fmt: skip
    return out
