"""`scripts/demo.py`: what it shows live, what its summary says, and the metadata it reads from Airflow's DB.

The end-to-end run (`make demo`) is measured by hand; these tests pin the parts that decide what a user sees.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "demo.py"


@pytest.fixture(scope="module")
def demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("t9k_demo_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


INFO = "2026-11-21T06:49:49Z [info     ]"
OPERATOR = (
    "[airflow.task.operators.t9k_provider.operators.kinds.PyTorchTrainingJobOperator] loc=log_follower.py:66"
)


@pytest.mark.parametrize(
    ("line", "state", "shown"),
    [
        (
            f"{INFO} [DAG TEST] starting task_id=train map_index=-1 [airflow.sdk] loc=x",
            None,
            "task train: started",
        ),
        (
            "2026-11-21T06:46:22Z [info     ] [DAG TEST] end task task_id=train map_index=-1 [a]",
            "failed",
            "task train: failed",
        ),
        (
            f"{INFO} [train-x-worker-0/pytorch] epoch 1/8 loss=0.592939 rank=0 world_size=2 {OPERATOR}",
            None,
            "  [train-x-worker-0/pytorch] epoch 1/8 loss=0.592939 rank=0 world_size=2",
        ),
        (
            f"{INFO} [train-x-worker-0/pytorch] rank 0/2 joining x:23456 {OPERATOR}",
            None,
            None,
        ),
        (
            "2026-11-21T06:52:44Z [error    ] job default/train-x failed: Failed: exit code 1.\n",
            None,
            "  job default/train-x failed: Failed: exit code 1.",
        ),
        ("2026-11-21T06:50:20Z [warning  ] No tasks to run. unrunnable tasks: {...}", None, None),
    ],
)
def test_live_lines(demo: ModuleType, line: str, state: str | None, shown: str | None) -> None:
    assert demo.interesting(line, state) == shown


def job(phase: str, aggregate: dict[str, int], failed: str | None = None) -> dict[str, Any]:
    conditions = [{"type": "Failed", "status": "True", "message": failed}] if failed else []
    return {
        "metadata": {"name": "train-x", "annotations": {"airflow.apache.org/task-id": "train"}},
        "status": {"phase": phase, "aggregate": aggregate, "conditions": conditions},
    }


def test_job_view_counts_replicas_and_names_the_failure(demo: ModuleType) -> None:
    view = demo.describe_job("PyTorchTrainingJob", job("Running", {"pending": 1, "running": 1, "failed": 0}))
    assert (view.task_id, view.phase, view.replicas, view.reason) == (
        "train",
        "Running",
        "1 pending, 1 running",
        "",
    )
    failed = demo.describe_job(
        "PyTorchTrainingJob", job("Failed", {"failed": 2}, "The job exited with an error code.")
    )
    assert (failed.replicas, failed.reason) == ("2 failed", "The job exited with an error code.")
    assert demo.describe_job("GenericJob", {"metadata": {"name": "j"}}).phase == "Pending"


class FakeCore:
    """The two CoreV1Api calls the summary makes."""

    def __init__(self, logs: dict[str, str]) -> None:
        self.logs = logs

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        job_name = label_selector.split("=", 1)[1]
        pods = [
            SimpleNamespace(
                metadata=SimpleNamespace(name=name),
                spec=SimpleNamespace(containers=[SimpleNamespace(name="pytorch")]),
                status=SimpleNamespace(phase="Failed"),
            )
            for name in sorted(self.logs)
            if name.startswith(job_name)
        ]
        return SimpleNamespace(items=pods)

    def read_namespaced_pod_log(self, name: str, namespace: str, **kwargs: Any) -> Any:
        lines = self.logs[name].splitlines()
        if kwargs.get("tail_lines"):
            lines = lines[-kwargs["tail_lines"] :]
        return SimpleNamespace(data="\n".join(lines).encode())


def run_for(demo: ModuleType, states: dict[str, str], phase: str, tmp_path: Path) -> Any:
    view = demo.JobView(
        "PyTorchTrainingJob", "train-x", "train", phase, "2 failed", "The job exited with an error code."
    )
    return demo.Run(
        "manual__1", states, None, [view], tmp_path / "logs", tmp_path / "pods", tmp_path / "data"
    )


def test_summary_reports_the_loss_from_the_replica_log(
    demo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = "".join(
        f"epoch {i}/3 loss={loss} rank=0 world_size=2\n" for i, loss in enumerate((0.9, 0.4, 0.1), 1)
    )
    run = run_for(demo, {"train": "success"}, "Succeeded", tmp_path)
    assert demo.summarize(run, FakeCore({"train-x-worker-0": log})) is True
    assert "training loss: epoch 1 0.900000 -> epoch 3 0.100000" in capsys.readouterr().out


def test_summary_fails_a_run_whose_loss_did_not_fall(demo: ModuleType, tmp_path: Path) -> None:
    log = "epoch 1/2 loss=0.5 rank=0 world_size=2\nepoch 2/2 loss=0.6 rank=0 world_size=2\n"
    run = run_for(demo, {"train": "success"}, "Succeeded", tmp_path)
    assert demo.summarize(run, FakeCore({"train-x-worker-0": log})) is False


def test_summary_names_the_failed_task_and_job_and_shows_the_replica_tail(
    demo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = "".join(f"line {i}\n" for i in range(30)) + "rank 0: T9K_DEMO_FAIL is set, failing on purpose\n"
    run = run_for(
        demo, {"prepare_data": "success", "train": "failed", "report": "upstream_failed"}, "Failed", tmp_path
    )
    assert demo.summarize(run, FakeCore({"train-x-worker-0": log})) is False
    out = capsys.readouterr().out
    assert "FAILED: task 'train', PyTorchTrainingJob train-x: The job exited with an error code." in out
    assert "last 20 log lines of replica train-x-worker-0" in out
    assert "T9K_DEMO_FAIL is set" in out and "line 10" not in out and "line 11" in out


def test_task_states_reads_the_latest_run(demo: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "airflow.db").touch()
    with sqlite3.connect(tmp_path / "airflow.db") as db:
        db.executescript(
            "CREATE TABLE dag_run (id INTEGER PRIMARY KEY, dag_id TEXT, run_id TEXT);"
            "CREATE TABLE task_instance (dag_id TEXT, run_id TEXT, task_id TEXT, state TEXT, start_date TEXT,"
            " priority_weight INTEGER);"
            "CREATE TABLE xcom (dag_id TEXT, run_id TEXT, task_id TEXT, key TEXT, value TEXT);"
        )
        db.executemany(
            "INSERT INTO dag_run (dag_id, run_id) VALUES (?, ?)", [(demo.DAG_ID, "old"), (demo.DAG_ID, "new")]
        )
        db.executemany(
            "INSERT INTO task_instance VALUES (?, ?, ?, ?, ?, ?)",
            [
                (demo.DAG_ID, "old", "train", "success", "2026-01-01", 4),
                (demo.DAG_ID, "new", "report", None, None, 1),
                (demo.DAG_ID, "new", "evaluate", "upstream_failed", None, 3),
                (demo.DAG_ID, "new", "train", "failed", "2026-01-02 00:01", 4),
                (demo.DAG_ID, "new", "prepare_data", "success", "2026-01-02 00:00", 5),
            ],
        )
        db.execute(
            "INSERT INTO xcom VALUES (?, 'new', 'report', 'return_value', ?)",
            (demo.DAG_ID, json.dumps({"test_r2": 0.9})),
        )
    run_id, states, result = demo.task_states(tmp_path)
    assert run_id == "new"
    assert list(states.items()) == [
        ("prepare_data", "success"),
        ("train", "failed"),
        ("evaluate", "upstream_failed"),
        ("report", "none"),
    ]
    assert result == {"test_r2": 0.9}


def test_the_metadata_columns_the_demo_reads_exist_in_airflow() -> None:
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    assert {"id", "dag_id", "run_id"} <= set(DagRun.__table__.columns.keys())
    assert {"dag_id", "run_id", "task_id", "state", "start_date", "priority_weight"} <= set(
        TaskInstance.__table__.columns.keys()
    )
    assert {"dag_id", "run_id", "task_id", "key", "value"} <= set(XComModel.__table__.columns.keys())
    assert (DagRun.__tablename__, TaskInstance.__tablename__, XComModel.__tablename__) == (
        "dag_run",
        "task_instance",
        "xcom",
    )


def test_the_summary_ends_with_the_tensorboard_and_its_loss_curve(
    demo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link, page = (
        "http://127.0.0.1:9/tensorboards/default/train-x",
        "http://127.0.0.1:9/jobs/default/P/train-x",
    )
    board = demo.Board("http://10.251.0.4:6006/", link, page, "", [(1, 0.6), (2, 0.3), (3, 0.1)])
    assert demo.show_board(board, "train-x", tmp_path, 3) is True
    out = capsys.readouterr().out
    assert "TensorBoard   : http://10.251.0.4:6006/" in out and link in out and page in out
    png = tmp_path / demo.LOSS_CURVE
    assert png.read_bytes().startswith(b"\x89PNG") and "epoch_loss of epochs 1-3" in out
    png.unlink()
    short = demo.Board("http://10.251.0.4:6006/", link, page, "it serves 2 of 3 epochs", [(1, 0.6), (2, 0.3)])
    assert demo.show_board(short, "train-x", tmp_path, 3) is False
    assert "not drawn: it serves 2 of 3 epochs" in capsys.readouterr().out and not png.exists()
