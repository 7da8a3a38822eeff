"""Fuzzing every served resource's write and list paths: bad input answers a 4xx Status, never a 5xx.

The resources come from discovery, so whatever the server serves (CRDs included) is covered without a list
to keep up to date. Every resource first gets a fixed set of hostile requests, then hypothesis draws more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from t9k_provider.testing import LocalCluster
from tests.support.clusters import cluster_fixture

pytestmark = pytest.mark.cluster

NAMESPACE = "fuzz"
TARGET = "fuzz-target"
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)
BODY_TYPES = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json; charset=utf-16",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json;;;",
    "",
]
PATCH_TYPES = [
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
]
ACCEPTS = [
    "application/json",
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    "application/vnd.kubernetes.protobuf",
    "*/*",
    "",
    ";;;",
    "application/json;q=x",
]
QUERY_KEYS = [
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "dryRun",
    "fieldValidation",
    "fieldManager",
    "force",
    "pretty",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "propagationPolicy",
    "gracePeriodSeconds",
    "orphanDependents",
]
QUERY_VALUES = st.sampled_from(
    ["", "-1", "0", "99999999999999999999", "x", "a=b", "a in (", "=", "%", "All"]
) | (st.text(max_size=10))


@dataclass(frozen=True)
class Endpoint:
    kind: str
    api_version: str
    collection: str
    verbs: tuple[str, ...]
    item: str  # an existing object's path where there is one, so that updates and patches get decoded


def _endpoints(cluster: LocalCluster) -> list[Endpoint]:
    """Every served resource (not subresource) of every served group/version, from discovery."""
    _, _, core = cluster.request("GET", "/api")
    group_versions = [("/api/" + v, v) for v in core["versions"]]
    _, _, groups = cluster.request("GET", "/apis")
    for group in groups["groups"]:
        group_versions += [(f"/apis/{v['groupVersion']}", v["groupVersion"]) for v in group["versions"]]
    found = []
    for prefix, api_version in group_versions:
        _, _, resources = cluster.request("GET", prefix)
        for r in resources["resources"]:
            if "/" in r["name"]:
                continue
            scope = f"/namespaces/{NAMESPACE}" if r["namespaced"] else ""
            collection = f"{prefix}{scope}/{r['name']}"
            if "create" in r["verbs"]:  # a minimal object, where that is enough for this kind
                cluster.request("POST", collection, {"metadata": {"name": TARGET}})
            found.append(
                Endpoint(r["kind"], api_version, collection, tuple(r["verbs"]), _an_item(cluster, prefix, r))
            )
    return found


def _an_item(cluster: LocalCluster, prefix: str, resource: dict) -> str:
    """The path of some existing object of this resource (in any namespace), else of a missing one."""
    status, _, listed = cluster.request("GET", f"{prefix}/{resource['name']}?limit=1")
    items = listed.get("items") if status == 200 else None
    if not items:
        scope = f"/namespaces/{NAMESPACE}" if resource["namespaced"] else ""
        return f"{prefix}{scope}/{resource['name']}/{TARGET}"
    meta = items[0]["metadata"]
    scope = f"/namespaces/{meta['namespace']}" if resource["namespaced"] else ""
    return f"{prefix}{scope}/{resource['name']}/{meta['name']}"


cluster = cluster_fixture(node_agents=False)


@pytest.fixture(scope="module", autouse=True)
def _objects(cluster: LocalCluster) -> None:
    """What the requests of this module name."""
    cluster.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})


@pytest.fixture(scope="module")
def endpoints(cluster: LocalCluster) -> list[Endpoint]:
    found = _endpoints(cluster)
    kinds = {e.kind for e in found}
    assert {"Pod", "ConfigMap", "Deployment", "CustomResourceDefinition", "GenericJob"} <= kinds, kinds
    return found


def _send(cluster: LocalCluster, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> int:
    """One request; the answer must be a Status when it is an error, and never a 5xx."""
    status, _, answer = cluster.request(method, path, body, headers=headers, timeout=20)
    assert status < 500, (method, path, headers, body[:300] if body else body, answer)
    if status >= 400:
        assert isinstance(answer, dict) and answer.get("kind") == "Status", (method, path, answer)
        assert answer["code"] == status, answer
    return status


def _nested(depth: int, kind: str) -> bytes:
    return (kind[0] * depth + kind[1] * depth).encode()


def _object(e: Endpoint, **fields: object) -> dict[str, object]:
    return {"apiVersion": e.api_version, "kind": e.kind, "metadata": {"name": TARGET}, **fields}


def _hostile_bodies(e: Endpoint) -> list[tuple[str, bytes]]:
    """Bodies no server may accept: (Content-Type, body)."""
    valid = json.dumps(_object(e, spec={"replicas": 1}))
    deep = b'{"apiVersion":"%s","kind":"%s","metadata":{"name":"x"},"spec":%s}' % (
        e.api_version.encode(),
        e.kind.encode(),
        _nested(5000, "[]"),
    )
    return [
        ("application/json", _nested(5000, "[]")),
        ("application/json", deep),
        ("application/yaml", deep),
        ("application/json", valid.encode("utf-16")),
        ("application/json", valid[: len(valid) // 2].encode()),
        ("application/yaml", b"a: &a [*a]\n"),
        ("application/vnd.kubernetes.protobuf", b"k8s\x00\n\xff\xff\xff\xff\x0f"),
        ("application/json", json.dumps(_object(e, metadata=[TARGET])).encode()),
    ]


def test_hostile_bodies_to_every_write_path_get_4xx(cluster: LocalCluster, endpoints: list[Endpoint]) -> None:
    for e in endpoints:
        for i, (ctype, body) in enumerate(_hostile_bodies(e)):
            headers = {"Content-Type": ctype}
            if "create" in e.verbs:
                assert 400 <= _send(cluster, "POST", e.collection, body, headers) < 500
            if "update" in e.verbs and i % 2 == 0:  # the item path shares the decoding: half the bodies
                assert 400 <= _send(cluster, "PUT", e.item, body, headers) < 500
        if "patch" in e.verbs:
            deep_object = b'{"a":' * 3000 + b"1" + b"}" * 3000
            bodies = [_nested(5000, "[]"), b"\xff", deep_object, _nested(100_000, "[]")]
            for ctype, body in zip(PATCH_TYPES, bodies, strict=True):
                assert 400 <= _send(cluster, "PATCH", e.item, body, {"Content-Type": ctype}) < 500


def test_bad_query_parameters_on_every_list_path(cluster: LocalCluster, endpoints: list[Endpoint]) -> None:
    bad = {"limit": "x", "labelSelector": "a in (", "fieldSelector": "a==b==c"}
    for e in endpoints:
        if "list" not in e.verbs:
            continue
        for key, value in bad.items():
            assert 400 <= _send(cluster, "GET", f"{e.collection}?{urlencode({key: value})}", None, {}) < 500


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_requests_never_answer_5xx(
    cluster: LocalCluster, endpoints: list[Endpoint], data: st.DataObject
) -> None:
    e = data.draw(st.sampled_from(endpoints))
    method = data.draw(st.sampled_from(["POST", "PUT", "PATCH", "GET"]))
    query = data.draw(st.dictionaries(st.sampled_from(QUERY_KEYS), QUERY_VALUES, max_size=3))
    headers = {"Accept": data.draw(st.sampled_from(ACCEPTS))}
    types = PATCH_TYPES if method == "PATCH" else BODY_TYPES
    headers["Content-Type"] = data.draw(st.sampled_from(types))
    shape = data.draw(st.sampled_from(["object", "value", "bytes", "truncated", "nested"]))
    if shape == "object":
        meta = data.draw(
            st.dictionaries(st.sampled_from(["name", "labels", "namespace", "uid"]), JSON_VALUES)
        )
        value: object = {**_object(e, spec=data.draw(JSON_VALUES)), "metadata": {"name": TARGET, **meta}}
    else:
        value = data.draw(JSON_VALUES)
    body = json.dumps(value, allow_nan=True).encode()
    if shape == "bytes":
        body = data.draw(st.binary(max_size=64))
    elif shape == "truncated":
        body = body[: data.draw(st.integers(0, max(len(body) - 1, 0)))]
    elif shape == "nested":
        body = _nested(data.draw(st.integers(1, 6000)), data.draw(st.sampled_from(["[]", "{}"])))
    path = e.collection if method in ("POST", "GET") else e.item
    _send(cluster, method, f"{path}?{urlencode(query)}", None if method == "GET" else body, headers)


def test_the_server_is_alive_afterwards(cluster: LocalCluster) -> None:
    status, _, _ = cluster.request("GET", "/readyz")
    assert status == 200
    status, _, created = cluster.request(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", {"metadata": {"name": "alive"}}
    )
    assert status == 201 and created["metadata"]["name"] == "alive"
