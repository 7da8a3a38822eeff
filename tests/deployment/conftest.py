"""One real Airflow deployment (api-server/webserver, scheduler, dag-processor, triggerer; LocalExecutor)
on one local cluster with the T9k controller, shared by the module; both are stopped at teardown, also on
failure.

This process only talks to them (REST API, cluster API); its own Airflow settings, which importing the
operators' helpers reads, point at a private AIRFLOW_HOME that no component uses.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="t9k-deployment-client-"))

from benchmarks.airflow_deployment import AirflowDeployment
from t9k_provider.testing import LocalCluster
from tests.support.clusters import cluster_fixture

DAGS = Path(__file__).resolve().parent / "dags"
DAG_IDS = [
    "dep_pipeline",
    "dep_mark_failed",
    "dep_triggerer_kill",
    "dep_lost_worker",
    "dep_mapped_same_name",
    "dep_explicit_name",
    "dep_progress",
    "dep_stall",
    "dep_stall_restart",
]


cluster = cluster_fixture(controller=True)


@pytest.fixture(scope="module")
def airflow(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowDeployment]:
    with AirflowDeployment(tmp_path_factory.mktemp("airflow-home"), DAGS, cluster.kubeconfig) as deployment:
        deployment.wait_for_dags(DAG_IDS)
        yield deployment
