"""A private Airflow home for a test process, chosen before anything imports Airflow."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def use_private_airflow_home(prefix: str) -> None:
    """Point this process (and what it starts) at a new AIRFLOW_HOME with its own SQLite database, unless
    another conftest of the session already chose one: no test reads or writes the developer's ``~/airflow``,
    and each test worker has a database of its own."""
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix=prefix))
    os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    database = Path(os.environ["AIRFLOW_HOME"]) / "airflow.db"
    os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{database}")
