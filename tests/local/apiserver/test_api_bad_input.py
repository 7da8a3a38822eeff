"""Acceptance: malformed and hostile input gets 4xx Status answers; the server never fails or half-writes."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from t9k_provider.testing import LocalCluster
from tests.support.clusters import cluster_fixture

pytestmark = pytest.mark.cluster

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
META_KEYS = st.sampled_from(
    [
        "name",
        "generateName",
        "namespace",
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
        "resourceVersion",
        "uid",
    ]
)
PATHS = [
    "/api/v1/namespaces/bad/configmaps",
    "/api/v1/namespaces/bad/pods",
    "/api/v1/namespaces/bad/services",
    "/api/v1/namespaces/bad/events",
    "/apis/coordination.k8s.io/v1/namespaces/bad/leases",
    "/apis/batch/v1/namespaces/bad/jobs",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
]


cluster = cluster_fixture(node_agents=False)


@pytest.fixture(scope="module", autouse=True)
def _objects(cluster: LocalCluster) -> None:
    """What the requests of this module name."""
    cluster.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bad"}})
    cluster.request(
        "POST", "/api/v1/namespaces/bad/configmaps", {"metadata": {"name": "target"}, "data": {"a": "1"}}
    )


def _assert_status(status: int, body: object) -> None:
    assert status < 500, body
    if status >= 400:
        assert isinstance(body, dict) and body["kind"] == "Status" and body["code"] == status


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(PATHS), spec=JSON_VALUES, meta=st.dictionaries(META_KEYS, JSON_VALUES, max_size=4)
)
def test_random_creates_never_fail_the_server(
    cluster: LocalCluster, path: str, spec: object, meta: dict
) -> None:
    meta.pop("resourceVersion", None)  # a set RV on create is the one documented 500
    status, _, body = cluster.request("POST", path, {"metadata": meta, "spec": spec, "data": spec})
    _assert_status(status, body)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    patch=JSON_VALUES,
    ctype=st.sampled_from(
        [
            "application/merge-patch+json",
            "application/json-patch+json",
            "application/strategic-merge-patch+json",
        ]
    ),
)
def test_random_patches_never_fail_the_server_or_corrupt_the_object(
    cluster: LocalCluster, patch: object, ctype: str
) -> None:
    path = "/api/v1/namespaces/bad/configmaps/target"
    status, _, body = cluster.request(
        "PATCH", path, json.dumps(patch).encode(), headers={"Content-Type": ctype}
    )
    _assert_status(status, body)
    status, _, current = cluster.request("GET", path)
    assert status == 200 and current["metadata"]["name"] == "target" and current["metadata"]["uid"]


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b"[]",
        b"null",
        b"42",
        b'"text"',
        b"\xff\xfe",
        b'{"metadata": 3}',
        b'{"metadata": {"name": 3}}',
        b'{"metadata": {"labels": ["a"]}}',
    ],
)
def test_malformed_bodies_get_400_or_422(cluster: LocalCluster, raw: bytes) -> None:
    status, _, body = cluster.request(
        "POST", "/api/v1/namespaces/bad/configmaps", raw, headers={"Content-Type": "application/json"}
    )
    assert status in (400, 422), body
    assert body["kind"] == "Status"


def test_wrong_kind_in_body_is_rejected(cluster: LocalCluster) -> None:
    status, _, body = cluster.request(
        "POST", "/api/v1/namespaces/bad/configmaps", {"kind": "Secret", "metadata": {"name": "x"}}
    )
    assert status == 400 and "does not match the expected kind" in body["message"]


def test_server_is_healthy_afterwards(cluster: LocalCluster) -> None:
    status, _, body = cluster.request("GET", "/api/v1/namespaces/bad/configmaps/target")
    assert status == 200 and body["data"] is not None


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/apis/batch/v1/namespaces/bad/jobs", {"metadata": {}, "spec": {}}),
        (
            "/apis/batch/v1/namespaces/bad/jobs",
            {"metadata": {"name": "j"}, "spec": {"template": {"metadata": 1}}},
        ),
        ("/api/v1/namespaces/bad/pods", {"metadata": {"name": "p"}, "spec": {"containers": 5}}),
        (
            "/api/v1/namespaces/bad/pods",
            {"metadata": {"name": "p"}, "spec": {"containers": [1, {"image": 3, "ports": "x"}]}},
        ),
        (
            "/api/v1/namespaces/bad/pods",
            {
                "metadata": {"name": "p"},
                "spec": {
                    "containers": [{"name": "c", "image": "i", "resources": {"limits": [1], "requests": "x"}}]
                },
            },
        ),
        ("/api/v1/namespaces/bad/services", {"metadata": {"name": "s"}, "spec": {"ports": {"port": 1}}}),
        ("/api/v1/namespaces", {"metadata": {"name": "n", "labels": ["x"]}}),
    ],
)
def test_hostile_shapes_get_4xx(cluster: LocalCluster, path: str, body: dict) -> None:
    status, _, answer = cluster.request("POST", path, body)
    assert 400 <= status < 500, answer
    assert answer["kind"] == "Status"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    options=st.dictionaries(
        st.sampled_from(
            ["gracePeriodSeconds", "propagationPolicy", "orphanDependents", "preconditions", "dryRun"]
        ),
        JSON_VALUES,
        max_size=3,
    )
)
def test_random_delete_options_never_fail_the_server(cluster: LocalCluster, options: dict) -> None:
    cluster.request("POST", "/api/v1/namespaces/bad/configmaps", {"metadata": {"name": "victim"}})
    status, _, body = cluster.request("DELETE", "/api/v1/namespaces/bad/configmaps/victim", options)
    _assert_status(status, body)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(meta=st.dictionaries(META_KEYS, JSON_VALUES, max_size=4), data=JSON_VALUES)
def test_random_updates_never_fail_the_server(cluster: LocalCluster, meta: dict, data: object) -> None:
    status, _, body = cluster.request(
        "PUT",
        "/api/v1/namespaces/bad/configmaps/target",
        {"metadata": {**meta, "name": "target"}, "data": data},
    )
    _assert_status(status, body)
