"""Issue 14.3: `make demo`'s wall time, and where it goes, against the work's own time.

Each sample is one warm `make demo` (after a warm-up run in the same demo home: Airflow's database migrated,
bytecode cached; the cluster is new in every run, as the demo makes it) with its own `--home`, timed from
the command's start to its exit. The breakdown comes from the demo's own output (each line stamped when it
arrives) and the timestamps of `airflow dags test`'s log (`dags-test.log`). The work's own time is the same
three workload scripts run directly on the host in the same order, with the same arguments (two training
ranks at once), right after each demo run: what the pipeline would take without Airflow, Kubernetes or the
cluster.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from benchmarks.stats import Figure
from t9k_provider.local.kubelet.podenv import pod_path

SECTION = "11. Pipeline wall time (`make demo`)"
REPO = Path(__file__).resolve().parent.parent
WORKLOADS = REPO / "dags_examples" / "workloads"
TASKS = ("prepare_data", "train", "evaluate", "wait_for_evaluation", "report")
#: The pipeline's consecutive stretches: (first task, last task).
SPANS = (("prepare_data",), ("train",), ("evaluate", "wait_for_evaluation"), ("report",))
#: The tasks that run a workload script, with its arguments (``{d}``: the run's data directory).
WORKS = {
    "prepare_data": [["prepare_data.py", "--out", "{d}/dataset"]],
    "train": [["train_ddp.py", "--data", "{d}/dataset", "--out", "{d}/model", "--epochs", "8"]] * 2,
    "evaluate": [["evaluate.py", "--data", "{d}/dataset", "--model", "{d}/model", "--out", "{d}/eval"]],
}
DEMO_TIMEOUT = 600
TARGET_SECONDS = 25.0

OUTPUT_DIR = re.compile(r"\(output in (\S+)/\)")
LOG_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z ")
TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(\S+)")
TASK_END = re.compile(r"\[DAG TEST\] end task task_id=(\S+)")


@dataclass
class DemoRun:
    """One `make demo`: epoch seconds of its milestones, and each task's first start and last end."""

    started: float
    ended: float
    cluster_requested: float
    cluster_up: float
    airflow_launched: float
    airflow_first_log: float
    first_task: float
    api_ready: float  # the in-process execution API answered the first task's start
    run_finished: float
    airflow_exited: float  # the demo printed its summary's first line, after reading Airflow's database
    cluster_stopping: float
    tasks: dict[str, tuple[float, float]] = field(default_factory=dict)

    def wall(self, first: str, last: str | None = None) -> float:
        return self.tasks[last or first][1] - self.tasks[first][0]


def _demo_env(home: Path) -> dict[str, str]:
    # `python -m benchmarks` keeps its children's bytecode in its work dir; the demo is measured as a user
    # runs it, with the interpreter's own bytecode cache.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    return {**env, "T9K_DEMO_HOME": str(home)}


def run_demo(home: Path) -> tuple[DemoRun, str]:
    """`make demo` with its home in ``home``; its milestones and its summary (from the `====` line on)."""
    stamped: list[tuple[float, str]] = []
    started = time.time()
    with subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(REPO), "demo"],
        env=_demo_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            stamped.append((time.time(), line))
            if time.time() - started > DEMO_TIMEOUT:
                proc.kill()
                raise RuntimeError(f"make demo took over {DEMO_TIMEOUT} s")
        rc = proc.wait()
    ended = time.time()
    output = "".join(line for _, line in stamped)
    if rc != 0:
        raise RuntimeError(f"make demo failed (exit {rc}):\n{output[-3000:]}")

    def arrival(marker: str) -> float:
        return next(t for t, line in stamped if marker in line)

    logs = Path(next(m[1] for _, line in stamped if (m := OUTPUT_DIR.search(line))))
    run = DemoRun(
        started=started,
        ended=ended,
        cluster_requested=arrival("starting the local cluster"),
        cluster_up=arrival("local cluster up in"),
        airflow_launched=arrival("running `airflow dags test"),
        airflow_exited=arrival("===="),
        cluster_stopping=arrival("stopping the local cluster"),
        **_airflow_milestones(logs / "dags-test.log"),
    )
    return run, output[output.index("====") :]


def _airflow_milestones(log: Path) -> dict:
    stamps: list[tuple[float, str]] = []
    for line in log.read_text().splitlines():
        if m := LOG_STAMP.match(line):
            stamps.append((datetime.fromisoformat(m[1] + "+00:00").timestamp(), line))
    tasks: dict[str, tuple[float, float]] = {}
    for t, line in stamps:
        if m := TASK_START.search(line):
            tasks[m[1]] = (tasks.get(m[1], (t, t))[0], t)
        elif m := TASK_END.search(line):
            tasks[m[1]] = (tasks[m[1]][0], t)
    if sorted(tasks) != sorted(TASKS):
        raise RuntimeError(f"unexpected tasks in {log}: {sorted(tasks)}")

    def first(marker: str) -> float:
        return next(t for t, line in stamps if marker in line)

    return {
        "airflow_first_log": stamps[0][0],
        "first_task": first("[DAG TEST] starting task_id="),
        "api_ready": first("Task started"),
        "run_finished": first("DagRun Finished"),
        "tasks": tasks,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_works() -> dict[str, float]:
    """Each task's workload run directly (the training's two ranks at once): seconds per task."""
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="t9k-demo-work-") as data:
        for task, commands in WORKS.items():
            port = str(_free_port())
            began = time.perf_counter()
            procs = []
            for rank, args in enumerate(commands):
                env = {
                    "PATH": pod_path(),  # the interpreter the pods run
                    "HOME": os.environ.get("HOME", "/root"),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": port,
                    "RANK": str(rank),
                    "WORLD_SIZE": str(len(commands)),
                }
                argv = ["python", *(a.format(d=data) for a in args)]
                procs.append(subprocess.Popen(argv, cwd=WORKLOADS, env=env, stdout=subprocess.DEVNULL))
            if any(p.wait(timeout=300) != 0 for p in procs):
                raise RuntimeError(f"the {task} workload failed when run directly")
            seconds[task] = time.perf_counter() - began
    return seconds


def measure(runs: int, work: Path) -> list[Figure]:
    home = work / "demo-home"
    run_demo(home)  # warm-up: migrates the demo's Airflow database, caches bytecode
    samples: list[tuple[DemoRun, dict[str, float]]] = []
    for _ in range(runs):
        demo, _summary = run_demo(home)
        samples.append((demo, run_works()))
    return figures(samples)


def figures(samples: list[tuple[DemoRun, dict[str, float]]]) -> list[Figure]:
    def fig(name: str, values: list[float], **kw: object) -> Figure:
        return Figure(SECTION, name, "s", values, digits=2, **kw)  # type: ignore[arg-type]

    demos = [d for d, _ in samples]
    works = [w for _, w in samples]
    out = [
        fig("`make demo` wall time", [d.ended - d.started for d in demos], target=("<", TARGET_SECONDS)),
        fig("the work's own time (the three workloads run directly)", [sum(w.values()) for w in works]),
        Figure(SECTION, "wall time / work's own time", "x",
               [(d.ended - d.started) / sum(w.values()) for d, w in samples], digits=1),
        fig("demo start-up (make, the script's imports)", [d.cluster_requested - d.started for d in demos]),
        fig("cluster start (`t9k-local up`)", [d.cluster_up - d.cluster_requested for d in demos]),
        fig("cluster up -> `airflow dags test` launched", [d.airflow_launched - d.cluster_up for d in demos],
            zero_ok=True),
        fig("Airflow start: CLI import", [d.airflow_first_log - d.airflow_launched for d in demos]),
        fig("Airflow start: DAG parse, DAG run created", [d.first_task - d.airflow_first_log for d in demos]),
        fig("Airflow start: in-process execution API (in the first task)",
            [d.api_ready - d.first_task for d in demos]),
    ]  # fmt: skip
    api = [d.api_ready - d.first_task for d in demos]
    spans = {
        "prepare_data": [d.wall("prepare_data") - a for d, a in zip(demos, api, strict=True)],
        "train": [d.wall("train") for d in demos],
        "evaluate": [d.wall("evaluate", "wait_for_evaluation") for d in demos],
    }
    for task, walls in spans.items():
        label = "evaluate + wait_for_evaluation (the sensor's tries and the wait between them)"
        name = label if task == "evaluate" else f"task {task}"
        out += [
            fig(f"{name}: wall", walls),
            fig(f"{name}: its work run directly", [w[task] for w in works]),
            fig(
                f"{name}: overhead (wall - work)",
                [a - w[task] for a, w in zip(walls, works, strict=True)],
                zero_ok=True,
            ),
        ]
    out += [
        fig("task report: wall", [d.wall("report") for d in demos]),
        fig("gaps between tasks (dag.test's loop)",
            [d.run_finished - d.first_task - sum(d.wall(*span) for span in SPANS) for d in demos],
            zero_ok=True),
        fig("DAG run finished -> Airflow exited", [d.airflow_exited - d.run_finished for d in demos]),
        fig("summary (reads the pods' logs)", [d.cluster_stopping - d.airflow_exited for d in demos]),
        fig("cluster stop (`t9k-local down`)", [d.ended - d.cluster_stopping for d in demos]),
    ]  # fmt: skip
    return out


def main() -> None:
    import argparse

    from benchmarks import machine

    parser = argparse.ArgumentParser(description="time `make demo` and print its breakdown")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, required=True)
    args = parser.parse_args()
    print(f"load before: {machine.load_average()}", flush=True)
    for f in measure(args.runs, args.work_dir):
        print(f"{f.name}: {f.fmt(f.median)} {f.unit} ({f.fmt(f.low)}-{f.fmt(f.high)})", flush=True)
    print(f"load after: {machine.load_average()}", flush=True)


if __name__ == "__main__":
    main()
