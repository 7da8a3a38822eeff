"""``python -m benchmarks``: run the benchmarks and rewrite ``docs/benchmarks.md``.

By default every section but the opt-in ones (``OPT_IN``: the per-task overhead against the cncf operators,
the controller at 2,000 and at 10,000 jobs and the triggerer's capacity, each over ten minutes, live logs
with 200 deferred tasks, leader failover, which kills 20 leaders, the timing of ``make demo``, which
needs root, and the soak, ``make soak``) runs, so that ``make bench`` stays under 15 minutes; ``--only NAME``
runs just the named ones.
A section not run keeps its last figures: it is copied from the report being replaced, with its own date,
commit and load. ``--quick`` runs each benchmark in a tiny configuration (the smoke test of ``make test``);
it writes its report elsewhere (``--output``) and its figures mean nothing. The report is rewritten after each
section. The run fails (exit 1) when a section fails: a measurement is implausible (see ``stats.check``), a
section finds a broken invariant (the soak) or raises; that section keeps its last figures and the next one
runs. A missed target is reported, not failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks import (
    controller_capacity,
    controller_efficiency,
    controller_scale,
    dag_parse,
    demo_pipeline,
    disruptions,
    failover,
    live_logs,
    local_cluster,
    machine,
    report,
    soak,
    task_overhead,
    triggerer_capacity,
    waiting_cost,
)
from benchmarks.controller_metrics import controller_process
from benchmarks.manifests import KIND_ORDER
from benchmarks.stats import Figure, check
from t9k_provider.testing import LocalCluster

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Profile:
    runs: int
    kinds: tuple[str, ...]
    job_seconds: float
    durations: tuple[float, float]
    bursts: tuple[int, ...]
    resident_jobs: int
    waiting_tasks: int
    poll: float
    window: float
    objects: int
    creates: int
    watch_events: int
    log_writes: int
    overhead_rounds: dict[str, int]  # tasks of each variant per work (benchmarks.overhead_dag.WORKS)
    works: tuple[str, ...]  # what the overhead tasks run
    scale_jobs: int  # jobs x 4 pods held by the controller in section 8 (section 9: FULL_SCALE_JOBS)
    arrival_seconds: float  # how long jobs arrive at ARRIVAL_RATE per run
    failover_kills: int  # leader pods deleted, and as many SIGKILLed, in section 10
    triggerer_tasks: int  # deferred tasks on the one triggerer of section 12
    triggerer_window: float  # its quiet window (CPU, RSS) in seconds
    triggerer_spread: float  # seconds over which its second set of jobs finishes
    parse_sizes: dag_parse.Sizes  # how much section 5 samples per run
    triggerer_pace: triggerer_capacity.Pace  # section 12's log lines and quiet time
    cncf_poll: float | None  # section 7's cncf operators poll this often (None: their defaults)
    soak: soak.Plan  # one round of section 13 (``runs`` rounds, a fresh cluster each)


FULL = Profile(
    runs=3, kinds=KIND_ORDER, job_seconds=1.0, durations=(2.0, 12.0), bursts=(1, 50, 200), resident_jobs=1000,
    waiting_tasks=200, poll=10.0, window=20.0, objects=10_000, creates=500, watch_events=200,
    log_writes=100_000, overhead_rounds={"pass": 10, "sleep20": 3}, works=("pass",), scale_jobs=2000,
    arrival_seconds=15.0, failover_kills=10,
    triggerer_tasks=1000, triggerer_window=60.0, triggerer_spread=30.0, parse_sizes=dag_parse.Sizes(),
    triggerer_pace=triggerer_capacity.Pace(), cncf_poll=None, soak=soak.FULL_PLAN,
)  # fmt: skip
QUICK = Profile(
    runs=1, kinds=("GenericJob",), job_seconds=0.2, durations=(1.0, 2.0), bursts=(1, 3), resident_jobs=4,
    waiting_tasks=3, poll=0.5, window=1.5, objects=60, creates=20, watch_events=10, log_writes=1_500,
    overhead_rounds={"pass": 1, "sleep20": 1}, works=("pass",), scale_jobs=20, arrival_seconds=1.0,
    failover_kills=1, triggerer_tasks=3, triggerer_window=1.5, triggerer_spread=1.0,
    parse_sizes=dag_parse.QUICK_SIZES, triggerer_pace=triggerer_capacity.QUICK_PACE, cncf_poll=1.0,
    soak=soak.QUICK_PLAN,
)  # fmt: skip
FULL_SCALE_JOBS = 10_000


def controller_benchmarks(p: Profile, work: Path) -> list[Figure]:
    """Sections 1 and 2 share one cluster with the simulated kubelet (different namespaces)."""
    # thousands of simulated pods on the one node: room for all, as the benchmark measures the controller
    cluster_dir = work / "controller-cluster"
    with LocalCluster(cluster_dir, kubelet="simulated", capacity={"max_pods": "100000"}) as cluster:
        with controller_process(cluster.kubeconfig, work / "controller-efficiency.log") as controller:
            figures = controller_efficiency.measure(
                cluster, controller, p.runs, p.kinds, p.job_seconds, p.durations
            )
        figures += controller_scale.measure(cluster, work, p.runs, p.bursts, p.resident_jobs)
    return figures


def waiting_benchmark(p: Profile, work: Path) -> list[Figure]:
    with LocalCluster(work / "waiting-cluster", node_agents=False) as cluster:
        return waiting_cost.measure(cluster, work, p.runs, p.waiting_tasks, p.poll, p.window)


def live_logs_benchmark(p: Profile, work: Path) -> list[Figure]:
    with LocalCluster(work / "live-logs-cluster", node_agents=False) as cluster:
        return live_logs.measure(cluster, work, p.runs, p.waiting_tasks, p.poll, p.window)


def triggerer_benchmark(p: Profile, work: Path) -> list[Figure]:
    with LocalCluster(work / "triggerer-cluster", node_agents=False) as cluster:
        return triggerer_capacity.measure(
            cluster, work, p.runs, p.triggerer_tasks, p.triggerer_window, p.triggerer_spread, p.triggerer_pace
        )


SECTIONS: dict[str, Callable[[Profile, Path], list[Figure]]] = {
    "controller": controller_benchmarks,
    "waiting": waiting_benchmark,
    "local": lambda p, work: local_cluster.measure(
        p.runs, p.objects, p.creates, p.watch_events, p.log_writes
    ),
    "dags": lambda p, work: dag_parse.measure(p.runs, p.parse_sizes),
    "livelogs": live_logs_benchmark,
    "overhead": lambda p, work: task_overhead.measure(
        work, p.overhead_rounds, p.works, cncf_poll=p.cncf_poll
    ),
    "scale": lambda p, work: controller_capacity.measure(work, p.runs, p.scale_jobs, p.arrival_seconds),
    "scale-full": lambda p, work: controller_capacity.measure(
        work, p.runs, FULL_SCALE_JOBS, p.arrival_seconds, full=True
    ),
    "failover": lambda p, work: failover.measure(work, p.failover_kills),
    "demo": lambda p, work: demo_pipeline.measure(p.runs, work),
    "triggerer": triggerer_benchmark,
    "soak": lambda p, work: soak.measure(work, p.soak, p.runs),
    "disruptions": lambda p, work: disruptions.measure(work, p.runs),
}
#: Heavy sections: run only when named with --only (their last figures stay in the report otherwise). The
#: demo's runs take only about 3 minutes but need root (its pods' namespaces); the soak is `make soak`.
OPT_IN = {
    "livelogs", "overhead", "scale", "scale-full", "failover", "demo", "triggerer", "soak", "disruptions",
}  # fmt: skip


#: What a task process imports for its first T9k task, the Kubernetes clients among them.
TASK_IMPORTS = (
    "airflow.sdk",
    "t9k_provider.operators",
    "t9k_provider.hooks.t9k",
    "t9k_provider.operators.worker_wait",
    "t9k_provider.operators.outcome",
    "t9k_provider.triggers.job",
)


def cache_bytecode() -> None:
    """Child interpreters cache their bytecode as Python does by default (next to the sources, or where
    PYTHONPYCACHEPREFIX already says, as under the tests), and what a task imports is compiled now, as an
    installer compiles what it installs.

    This machine sets PYTHONDONTWRITEBYTECODE, so every benchmark process would otherwise compile every module
    it imports (seconds of CPU for each Airflow import), which no production process pays. A cache of the
    run's own (as the benchmarks once kept in their work dir) made the first T9k task of every run compile
    the Kubernetes clients: 1.4 s above the others, which no installed provider pays either.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", f"import {', '.join(TASK_IMPORTS)}"], check=True)


def run_sections(
    only: list[str] | None,
    profile: Profile,
    work: Path,
    figures: list[Figure],
    timeline: list[tuple[str, float, str]],
    stamps: dict[str, str],
    save: Callable[[], None],
) -> bool:
    """Runs the chosen sections, appending to ``figures``, ``timeline`` and ``stamps`` (when, at which
    commit and under which load each section was measured) and calling ``save`` after each, so a fault in a
    late section of a two-hour run keeps what the earlier ones measured; True when a section failed (its
    figures are left out and the next section runs)."""
    commit = machine.describe()["commit"]
    failed = False
    for name, section in SECTIONS.items():
        if (only and name not in only) or (not only and name in OPT_IN):
            continue
        began = time.perf_counter()
        load_before = machine.load_average()
        print(f"[bench] {name} ...", flush=True)
        try:
            section_figures = section(profile, work)
            check(section_figures, profile.runs)
        except Exception:  # any fault in one section must not lose the others' figures
            print(f"[bench] {name} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            failed = True
            continue
        figures += section_figures
        timeline.append((name, time.perf_counter() - began, machine.load_average()))
        for title in {f.section for f in section_figures}:
            stamps[title] = (
                f"Measured {machine.describe()['date']} at commit {commit} (`python -m benchmarks --only "
                f"{name}`, {(time.perf_counter() - began) / 60:.1f} min); load average (1 / 5 / 15 min) "
                f"{load_before} at its start, {machine.load_average()} at its end."
            )
        print(f"[bench] {name} done in {time.perf_counter() - began:.0f} s", flush=True)
        for f in section_figures:
            print(f"    {f.name}: {f.fmt(f.median)} {f.unit} ({f.fmt(f.low)}-{f.fmt(f.high)})", flush=True)
        save()
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny configuration (smoke test)")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(SECTIONS),
        help=f"run only these (repeatable); {', '.join(sorted(OPT_IN))} run only when named here",
    )
    parser.add_argument(
        "--all", action="store_true", help="every section, the heavy ones too (about 90 minutes on 2 cores)"
    )
    parser.add_argument(
        "--long-tasks", action="store_true", help="overhead: also run tasks whose work sleeps 20 s"
    )
    parser.add_argument("--output", type=Path, help=f"report path (default {DOC}; required with --quick)")
    parser.add_argument("--work-dir", type=Path, help="keep clusters and logs here (default: a temp dir)")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.all and args.only:
        parser.error("--all and --only exclude each other")
    if args.all:
        args.only = list(SECTIONS)
    if args.quick and args.output is None:
        parser.error("--quick needs --output: its figures must not replace docs/benchmarks.md")
    profile = QUICK if args.quick else FULL
    if args.long_tasks:
        profile = replace(profile, works=(*profile.works, "sleep20"))
    output = args.output or DOC
    timeline = [("start", 0.0, machine.load_average())]
    started = time.perf_counter()
    figures: list[Figure] = []
    stamps: dict[str, str] = {}
    saved_env = dict(os.environ)
    shown = (
        (["--all"] if args.all else [f"--only {name}" for name in args.only or []])
        + ["--quick"] * args.quick
        + ["--long-tasks"] * args.long_tasks
    )
    command = f"python -m benchmarks {' '.join(shown)}" if shown else "make bench"
    previous = output.read_text() if output.exists() else ""

    def save() -> None:
        text = report.render(
            figures,
            machine.describe(),
            profile.runs,
            time.perf_counter() - started,
            timeline,
            command,
            stamps,
            previous,
        )
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
        print(f"[bench] wrote {output} after {(time.perf_counter() - started) / 60:.1f} min", flush=True)

    with tempfile.TemporaryDirectory(prefix="t9k-bench-") as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        cache_bytecode()
        try:
            failed = run_sections(args.only, profile, work, figures, timeline, stamps, save)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
    return 1 if failed else 0
