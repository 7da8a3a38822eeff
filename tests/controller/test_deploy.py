"""deploy/: manifests build, match the Kubernetes schemas, and RBAC is exactly what the code uses."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from t9k_provider.controller.cli import build_parser
from t9k_provider.jobs import GROUP, KINDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ROOT = DEPLOY.parent
CHILD_VERBS = {"get", "list", "watch", "create", "delete", "patch"}
MODELS = {
    "Namespace": "V1Namespace",
    "ServiceAccount": "V1ServiceAccount",
    "ClusterRole": "V1ClusterRole",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "Role": "V1Role",
    "RoleBinding": "V1RoleBinding",
    "Deployment": "V1Deployment",
    "Service": "V1Service",
}


def manifests() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        if path.parent.name == "crds" or path.name == "kustomization.yaml":
            continue
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in manifests() if d["kind"] == kind]


class _Raw:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.data = json.dumps(obj)


@pytest.mark.parametrize("doc", manifests(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_built_in_objects_match_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    """Round trip through the client models: a misspelled or misplaced field is dropped, so it shows."""
    api = k8s.ApiClient()
    model = api.deserialize(_Raw(doc), MODELS[doc["kind"]])
    assert api.sanitize_for_serialization(model) == doc


def test_kustomization_lists_every_manifest_and_builds(kubectl_binary: str) -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    on_disk = {str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert listed == on_disk
    built = subprocess.run(
        [kubectl_binary, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    kinds = [d["kind"] for d in yaml.safe_load_all(built) if d]
    assert kinds.count("CustomResourceDefinition") == len(KINDS)
    assert "Deployment" in kinds


def _rules(kind: str) -> list[dict[str, Any]]:
    return [rule for doc in by_kind(kind) for rule in doc.get("rules", [])]


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_rbac_has_no_wildcard() -> None:
    for rule in _rules("ClusterRole") + _rules("Role"):
        for field in ("apiGroups", "resources", "verbs"):
            assert all("*" not in value for value in rule[field]), rule
        assert "nonResourceURLs" not in rule


def test_cluster_role_covers_exactly_the_resources_the_controller_uses() -> None:
    """The resources follow from the code; which verbs each needs is proven by running the controller under
    the role, and without each single grant of it (test_rbac_minimal.py)."""
    from t9k_provider.controller.kinds.registry import WATCHED_CHILD_TYPES

    needed: set[tuple[str, str]] = {("", "events")}
    for cls in KINDS.values():
        needed |= {(GROUP, cls.PLURAL), (GROUP, f"{cls.PLURAL}/status")}
    for api_version, _kind, plural in WATCHED_CHILD_TYPES:
        needed.add((api_version.rpartition("/")[0], plural))
    grants = _grants(_rules("ClusterRole"))
    assert {(group, resource) for group, resource, _verb in grants} == needed
    assert {verb for _group, _resource, verb in grants} <= CHILD_VERBS


def test_leader_lease_rights_are_namespaced() -> None:
    assert _grants(_rules("Role")) == {
        ("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")
    }
    (binding,) = by_kind("RoleBinding")
    (account,) = by_kind("ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "t9k-system"}
    ]


def test_deployment_runs_two_leader_elected_replicas_with_probes() -> None:
    (deployment,) = by_kind("Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    env = {e["name"] for e in container["env"]}
    args = [re.sub(r"\$\((\w+)\)", lambda m: f"value-of-{m.group(1)}", a) for a in container["args"]]
    assert {m for a in container["args"] for m in re.findall(r"\$\((\w+)\)", a)} <= env
    parsed = build_parser().parse_args(args)  # every flag the manifest passes exists
    assert parsed.leader_elect is True
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert parsed.health_port == ports["health"] and parsed.metrics_port == ports["metrics"]
    assert parsed.bind_address == "0.0.0.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
    assert pod["serviceAccountName"] == by_kind("ServiceAccount")[0]["metadata"]["name"]


def test_image_recipe_installs_the_hashed_controller_lock_without_airflow_as_non_root() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "--require-hashes -r /tmp/controller.lock" in dockerfile
    assert "COPY requirements/controller.lock" in dockerfile
    users = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert users and not users[-1].startswith(("root", "0"))
    lock = (ROOT / "requirements" / "controller.lock").read_text()
    packages = re.findall(r"^([A-Za-z0-9_.-]+)==", lock, re.M)
    assert packages and not [p for p in packages if "airflow" in p.lower()]
    assert "kubernetes-asyncio" in packages and "prometheus-client" in packages
