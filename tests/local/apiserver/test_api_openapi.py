"""OpenAPI v3 documents: built-in and CRD schemas, and ``kubectl explain`` reading them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from t9k_provider.local.apiserver.openapi import builtin_model, schema_name
from t9k_provider.testing import LocalCluster

pytestmark = pytest.mark.cluster


def test_the_root_document_points_at_every_group_version(cluster: LocalCluster) -> None:
    _, _, root = cluster.request("GET", "/openapi/v3")
    assert root["paths"]["api/v1"]["serverRelativeURL"] == "/openapi/v3/api/v1"
    for path in ("apis/batch/v1", "apis/apps/v1", "apis/batch.tensorstack.dev/v1beta1"):
        assert path in root["paths"]
    status, _, _ = cluster.request("GET", "/openapi/v3/apis/nope/v1")
    assert status == 404


def test_builtin_schemas_carry_fields_descriptions_and_required(cluster: LocalCluster) -> None:
    _, _, doc = cluster.request("GET", "/openapi/v3/api/v1")
    schemas = doc["components"]["schemas"]
    pod = schemas["io.k8s.api.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "Pod"}]
    assert pod["properties"]["spec"]["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.v1.PodSpec"}]
    spec = schemas["io.k8s.api.v1.PodSpec"]
    assert spec["required"] == ["containers"]
    assert spec["properties"]["containers"]["items"] == {
        "allOf": [{"$ref": "#/components/schemas/io.k8s.api.v1.Container"}],
        "default": {},
    }
    assert "List of containers" in spec["properties"]["containers"]["description"]
    labels = schemas["io.k8s.api.v1.ObjectMeta"]["properties"]["labels"]
    assert labels["type"] == "object" and labels["additionalProperties"] == {"type": "string"}
    refs = {r for r in _refs(doc)}
    assert refs <= set(schemas), refs - set(schemas)  # every $ref resolves within the document
    assert schemas["io.k8s.api.core.v1.Event"]["x-kubernetes-group-version-kind"][0]["kind"] == "Event"


def test_crd_schemas_are_the_crds_with_object_meta(cluster: LocalCluster) -> None:
    _, _, doc = cluster.request("GET", "/openapi/v3/apis/batch.tensorstack.dev/v1beta1")
    schemas = doc["components"]["schemas"]
    job = schemas["dev.tensorstack.batch.v1beta1.GenericJob"]
    assert job["x-kubernetes-group-version-kind"] == [
        {"group": "batch.tensorstack.dev", "version": "v1beta1", "kind": "GenericJob"}
    ]
    assert job["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.api.v1.ObjectMeta"}
    ]
    assert "replicaSpecs" in job["properties"]["spec"]["properties"]
    assert set(_refs(doc)) <= set(schemas)


def test_model_names_follow_the_kubernetes_ones() -> None:
    assert schema_name("V1ObjectMeta") == "io.k8s.api.v1.ObjectMeta"
    assert schema_name("RbacV1Subject") == "io.k8s.api.rbac.v1.Subject"
    assert builtin_model("", "v1", "Event") == "CoreV1Event"
    assert builtin_model("events.k8s.io", "v1", "Event") == "EventsV1Event"
    assert builtin_model("apps", "v1", "Deployment") == "V1Deployment"
    assert builtin_model("batch.tensorstack.dev", "v1beta1", "GenericJob") is None


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@pytest.mark.usefixtures("kubectl_binary")
@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("genericjobs.spec", ["KIND:       GenericJob", "replicaSpecs\t<[]Object>"]),
        ("pj.spec.replicaSpecs", ["KIND:       PyTorchTrainingJob", "FIELD: replicaSpecs <[]Object>"]),
        ("pods.spec.containers", ["KIND:       Pod", "FIELD: containers <[]Container>", "image\t<string>"]),
        ("deployments.spec", ["GROUP:      apps", "template\t<PodTemplateSpec> -required-"]),
    ],
)
def test_kubectl_explain(cluster: LocalCluster, tmp_path: Path, target: str, expected: list[str]) -> None:
    proc = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(tmp_path), "explain", target],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for line in expected:
        assert line in proc.stdout, proc.stdout
