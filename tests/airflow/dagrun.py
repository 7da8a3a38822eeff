"""Run one DAG with ``dag.test()`` in a process of its own, so that several run at once against one cluster
(tasks whose jobs wait in one Queue together), then write its run's task states and XComs as JSON.

``python -m tests.airflow.dagrun DAG_FILE DAG_ID OUT_JSON [XCOM_KEY ...]``, with the environment of the test
that starts it (``tests/airflow/cluster.airflow_on_cluster``) and a database of its own
(``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``): ``start`` does both.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import IO, Any

from tests.airflow.cluster import run
from tests.airflow.versions import dag_bag, stored_xcoms

ROOT = Path(__file__).resolve().parents[2]


def start(dag_file: Path, dag_id: str, directory: Path, *keys: str) -> tuple[subprocess.Popen[bytes], Path]:
    """Start the run of ``dag_id`` in a new process on a copy of this process's Airflow database; its output
    goes to ``directory/<dag_id>.log``, its result to ``directory/<dag_id>.json`` (returned)."""
    database = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///")
    copy = directory / f"{dag_id}.db"
    with closing(sqlite3.connect(database)) as source, closing(sqlite3.connect(copy)) as target:
        source.backup(target)  # what the write-ahead log holds too
    env = {**os.environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{copy}", "PYTHONUNBUFFERED": "1"}
    out = directory / f"{dag_id}.json"
    log: IO[bytes] = (directory / f"{dag_id}.log").open("wb")
    command = [sys.executable, "-m", "tests.airflow.dagrun", str(dag_file), dag_id, str(out), *keys]
    with log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, out


def main(dag_file: str, dag_id: str, out: str, *keys: str) -> None:
    bag = dag_bag(dag_file)
    assert not bag.import_errors, bag.import_errors
    state, tasks, run_id = run(bag.dags, dag_id)
    xcoms: dict[str, dict[str, Any]] = {
        task: {key: stored_xcoms(dag_id, run_id, task, key) for key in keys} for task in tasks
    }
    result = {"state": state, "tasks": tasks, "run_id": run_id, "xcoms": xcoms}
    Path(out).write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:])
