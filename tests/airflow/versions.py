"""What tests need from Airflow that moved between Airflow 2.11 and 3.x (exceptions, DagBag, stored XComs)."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk.exceptions import AirflowRescheduleException, TaskDeferralError
else:
    from airflow.exceptions import AirflowRescheduleException, TaskDeferralError

__all__ = [
    "AirflowRescheduleException",
    "TaskDeferralError",
    "airflow2_only",
    "airflow3_only",
    "dag_bag",
    "stored_xcoms",
]


def airflow3_only(feature: str) -> pytest.MarkDecorator:
    """For a test of what only Airflow 3 does; ``feature`` names it (the skip reason on Airflow 2)."""
    return pytest.mark.skipif(not AIRFLOW_V_3_0_PLUS, reason=f"Airflow 3 only: {feature}")


def airflow2_only(feature: str) -> pytest.MarkDecorator:
    """For a test of what only Airflow 2 does; ``feature`` names it (the skip reason on Airflow 3)."""
    return pytest.mark.skipif(AIRFLOW_V_3_0_PLUS, reason=f"Airflow 2 only: {feature}")


def dag_bag(folder: str) -> Any:
    if AIRFLOW_V_3_0_PLUS:
        from airflow.dag_processing.dagbag import DagBag
    else:
        from airflow.models.dagbag import DagBag
    return DagBag(dag_folder=folder)


def stored_xcoms(dag_id: str, run_id: str, task_id: str, key: str) -> list[Any]:
    """Every value stored under ``key`` for the task (all map indexes), deserialized."""
    from airflow.utils.session import create_session

    if AIRFLOW_V_3_0_PLUS:
        from airflow.models.xcom import XComModel as XCom
    else:
        from airflow.models.xcom import XCom
    where = {"run_id": run_id, "key": key, "task_ids": task_id, "dag_ids": dag_id}
    with create_session() as session:
        if AIRFLOW_V_3_0_PLUS:  # a select() statement; rows hold the serialized value
            return [XCom.deserialize_value(row) for row in session.scalars(XCom.get_many(**where))]
        # a Query bound to the session; rows are deserialized when loaded
        return [row.value for row in XCom.get_many(**where, session=session)]


def asset_event_extras(dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """The ``extra`` of every asset (Airflow 2: dataset) event that the DAG run's tasks emitted."""
    from airflow.utils.session import create_session
    from sqlalchemy import select

    if AIRFLOW_V_3_0_PLUS:
        from airflow.models.asset import AssetEvent as Event
    else:
        from airflow.models.dataset import DatasetEvent as Event
    query = select(Event.extra).where(Event.source_dag_id == dag_id, Event.source_run_id == run_id)
    with create_session() as session:
        return [dict(extra or {}) for extra in session.scalars(query)]


def declare_assets(*names: str) -> None:
    """Airflow 2: the dataset rows its DAG processor writes for a DAG's outlets and ``dag.test()`` does not
    (without them a task's dataset events are dropped as "not found"); Airflow 3's ``dag.test()`` writes
    them."""
    if AIRFLOW_V_3_0_PLUS:
        return
    from airflow.models.dataset import DatasetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        for name in names:
            if session.scalar(select(DatasetModel).where(DatasetModel.uri == name)) is None:
                session.add(DatasetModel(uri=name))
