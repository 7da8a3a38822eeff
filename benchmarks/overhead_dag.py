"""The Airflow side of the per-task overhead benchmark: one DAG of interleaved tasks, run by ``dag.test()``
here or by a real deployment (``task_overhead.run_deployment``).

``python -m benchmarks.overhead_dag SPEC_FILE`` (JSON: the cluster's kubeconfig, base URL and token, the
Airflow home, the variants, the works and the rounds per work). Airflow is configured through the environment
before it is imported, so the process is its own Airflow installation. Each round runs every (work, variant)
once, in an order rotated per round, so machine noise hits all variants alike. A ``PythonOperator`` between
two measured tasks reads the API server's request counters (``GET /_embedded/requests``, which is not counted
itself): the DAG is one chain, so the requests between two reads belong to the measured task between them
(the triggerer's included: its clients are tagged too, see ``client_env``). Prints one JSON line per measured
task.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Variant:
    """One operator configuration; all at their defaults but ``defer_at_once`` (``wait_before_defer=0``: the
    T9k operator defers right after submitting instead of following a short job to its end in the worker)."""

    operator: str
    deferrable: bool
    defer_at_once: bool = False

    @property
    def title(self) -> str:
        mode = "deferrable" if self.deferrable else "non-deferrable"
        return f"{self.operator}, {mode}" + (", wait_before_defer=0" if self.defer_at_once else "")


T9K = "GenericJobOperator"
VARIANTS = {
    "t9k": Variant(T9K, False),
    "t9k-deferrable": Variant(T9K, True),
    "t9k-defer-at-once": Variant(T9K, True, defer_at_once=True),
    "cncf-job": Variant("KubernetesJobOperator", False),
    "cncf-job-deferrable": Variant("KubernetesJobOperator", True),
    "cncf-pod": Variant("KubernetesPodOperator", False),
    "cncf-pod-deferrable": Variant("KubernetesPodOperator", True),
}
#: What each measured task runs, by name: the container's command after the interpreter.
WORKS = {"pass": ["-c", "pass"], "sleep20": ["-c", "import time; time.sleep(20)"]}
NAMESPACE = "default"
AGENT = "t9k-bench-airflow"
DAG_ID = "t9k_bench_overhead"
ROOT = Path(__file__).resolve().parent.parent
#: The folder of the ``sitecustomize`` that tags the Kubernetes clients of a process (``client_env``).
AGENT_DIR = ROOT / "benchmarks" / "agent"
DAG_FILE = """\
# An Airflow DAG file (the DAG processor's safe mode skips files that do not say so).
import os
from benchmarks.overhead_dag import build_dag

dag = build_dag(os.environ["T9K_BENCH_SPEC"])
"""
T9K_TASK_LABEL = "benchmark.t9k/task"


def client_env() -> dict[str, str]:
    """The environment under which every process started (Airflow components, task processes, ``dag.test()``)
    imports this repository and sends ``AGENT`` from each of its Kubernetes clients.

    The cluster's own components use the same client libraries, so their default User-Agents cannot tell
    the Airflow side's requests apart; only the header changes.
    """
    path = [str(AGENT_DIR), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(filter(None, path)), "T9K_BENCH_USER_AGENT": AGENT}


def write_dag_folder(dags: Path) -> Path:
    """A DAG folder whose one file builds this DAG from the spec file named by ``T9K_BENCH_SPEC``."""
    dags.mkdir(parents=True, exist_ok=True)
    (dags / "t9k_bench_overhead.py").write_text(DAG_FILE)
    return dags


def configure(spec: dict[str, Any], spec_file: str) -> None:
    """Airflow's home, database, connection and the DAG folder (``dag.test()`` runs only a DAG its DAG
    processor has parsed)."""
    home = Path(spec["airflow_home"])
    dags = write_dag_folder(home / "dags")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(
                [
                    {
                        "name": "dags-folder",
                        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                        "kwargs": {"path": str(dags), "refresh_interval": 0},
                    }
                ]
            ),
            "T9K_BENCH_SPEC": spec_file,
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
                {"conn_type": "kubernetes", "extra": {"kube_config_path": spec["kubeconfig"]}}
            ),
        }
    )


def request_counts(spec: dict[str, Any]) -> dict[str, int]:
    """Requests served so far by User-Agent (all accesses)."""
    host, port = spec["base_url"].removeprefix("https://").rsplit(":", 1)
    conn = http.client.HTTPSConnection(host, int(port), context=ssl._create_unverified_context(), timeout=30)
    conn.request("GET", "/_embedded/requests", headers={"Authorization": f"Bearer {spec['token']}"})
    rows = json.loads(conn.getresponse().read())["requests"]
    conn.close()
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["userAgent"]] = counts.get(row["userAgent"], 0) + int(row["count"])
    return counts


def measured_task(variant: str, work: str, task_id: str, cncf_poll: float | None = None) -> Any:
    """``cncf_poll``: the cncf operators' polling and start-up check intervals in seconds (their defaults
    when None; the smoke test shortens them, its figures mean nothing)."""
    v = VARIANTS[variant]
    operator, deferrable = v.operator, v.deferrable
    command = [sys.executable, *WORKS[work]]
    if operator == T9K:
        from t9k_provider.operators import GenericJobOperator

        body = {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "GenericJob",
            "metadata": {"labels": {T9K_TASK_LABEL: task_id}},
            "spec": {
                "replicaSpecs": [
                    {
                        "type": "worker",
                        "replicas": 1,
                        "restartPolicy": {"policy": "Never"},
                        "template": {"spec": {"containers": [
                            {"name": "main", "image": "python:3.11", "command": command}
                        ]}},
                    }
                ]
            },
        }  # fmt: skip
        extra = {"wait_before_defer": 0} if v.defer_at_once else {}
        return GenericJobOperator(
            task_id=task_id, manifest=body, namespace=NAMESPACE, deferrable=deferrable, **extra
        )
    if operator == "KubernetesJobOperator":
        from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator

        return KubernetesJobOperator(
            task_id=task_id, namespace=NAMESPACE, image="python:3.11", cmds=command[:1],
            arguments=command[1:], wait_until_job_complete=True, deferrable=deferrable,
            name=task_id.replace("_", "-"),
            **({} if cncf_poll is None else {"job_poll_interval": cncf_poll}),
        )  # fmt: skip
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    return KubernetesPodOperator(
        task_id=task_id, namespace=NAMESPACE, image="python:3.11", cmds=command[:1], arguments=command[1:],
        deferrable=deferrable, name=task_id.replace("_", "-"),
        **({} if cncf_poll is None else {"poll_interval": cncf_poll,
                                         "startup_check_interval_seconds": cncf_poll}),
    )  # fmt: skip


def plan(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(task_id, variant, work) in run order: every round runs each pair once, rotated by one per round.

    ``spec["rounds"]``: rounds per work; a work with fewer rounds than another stops taking part after them.
    """
    rounds = spec["rounds"]
    order = []
    for r in range(max(rounds[work] for work in spec["works"])):
        works = [work for work in spec["works"] if r < rounds[work]]
        pairs = [(work, variant) for work in works for variant in spec["variants"]]
        shift = r % len(pairs)
        for work, variant in pairs[shift:] + pairs[:shift]:
            order.append((f"r{r}_{variant.replace('-', '_')}_{work}", variant, work))
    return order


def record_counts(spec_file: str) -> None:
    """A marker task: append the server's request counters to the counts file."""
    spec = json.loads(Path(spec_file).read_text())
    with open(spec["counts_file"], "a") as out:
        out.write(json.dumps(request_counts(spec)) + "\n")


def build_dag(spec_file: str) -> Any:
    """The DAG; a DAG file anywhere (dag.test() here, a real deployment elsewhere) needs only this call."""
    import pendulum
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    spec = json.loads(Path(spec_file).read_text())
    with DAG(DAG_ID, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        previous = PythonOperator(task_id="count_0", python_callable=record_counts, op_args=[spec_file])
        for i, (task_id, variant, work) in enumerate(plan(spec), start=1):
            marker = PythonOperator(  # all_done: one failed task must not end the run
                task_id=f"count_{i}",
                python_callable=record_counts,
                op_args=[spec_file],
                trigger_rule="all_done",
            )
            previous >> measured_task(variant, work, task_id, spec.get("cncf_poll")) >> marker
            previous = marker
    return dag


def task_lines(spec: dict[str, Any], instances: Iterable[Any]) -> list[dict[str, Any]]:
    """One line per measured task: variant, work, state, start and end (epoch seconds), requests by
    User-Agent. ``instances``: the run's task instances (anything with ``task_id``, ``state``,
    ``start_date`` and ``end_date``), wherever the DAG ran."""
    counts = [json.loads(line) for line in Path(spec["counts_file"]).read_text().splitlines()]
    by_id = {ti.task_id: ti for ti in instances}
    lines = []
    for i, (task_id, variant, work) in enumerate(plan(spec)):
        ti = by_id[task_id]
        before, after = counts[i], counts[i + 1]
        requests = {ua: n - before.get(ua, 0) for ua, n in after.items() if n - before.get(ua, 0)}
        lines.append({
            "task": task_id, "variant": variant, "work": work, "state": str(ti.state),
            "start": ti.start_date.timestamp(), "end": ti.end_date.timestamp(), "requests": requests,
        })  # fmt: skip
    return lines


def main() -> None:
    spec_file = sys.argv[1]
    spec = json.loads(Path(spec_file).read_text())
    configure(spec, spec_file)
    from airflow.utils import db

    db.initdb()
    run = build_dag(spec_file).test()
    for line in task_lines(spec, run.get_task_instances()):
        print(json.dumps(line), flush=True)
    print(json.dumps({"dag_run": str(run.state)}), flush=True)


if __name__ == "__main__":
    main()
