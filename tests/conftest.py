"""Shared fixtures: embedded local clusters (``t9k-local run`` in child processes)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.testing import LocalCluster


@pytest.fixture(scope="session")
def kubectl_binary() -> str:
    """kubectl's path, for every test that runs it (``pytest.mark.usefixtures("kubectl_binary")``).

    A developer machine without kubectl skips those tests; under ``CI=true`` they fail instead, since the
    project's CI image always carries kubectl 1.32 and a silent skip there would hide a broken image. Session
    scope makes the verdict come before any module fixture starts a cluster for nothing.
    """
    path = shutil.which("kubectl")
    if path is not None:
        return path
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(
            "kubectl is not on PATH but CI=true: the CI image must provide kubectl 1.32", pytrace=False
        )
    pytest.skip("kubectl is not installed (under CI=true this fails)")


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One cluster per test module, without the T9k controller (pods run as processes)."""
    cluster = LocalCluster(tmp_path_factory.mktemp("local-cluster"), controller=False)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def local_cluster_factory(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """Start clusters with chosen options (``controller=``, ``kubelet=``, ...); all stop at teardown."""
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
