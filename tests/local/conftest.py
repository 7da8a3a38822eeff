"""Fixtures of the API server tests: one API-only local cluster per module, its core API, fresh namespaces."""

from __future__ import annotations

import time
import uuid

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster
from tests.support.clusters import cluster_fixture

#: The API server and its controllers only (no node agents: pods stay Pending).
cluster = cluster_fixture(node_agents=False)


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture
def ns(core: client.CoreV1Api) -> str:
    """A new namespace for one test, once the namespace controller has published its ``kube-root-ca.crt``
    (as in any cluster, every namespace lists that ConfigMap)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    deadline = time.monotonic() + 10
    while not core.list_namespaced_config_map(name, field_selector="metadata.name=kube-root-ca.crt").items:
        assert time.monotonic() < deadline, f"no kube-root-ca.crt in {name}"
        time.sleep(0.02)
    return name
