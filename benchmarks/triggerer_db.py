"""Deferred task instances written straight into an Airflow metadata DB, for the real triggerer to run.

``python -m benchmarks.triggerer_db SPEC_FILE RUN_ID`` (in the deployment's environment: ``AIRFLOW_HOME``,
its DB and Fernet key). The first call stores the DAG (``DAG_FILE``: one task mapped over ``tasks``
indexes, as a sweep of jobs would be); each call creates a run of it whose every mapped task instance is
DEFERRED on its own ``T9kJobTrigger``, exactly the rows a worker leaves when
``GenericJobOperator(deferrable=True)`` defers: a trigger row with the trigger's serialized (encrypted)
kwargs and the task instance pointing at it; or, with a ``moment_file`` in the spec, each on its own
``bare_trigger.MomentTrigger`` (Airflow's floor). Submitting and deferring 1,000 tasks through workers would
cost minutes of CPU on 2 cores for nothing the triggerer sees.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DAG_ID = "triggerer_capacity"
DAG_FILE = '''\
"""{dag_id}: the tasks the triggerer capacity benchmark defers (benchmarks/triggerer_db.py)."""

from airflow.sdk import DAG, task

with DAG("{dag_id}", schedule=None, catchup=False):

    @task
    def {task_id}(index: int) -> None:
        pass

    {task_id}.expand(index=list(range({tasks})))
'''
#: The mapped task: its instance ``i`` (map index) waits on the run's ``i``-th job.
TASK_ID = "wait"
#: What a bare trigger logs once it runs: the benchmark checks every one was armed before its moment.
ARMED = "armed for the moment"


def write_dag(folder: Path, tasks: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{DAG_ID}.py").write_text(DAG_FILE.format(dag_id=DAG_ID, task_id=TASK_ID, tasks=tasks))


@functools.cache
def operator_limits() -> dict[str, Any]:
    """The limits an operator at its defaults hands its trigger (``pod_error_timeout``; no
    ``execution_timeout``), read from its signature once (every trigger of a run gets the same)."""
    from t9k_provider.operators.job import T9kJobOperator
    from t9k_provider.waiting.limits import WaitLimits

    defaults = inspect.signature(T9kJobOperator.__init__).parameters
    named = {f.name: defaults[f.name].default for f in fields(WaitLimits) if f.name in defaults}
    return WaitLimits(**named).to_kwargs()


def trigger_kwargs(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """What ``GenericJobOperator(deferrable=True, log_replicas=...)`` hands its trigger for job ``name``."""
    return {
        "limits": operator_limits(),
        "credentials": {"kubeconfig": spec["kubeconfig"]},
        "kind": spec["kind"],
        "plural": spec["plural"],
        "name": name,
        "namespace": spec["namespace"],
        "poll_interval": spec["poll_interval"],
        "pod_selector": f"tensorstack.dev/owner-name={name}" if spec.get("log_targets") else None,
        "log_targets": spec.get("log_targets"),
    }


def seed(spec: dict[str, Any], run_id: str) -> None:
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.models.dagbag import DBDagBag
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    from benchmarks.bare_trigger import MomentTrigger
    from t9k_provider.triggers.job import T9kJobTrigger

    with create_session() as session:
        dag = DBDagBag().get_latest_version_of_dag(DAG_ID, session=session)
        if dag is None:
            DagBundlesManager().sync_bundles_to_db(session=session)
            session.commit()
            folder = Path(spec["dags_folder"])
            bag = DagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
            sync_bag_to_db(bag, "dags-folder", None, session=session)
            session.commit()
            dag = DBDagBag().get_latest_version_of_dag(DAG_ID, session=session)
            if dag is None:
                raise RuntimeError(f"{DAG_ID} not stored: {bag.import_errors}")
        run = dag.create_dagrun(
            run_id=run_id, run_after=datetime.now(timezone.utc), run_type=DagRunType.MANUAL,
            triggered_by=DagRunTriggeredByType.TEST, state=DagRunState.RUNNING, session=session,
        )  # fmt: skip
        session.flush()
        instances = {ti.map_index: ti for ti in run.get_task_instances(session=session)}
        offsets = spec.get("offsets") or [0.0] * len(spec["names"])
        for index, name in enumerate(spec["names"]):
            if "moment_file" in spec:
                carry = trigger_kwargs(spec, name) if spec.get("carry") else None
                trigger = MomentTrigger(spec["moment_file"], offsets[index], carry, spec.get("echo", 0))
                row = Trigger.from_object(trigger)
            else:
                row = Trigger.from_object(T9kJobTrigger(**trigger_kwargs(spec, name)))
            session.add(row)
            session.flush()
            ti = instances[index]
            ti.state = TaskInstanceState.DEFERRED
            ti.try_number = 1
            ti.trigger_id = row.id
            ti.next_method = "execute_complete"
            ti.next_kwargs = {}
        session.commit()


if __name__ == "__main__":
    seed(json.loads(Path(sys.argv[1]).read_text()), sys.argv[2])
