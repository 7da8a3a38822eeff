"""Airflow against the local cluster for ``dag.test()`` runs (the ``cluster`` and ``dags`` fixtures in
``conftest.py``): the cluster is ``kubernetes_default`` (as ``t9k-local connection`` prints it: the console's
job pages and TensorBoard redirects are its links' targets) and ``dags/`` the bundle ``dag.test()`` syncs."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.local.connection import airflow_connection
from t9k_provider.local.state import StateDir
from t9k_provider.testing import LocalCluster
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS
from tests.airflow.versions import stored_xcoms

DAGS = Path(__file__).resolve().parent / "dags"


@contextmanager
def airflow_on_cluster(state_dir: Path, **options: Any) -> Iterator[LocalCluster]:
    """A started cluster with the controller (``options``: more of ``LocalCluster``'s, e.g. ``capacity``) that
    Airflow's ``kubernetes_default`` connection points at."""
    cluster = LocalCluster(state_dir, controller=True, **options)
    bundle = [
        {
            "name": "dags-folder",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(DAGS), "refresh_interval": 0},
        }
    ]
    env = {
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": "",  # what `t9k-local connection` prints, once the cluster runs
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundle),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
    }
    if not AIRFLOW_V_3_0_PLUS:
        env["AIRFLOW__CORE__EXECUTOR"] = "SequentialExecutor"  # Airflow 2 runs no other executor on SQLite
    saved = {k: os.environ.get(k) for k in env}
    try:  # stopped whatever fails after it started (a database that cannot be set up, say)
        cluster.start()
        connection = airflow_connection(StateDir(cluster.state_dir))  # the console's link templates too
        env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(connection)
        os.environ.update(env)
        from airflow.utils import db

        db.initdb()
        yield cluster
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        cluster.stop()


def run(
    dags: dict[str, Any],
    dag_id: str,
    logical_date: datetime | None = None,
    conf: dict[str, Any] | None = None,
) -> tuple[str, dict[str, str], str]:
    """``conf``: the run's conf (its params)."""
    if not AIRFLOW_V_3_0_PLUS:
        # Airflow 2's dag.test() prints task logs through a handler on sys.stdout that it adds to the task
        # logger once per process; drop an earlier test's, whose captured stdout is closed, so it adds ours.
        task_logger = logging.getLogger("airflow.task")
        for handler in list(task_logger.handlers):
            if isinstance(handler, logging.StreamHandler) and handler.stream is not sys.stdout:
                task_logger.removeHandler(handler)
    dated = {"logical_date" if AIRFLOW_V_3_0_PLUS else "execution_date": logical_date} if logical_date else {}
    dag_run = dags[dag_id].test(**dated, run_conf=conf)
    return dag_run.state, {ti.task_id: ti.state for ti in dag_run.get_task_instances()}, dag_run.run_id


#: What a failed run's output says about why: the task's error, the job's end and the replicas' last words.
FAILURE_WORDS = ("ERROR", "error", "Error", "Traceback", "failed", "Failed", "exit", "SIG", "Killed")


def why_failed(output: str, limit: int = 60) -> str:
    """The last ``limit`` lines of ``output`` that speak of a failure, for an assertion's message: a failed
    ``dag.test()`` run's own output is too long to survive a CI log's truncation."""
    lines = [line for line in output.splitlines() if any(word in line for word in FAILURE_WORDS)]
    return "\n".join(lines[-limit:])


def result_of(dag_id: str, run_id: str, task_id: str = "job") -> Any:
    (result,) = stored_xcoms(dag_id, run_id, task_id, "return_value")
    return result


def deferrals(output: str, caplog: pytest.LogCaptureFixture) -> int:
    """How often the tasks of a ``dag.test()`` run deferred (needs INFO of ``airflow.models.dag``)."""
    if AIRFLOW_V_3_0_PLUS:
        return output.count("Pausing task as DEFERRED")
    return caplog.text.count("[DAG TEST] running trigger in line")  # Airflow 2 runs each trigger in line
