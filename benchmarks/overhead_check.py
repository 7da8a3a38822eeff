"""``python -m benchmarks.overhead_check`` (``make bench-check``): section 7's overhead in under a minute,
beside the figures in ``docs/benchmarks.md``, so a regression of the per-task overhead is seen the day it
happens.

A fresh local cluster (real controller, process kubelet) and a fresh Airflow run the overhead DAG under
``dag.test()`` (``benchmarks.overhead_dag``, as section 7's first half) with only the T9k variants, a few
rounds of ``python3 -c pass``: ``GenericJobOperator`` non-deferrable and deferrable at their defaults.
Printed per variant: the median overhead per task and the pod's start (bound -> Succeeded) less the work's
own time, each with the figure of the report and their ratio, the first T9k task of the fresh cluster against
the others (with what importing the API client costs it: this DAG file holds no cncf operator, whose
import would load aiohttp at parse too), and the load average, which the figures follow on a shared machine.
The exit status is 1 when a ratio exceeds ``--max-ratio`` (a regression, or a busy machine: rerun on a
quieter one before believing it).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import machine
from benchmarks.overhead_dag import VARIANTS
from benchmarks.run import DOC, cache_bytecode
from benchmarks.task_overhead import STEPS, run_dag, stamped_cluster, step_rows, work_seconds

#: The variants measured, each against its row in section 7.
CHECKED = ("t9k", "t9k-deferrable")
#: Index of the pod's start (bound -> pod Succeeded) in ``task_overhead.STEPS``.
POD_START = next(i for i, (_, stamp) in enumerate(STEPS) if stamp == "pod_done")


def reported(doc: str, variant: str) -> tuple[float | None, float | None]:
    """Section 7's medians for ``variant`` under ``dag.test()``: its overhead per task and its pod's start
    (bound -> Succeeded) less the work's own time, as the report holds them (None: not found)."""
    title = re.escape(VARIANTS[variant].title)
    prefix = r"\| dag\.test\(\), `python3 -c pass`"

    def median(pattern: str) -> float | None:
        found = re.search(pattern + r"[^|]*\| ([\d.]+) \|", doc)
        return float(found[1]) if found else None

    overhead = median(rf"{prefix}, {title}: overhead per task")
    pod = median(rf"\| dag\.test\(\), {title}, `python3 -c pass`: bound -> pod Succeeded")
    work = median(rf"{prefix}: the work's own time, run directly")
    return overhead, None if pod is None or work is None else pod - work


#: What a task process imports on its first T9k task that parsing the DAG file did not (the Kubernetes
#: clients: section 7's DAG file, which holds the cncf operators too, imports them at parse).
FIRST_IMPORTS = """
import time
import airflow.sdk
from t9k_provider.operators import GenericJobOperator
from t9k_provider.kube.importing import collector_spared
began = time.perf_counter()
with collector_spared("t9k_provider.hooks.t9k"):  # as the operator's hook imports them
    import t9k_provider.hooks.t9k
import t9k_provider.operators.worker_wait, t9k_provider.operators.outcome
print(time.perf_counter() - began)
"""


def first_imports() -> float:
    """Seconds a fresh interpreter takes to import what the first T9k task of a process imports."""
    out = subprocess.run([sys.executable, "-c", FIRST_IMPORTS], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def measure(work: Path, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Per variant: the overhead of each task and its pod's start less the work's own time; ``first``: the
    first T9k task's overhead (the fresh cluster's first pod) and ``work``: the work's own time."""
    with stamped_cluster(work / "cluster") as (cluster, stamps):
        spec = {"variants": list(CHECKED), "works": ["pass"], "rounds": {"pass": rounds}, "cncf_poll": None}
        tasks = run_dag(cluster, work / "dag", spec)
        own = statistics.median(work_seconds("pass"))
        steps = step_rows(stamps, tasks, CHECKED)
    done = sorted((t for t in tasks if t["state"] == "success"), key=lambda t: t["start"])
    out: dict[str, dict[str, list[float]]] = {"first": {"overhead": []}, "work": {"seconds": [own]}}
    for variant in CHECKED:
        mine = [t["end"] - t["start"] - own for t in done if t["variant"] == variant]
        rows = steps.get(variant, [])
        out[variant] = {"overhead": mine, "pod": [row[POD_START] - own for row in rows]}
        out[variant] |= {f"step{i}": [row[i] for row in rows] for i in range(len(STEPS))}
    if done:
        out["first"]["overhead"] = [done[0]["end"] - done[0]["start"] - own]
        out["first"]["others"] = [t["end"] - t["start"] - own for t in done[1:]]
        out["first"]["steps"] = stamps.steps(done[0]["task"], done[0]["start"], done[0]["end"]) or []
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overhead_check", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="tasks of each variant (default 5)")
    parser.add_argument("--max-ratio", type=float, default=1.5, help="fail above this ratio (default 1.5)")
    parser.add_argument("--report", type=Path, default=DOC, help=f"the figures compared with (default {DOC})")
    args = parser.parse_args(argv)
    doc = args.report.read_text() if args.report.exists() else ""
    began, load = time.perf_counter(), machine.load_average()
    with tempfile.TemporaryDirectory(prefix="t9k-bench-check-") as tmp:
        cache_bytecode()
        found = measure(Path(tmp), args.rounds)
    print(f"overhead check, {args.rounds} tasks per variant, work {found['work']['seconds'][0]:.3f} s; load "
          f"average {load} at its start, {machine.load_average()} at its end "
          f"({time.perf_counter() - began:.0f} s)")  # fmt: skip
    worst = 0.0
    for variant in CHECKED:
        for what, label in (("overhead", "overhead per task"), ("pod", "pod start less the work")):
            samples = found[variant][what]
            if not samples:
                print(f"  {VARIANTS[variant].title}: {label}: no sample (see the log above)")
                worst = float("inf")
                continue
            now = statistics.median(samples)
            then = reported(doc, variant)[0 if what == "overhead" else 1]
            ratio = now / then if then else float("nan")
            worst = max(worst, ratio) if then else worst
            versus = f"report {then:.3f} s, ratio {ratio:.2f}x" if then else "not in the report"
            print(f"  {VARIANTS[variant].title}: {label}: median {now:.3f} s "
                  f"({min(samples):.3f}-{max(samples):.3f}); {versus}")  # fmt: skip
    for variant in CHECKED:
        medians = [found[variant][f"step{i}"] for i in range(len(STEPS))]
        if all(medians):
            steps = ", ".join(f"{statistics.median(m):.3f}" for m in medians)
            print(f"  {VARIANTS[variant].title}: steps (medians, s; as section 7's breakdown): {steps}")
    first, others = found["first"].get("overhead"), found["first"].get("others")
    if first and others:
        gap = first[0] - statistics.median(others)
        print(f"  first T9k task of the fresh cluster: {first[0]:.3f} s, {gap:+.3f} s against the others")
        for (step, _), seconds in zip(STEPS, found["first"]["steps"], strict=False):
            print(f"    {step}: {seconds:.3f} s")
        print(f"    (of it, importing the API client: {first_imports():.3f} s in a fresh interpreter)")
    if worst > args.max_ratio:
        print(
            f"overhead check: {worst:.2f}x the report (> {args.max_ratio}x): a regression or a busy machine"
        )
        return 1
    print(f"overhead check: within {args.max_ratio}x of the report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
