"""One way to get a local cluster in a test: a fixture of the scope the tests allow.

A module whose tests can share a cluster (each works in namespaces or names of its own) declares
``cluster = cluster_fixture(**options)`` (module scope: one start for the module); a test that needs a
cluster of its own (it kills, restarts or fills it) takes the ``cluster_factory`` fixture of
``tests/conftest.py``. The options are `LocalCluster`'s: ``controller``, ``kubelet``, ``network``,
``node_agents``, ``flink_operator``, ``capacity``. Every cluster gets a pod subnet of its own, so the test
workers' clusters never meet (``LocalCluster.subnet``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from t9k_provider.testing import ControllerProcess, LocalCluster

Scope = Literal["module", "function"]


def cluster_fixture(scope: Scope = "module", **options: Any) -> Any:
    """A fixture named by the module's assignment that yields a started ``LocalCluster(**options)``."""

    @pytest.fixture(scope=scope)
    def cluster(
        tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
    ) -> Iterator[LocalCluster]:
        with LocalCluster(tmp_path_factory.mktemp(request.node.name), **options) as started:
            yield started

    return cluster


def controller_fixture(scope: Scope = "module", *extra: str) -> Any:
    """A fixture that yields a ready `ControllerProcess` (``extra``: more flags) against the cluster of the
    module's ``cluster`` fixture, stopped at the end of its scope."""

    @pytest.fixture(scope=scope)
    def controller(
        cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[ControllerProcess]:
        log = tmp_path_factory.mktemp("controller") / "controller.log"
        with ControllerProcess(cluster.kubeconfig, log, *extra) as proc:
            yield proc

    return controller


ClusterFactory = Callable[..., LocalCluster]


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[ClusterFactory]:
    """Start clusters of this test's own with chosen options; all stop at teardown."""
    clusters: list[LocalCluster] = []

    def make(**options: Any) -> LocalCluster:
        cluster = LocalCluster(tmp_path / f"cluster-{len(clusters)}", **options)
        clusters.append(cluster)
        return cluster.start()

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.stop()
