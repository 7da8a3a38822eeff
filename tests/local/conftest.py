"""Fixtures of the API server tests: one API-only local cluster per module, its core API, fresh namespaces."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from t9k_provider.local.testing import LocalCluster


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[LocalCluster]:
    """The API server and its controllers only (no node agents: pods stay Pending)."""
    with LocalCluster(tmp_path_factory.mktemp(request.module.__name__), node_agents=False) as c:
        yield c


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture
def ns(core: client.CoreV1Api) -> str:
    """A new namespace for one test."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name
