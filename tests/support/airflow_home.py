"""A private Airflow home for a test process, chosen before anything imports Airflow."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: Which process chose the home in the environment: pytest-xdist's controller loads the conftest of the paths
#: it is given before it starts its workers, which inherit its environment.
OWNER = "T9K_TEST_AIRFLOW_HOME_OWNER"
CHOSEN = ("AIRFLOW_HOME", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")


def use_private_airflow_home(prefix: str) -> None:
    """Point this process (and what it starts) at a new AIRFLOW_HOME with its own SQLite database, unless
    another conftest of this process already chose one: no test reads or writes the developer's
    ``~/airflow``, and each test worker has a database of its own (two that shared one raced to create its
    tables: 'table connection already exists')."""
    owner = f"{os.getpid()}"
    if os.environ.get(OWNER) != owner:
        for name in CHOSEN:
            os.environ.pop(name, None)
        os.environ[OWNER] = owner
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix=prefix))
    os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    database = Path(os.environ["AIRFLOW_HOME"]) / "airflow.db"
    os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{database}")
