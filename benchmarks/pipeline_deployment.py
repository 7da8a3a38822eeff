"""``python -m benchmarks.pipeline_deployment``: the example training pipeline in a real Airflow deployment.

Runs ``dags_examples/t9k_training_pipeline.py`` several times in a row (each run starts when the previous one
has finished) on the local cluster with the controller, in the deployment of ``benchmarks.airflow_deployment``
(separate scheduler, triggerer, DAG processor and API server; LocalExecutor; every operator deferrable, as
``[operators] default_deferrable = True`` makes it). For each run it reports, from the REST API and the jobs'
own status:

* the run's wall time (the DAG run's start to end) and its failed tries (every try of a task but the one that
  succeeded: what Airflow's races and lost workers cost);
* per task: its tries, its final try's wall time and, for a task that ran a T9k Job, that job's own time
  (created to completed) and the difference, the cost of submitting, deferring and resuming;
* the gaps the scheduler leaves between a task's end and the next task's start.

It prints a Markdown report and, with ``--output``, writes the figures as JSON. Takes 1-3 minutes per run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.airflow_deployment import AirflowDeployment
from t9k_provider.jobs import GROUP, KINDS, VERSION
from t9k_provider.testing import LocalCluster
from t9k_provider.waiting import status as job_status

REPO = Path(__file__).resolve().parent.parent
PIPELINE = REPO / "dags_examples" / "t9k_training_pipeline.py"
DAG_ID = "t9k_training_pipeline"
#: What the operators annotate their jobs with (``t9k_provider.jobclient.identity``, which imports Airflow).
RUN_ID_ANNOTATION = "airflow.apache.org/run-id"
TASK_ID_ANNOTATION = "airflow.apache.org/task-id"
PLURALS = (KINDS["GenericJob"].PLURAL, KINDS["PyTorchTrainingJob"].PLURAL)
RUN_TIMEOUT = 1800


@dataclass
class TaskFigures:
    task_id: str
    state: str
    tries: int
    seconds: float | None
    job_seconds: float | None

    @property
    def overhead(self) -> float | None:
        if self.seconds is None or self.job_seconds is None:
            return None
        return self.seconds - self.job_seconds


@dataclass
class RunFigures:
    run_id: str
    state: str
    seconds: float
    tasks: list[TaskFigures]
    gaps: list[float]

    @property
    def failed_tries(self) -> int:
        """Every try but the one that succeeded; all tries of a task that did not succeed."""
        return sum(t.tries - (t.state == "success") for t in self.tasks)


def _seconds(start: str | None, end: str | None) -> float | None:
    began, ended = job_status.parse_time(start), job_status.parse_time(end)
    return (ended - began).total_seconds() if began and ended else None


def jobs_of_run(cluster: LocalCluster, run_id: str) -> dict[str, dict[str, Any]]:
    """task id -> the job it ran in this DAG run."""
    found: dict[str, dict[str, Any]] = {}
    for plural in PLURALS:
        status, _, body = cluster.request("GET", f"/apis/{GROUP}/{VERSION}/namespaces/default/{plural}")
        if status != 200:
            raise RuntimeError(f"listing {plural}: HTTP {status}: {body}")
        for job in body["items"]:
            annotations = job["metadata"].get("annotations") or {}
            if annotations.get(RUN_ID_ANNOTATION) == run_id:
                found[annotations[TASK_ID_ANNOTATION]] = job
    return found


def measure_run(airflow: AirflowDeployment, cluster: LocalCluster, run_id: str) -> RunFigures:
    run = airflow.wait_for_run(DAG_ID, run_id, RUN_TIMEOUT)
    jobs = jobs_of_run(cluster, run_id)
    instances = sorted(airflow.task_instances(DAG_ID, run_id), key=lambda ti: ti["start_date"] or "")
    tasks = []
    for ti in instances:
        job = jobs.get(ti["task_id"])
        job_seconds = None
        if job is not None:
            job_seconds = _seconds(job["metadata"]["creationTimestamp"], job["status"].get("completionTime"))
        tasks.append(
            TaskFigures(
                task_id=ti["task_id"],
                state=ti["state"],
                tries=ti["try_number"],
                seconds=_seconds(ti["start_date"], ti["end_date"]),
                job_seconds=job_seconds,
            )
        )
    gaps = [
        gap
        for before, after in itertools.pairwise(instances)
        if (gap := _seconds(before["end_date"], after["start_date"])) is not None
    ]
    return RunFigures(
        run_id=run_id,
        state=run["state"],
        seconds=_seconds(run["start_date"], run["end_date"]) or 0.0,
        tasks=tasks,
        gaps=gaps,
    )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def report(runs: list[RunFigures], started: datetime) -> str:
    lines = [
        f"# {DAG_ID} in a real Airflow deployment ({started:%Y-%m-%d %H:%M} UTC)",
        "",
        "| Run | State | Wall time (s) | Failed tries | Tries per task | Scheduler gaps (s) |",
        "|---|---|---|---|---|---|",
    ]
    for i, run in enumerate(runs, 1):
        tries = ", ".join(f"{t.task_id} {t.tries}" for t in run.tasks)
        gaps = ", ".join(_fmt(g) for g in run.gaps)
        lines.append(f"| {i} | {run.state} | {run.seconds:.1f} | {run.failed_tries} | {tries} | {gaps} |")
    seconds = [run.seconds for run in runs]
    lines += [
        "",
        f"Wall time: median {statistics.median(seconds):.1f} s, min {min(seconds):.1f} s, "
        f"max {max(seconds):.1f} s; failed tries in all: {sum(run.failed_tries for run in runs)}.",
        "",
        "| Task | Task time (s), per run | Job time (s), per run | Task minus job (s), median |",
        "|---|---|---|---|",
    ]
    for task_id in [t.task_id for t in runs[0].tasks]:
        figures = [t for run in runs for t in run.tasks if t.task_id == task_id]
        overheads = [o for t in figures if (o := t.overhead) is not None]
        lines.append(
            f"| {task_id} | {', '.join(_fmt(t.seconds) for t in figures)} "
            f"| {', '.join(_fmt(t.job_seconds) for t in figures)} "
            f"| {_fmt(statistics.median(overheads)) if overheads else '-'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=8, help="the pipeline's `epochs` param")
    parser.add_argument(
        "--work", type=Path, help="where cluster, AIRFLOW_HOME and data go (default: a temp dir)"
    )
    parser.add_argument("--output", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="t9k-pipeline-deployment-"))
    dags = work / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    # The pipeline alone (its workloads are found through the link): the DAG processor parses nothing else.
    (dags / PIPELINE.name).symlink_to(PIPELINE)
    started = datetime.now(timezone.utc)
    print(f"work directory: {work}", flush=True)
    runs: list[RunFigures] = []
    with LocalCluster(work / "cluster", controller=True) as cluster:
        env = {"AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True", "T9K_DEMO_DATA_ROOT": str(work / "data")}
        with AirflowDeployment(work / "airflow", dags, cluster.kubeconfig, env=env) as airflow:
            airflow.wait_for_dags([DAG_ID])
            for i in range(1, args.runs + 1):
                begun = time.monotonic()
                run_id = airflow.trigger(DAG_ID, {"epochs": args.epochs})
                figures = measure_run(airflow, cluster, run_id)
                runs.append(figures)
                print(
                    f"run {i}/{args.runs}: {figures.state} in {figures.seconds:.1f} s "
                    f"({time.monotonic() - begun:.0f} s here), failed tries {figures.failed_tries}",
                    flush=True,
                )
    text = report(runs, started)
    print(text)
    if args.output:
        args.output.write_text(
            json.dumps([{**asdict(run), "failed_tries": run.failed_tries} for run in runs], indent=2)
        )
    return 0 if all(run.state == "success" for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
