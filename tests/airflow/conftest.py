"""Airflow test environment: a private AIRFLOW_HOME and in-memory fakes of the cluster API.

The environment variables are set at import time, before any test imports Airflow, so no test ever reads or
writes the developer's ``~/airflow``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.airflow_home import use_private_airflow_home

use_private_airflow_home("t9k-airflow-home-")


from t9k_provider.testing import LocalCluster  # noqa: E402
from tests.airflow.cluster import DAGS, airflow_on_cluster  # noqa: E402
from tests.airflow.fakes import FakeHook, FakeTI  # noqa: E402
from tests.airflow.versions import dag_bag  # noqa: E402


@pytest.fixture
def fake_hook() -> FakeHook:
    return FakeHook()


@pytest.fixture
def ti() -> FakeTI:
    return FakeTI()


@pytest.fixture
def context(ti: FakeTI) -> dict[str, Any]:
    return {"ti": ti, "run_id": ti.run_id}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One local cluster with the controller per test module, as Airflow's ``kubernetes_default``."""
    with airflow_on_cluster(tmp_path_factory.mktemp("t9k-it-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def dags(cluster: LocalCluster) -> dict[str, Any]:
    """The DAGs of ``dags/``, which ``dag.test()`` runs against ``cluster``."""
    bag = dag_bag(str(DAGS))
    assert not bag.import_errors, bag.import_errors
    return bag.dags
