"""Airflow for the example DAGs: a private AIRFLOW_HOME (unless another suite already chose one) and the
DagBag of ``dags_examples/``, parsed once.

``dag.test()`` runs only DAGs that its ``dags-folder`` bundle contains, so the tests that run DAGs point
the dags folder at ``dags_examples/`` for their duration.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.airflow_home import use_private_airflow_home

use_private_airflow_home("t9k-examples-airflow-")


DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags_examples"


@pytest.fixture(scope="session")
def dagbag() -> Any:
    from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS

    if AIRFLOW_V_3_0_PLUS:
        from airflow.dag_processing.dagbag import DagBag
    else:  # `make test-airflow2` parses the examples on Airflow 2.11 too
        from airflow.models.dagbag import DagBag
    return DagBag(dag_folder=str(DAGS_FOLDER))


@pytest.fixture(scope="session")
def airflow_db() -> None:
    from airflow.utils import db

    db.initdb()


@pytest.fixture
def examples_dags_folder(monkeypatch: pytest.MonkeyPatch, airflow_db: None) -> Iterator[Path]:
    from airflow import settings

    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(DAGS_FOLDER))
    # the dags-folder bundle reads settings.DAGS_FOLDER, which Airflow computes once at import
    monkeypatch.setattr(settings, "DAGS_FOLDER", str(DAGS_FOLDER))
    yield DAGS_FOLDER
