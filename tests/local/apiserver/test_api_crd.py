"""Acceptance: CRDs and custom resources: establishing, validation, pruning, the status and scale
subresources, and the patches a real server refuses (strategic merge: 415; a JSON object sent as json-patch:
400)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from t9k_provider.testing import LocalCluster

pytestmark = pytest.mark.cluster

GROUP = "example.t9k.dev"


def widget_crd(plural: str = "widgets", kind: str = "Widget", scope: str = "Namespaced") -> dict:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["replicas"],
                "properties": {
                    "replicas": {"type": "integer", "minimum": 0},
                    "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "phase": {"type": "string"},
                    "replicas": {"type": "integer"},
                    "observedGeneration": {"type": "integer"},
                },
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "shortNames": [plural[:3]]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    ],
                },
                {"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": schema}},
            ],
        },
    }


@pytest.fixture(scope="module")
def crds(cluster: LocalCluster) -> client.ApiextensionsV1Api:
    api = client.ApiextensionsV1Api(cluster.api_client())
    api.create_custom_resource_definition(widget_crd())
    wait_established(api, f"widgets.{GROUP}")
    return api


@pytest.fixture(scope="module")
def custom(cluster: LocalCluster, crds: client.ApiextensionsV1Api) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


def wait_established(api: client.ApiextensionsV1Api, name: str, timeout: float = 5) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        crd = api.read_custom_resource_definition(name)
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or ()):
            return crd
        time.sleep(0.05)
    raise AssertionError(f"CRD {name} was not established")


def widget(name: str, **spec: object) -> dict:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"replicas": 1, **spec},
    }


def _status(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_crd_is_established_with_accepted_names_and_discovery(
    cluster: LocalCluster, crds: client.ApiextensionsV1Api
) -> None:
    crd = crds.read_custom_resource_definition(f"widgets.{GROUP}")
    conditions = {c.type: c for c in crd.status.conditions}
    assert (
        conditions["NamesAccepted"].status == "True" and conditions["NamesAccepted"].reason == "NoConflicts"
    )
    assert conditions["Established"].reason == "InitialNamesAccepted"
    assert crd.status.accepted_names.list_kind == "WidgetList" and crd.status.stored_versions == ["v1"]
    assert crd.metadata.generation == 1
    _, _, resources = cluster.request("GET", f"/apis/{GROUP}/v1")
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["widgets"]["verbs"] == [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    assert by_name["widgets"]["shortNames"] == ["wid"]
    assert by_name["widgets/status"]["verbs"] == ["get", "patch", "update"]
    assert "widgets/scale" in by_name
    _, _, beta = cluster.request("GET", f"/apis/{GROUP}/v1beta1")
    assert [r["name"] for r in beta["resources"]] == ["widgets"]


def test_invalid_crds_are_rejected(crds: client.ApiextensionsV1Api) -> None:
    bad = widget_crd("gadgets", "Gadget")
    bad["metadata"]["name"] = "wrong.example.t9k.dev"
    with pytest.raises(ApiException) as exc:
        crds.create_custom_resource_definition(bad)
    assert exc.value.status == 422
    assert 'must be spec.names.plural+"."+spec.group' in _status(exc.value)["message"]


def test_name_conflicts_are_not_accepted(crds: client.ApiextensionsV1Api) -> None:
    other = widget_crd("gizmos", "Widget")  # same kind as widgets in the same group
    crds.create_custom_resource_definition(other)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        crd = crds.read_custom_resource_definition(f"gizmos.{GROUP}")
        names_accepted = {c.type: c for c in crd.status.conditions or ()}.get("NamesAccepted")
        if names_accepted is not None:
            break
        time.sleep(0.05)
    assert names_accepted is not None and names_accepted.status == "False"
    assert names_accepted.reason == "NameConflict"


def test_custom_resource_crud_generation_and_status_split(custom: client.CustomObjectsApi, ns: str) -> None:
    args = (GROUP, "v1", ns, "widgets")
    created = custom.create_namespaced_custom_object(*args, {**widget("w1"), "status": {"phase": "Forged"}})
    assert created["metadata"]["generation"] == 1 and "status" not in created  # create drops status
    assert created["spec"]["mode"] == "fast"  # schema default
    status = custom.patch_namespaced_custom_object_status(
        *args[:3],
        "widgets",
        "w1",
        {
            "status": {"phase": "Running", "observedGeneration": 1},
            "spec": {"replicas": 9},
            "metadata": {"labels": {"ignored": "yes"}},
        },
    )
    assert status["status"]["phase"] == "Running" and status["spec"]["replicas"] == 1
    assert "labels" not in status["metadata"] and status["metadata"]["generation"] == 1
    spec = custom.patch_namespaced_custom_object(
        *args, "w1", {"spec": {"replicas": 2}, "status": {"phase": "Ignored"}}
    )
    assert spec["metadata"]["generation"] == 2 and spec["status"]["phase"] == "Running"
    labels_only = custom.patch_namespaced_custom_object(*args, "w1", {"metadata": {"labels": {"a": "b"}}})
    assert labels_only["metadata"]["generation"] == 2
    listed = custom.list_namespaced_custom_object(*args)
    assert listed["kind"] == "WidgetList" and listed["items"][0]["kind"] == "Widget"  # CR items keep kind
    beta = custom.get_namespaced_custom_object(GROUP, "v1beta1", ns, "widgets", "w1")
    assert beta["apiVersion"] == f"{GROUP}/v1beta1"
    gone = custom.delete_namespaced_custom_object(*args, "w1")
    assert gone["kind"] == "Status" and gone["status"] == "Success" and gone["details"]["kind"] == "widgets"


def test_schema_validation_gives_422_with_causes(custom: client.CustomObjectsApi, ns: str) -> None:
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", widget("bad", replicas="three"))
    body = _status(exc.value)
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith(
        f'Widget.{GROUP} "bad" is invalid: spec.replicas: Invalid value: "string": '
        'spec.replicas in body must be of type integer: "string"'
    )
    assert body["details"]["causes"][0]["reason"] == "FieldValueTypeInvalid"
    assert body["details"]["causes"][0]["field"] == "spec.replicas"
    with pytest.raises(ApiException) as enum:
        custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", widget("bad", mode="medium"))
    assert _status(enum.value)["details"]["causes"][0]["reason"] == "FieldValueNotSupported"
    with pytest.raises(ApiException) as required:
        custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", {**widget("bad"), "spec": {}})
    assert _status(required.value)["details"]["causes"][0]["reason"] == "FieldValueRequired"


def test_strict_field_validation_rejects_undeclared_fields(cluster: LocalCluster, ns: str) -> None:
    path = f"/apis/{GROUP}/v1/namespaces/{ns}/widgets?fieldValidation=Strict"
    body = widget("strict", free={"kept": 1})
    body["spec"]["typo"] = 1
    status, _, answer = cluster.request("POST", path, body)
    assert (status, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == 'strict decoding error: unknown field "spec.typo"'
    del body["spec"]["typo"]
    status, _, _ = cluster.request("POST", path, body)
    assert status == 201


def test_unknown_fields_are_pruned_unless_preserved(custom: client.CustomObjectsApi, ns: str) -> None:
    created = custom.create_namespaced_custom_object(
        GROUP, "v1", ns, "widgets", {**widget("pruned", free={"anything": {"goes": 1}}), "extra": 1}
    )
    assert "extra" not in created and created["spec"]["free"] == {"anything": {"goes": 1}}
    updated = custom.patch_namespaced_custom_object_status(
        GROUP, "v1", ns, "widgets", "pruned", {"status": {"phase": "A", "undeclared": "dropped"}}
    )
    assert updated["status"] == {"phase": "A"}


def test_section0_traps_for_custom_resource_patches(
    cluster: LocalCluster, custom: client.CustomObjectsApi, ns: str
) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", widget("trap"))
    path = f"/apis/{GROUP}/v1/namespaces/{ns}/widgets/trap"
    status, _, body = cluster.request(
        "PATCH",
        path,
        {"spec": {"replicas": 3}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    assert "application/strategic-merge-patch+json" not in body["message"]
    status, _, body = cluster.request(
        "PATCH", path, {"spec": {"replicas": 3}}, headers={"Content-Type": "application/json-patch+json"}
    )
    assert status == 400
    assert body["message"] == "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    status, _, body = cluster.request(
        "PATCH",
        path,
        [{"op": "replace", "path": "/spec/replicas", "value": 3}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert status == 200 and body["spec"]["replicas"] == 3


async def test_asyncio_client_custom_object_patch_with_dict_is_rejected(
    cluster: LocalCluster, custom: client.CustomObjectsApi, ns: str
) -> None:
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.client.rest import ApiException as AsyncApiException

    custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", widget("pya"))
    async with cluster.async_api_client() as api:
        with pytest.raises(AsyncApiException) as exc:
            await aclient.CustomObjectsApi(api).patch_namespaced_custom_object(
                GROUP, "v1", ns, "widgets", "pya", {"spec": {"replicas": 5}}
            )
    assert exc.value.status == 400


def test_scale_subresource(cluster: LocalCluster, custom: client.CustomObjectsApi, ns: str) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", widget("sc", replicas=2))
    path = f"/apis/{GROUP}/v1/namespaces/{ns}/widgets/sc/scale"
    _, _, scale = cluster.request("GET", path)
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
    status, _, scale = cluster.request(
        "PATCH", path, {"spec": {"replicas": 4}}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert status == 200 and scale["spec"]["replicas"] == 4
    assert custom.get_namespaced_custom_object(GROUP, "v1", ns, "widgets", "sc")["spec"]["replicas"] == 4


def test_printer_columns_in_tables(cluster: LocalCluster, custom: client.CustomObjectsApi, ns: str) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", widget("tab", replicas=7))
    _, _, table = cluster.request(
        "GET",
        f"/apis/{GROUP}/v1/namespaces/{ns}/widgets",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    )
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Replicas", "Phase", "Age"]
    assert table["rows"][0]["cells"][:3] == ["tab", 7, None]


def test_cluster_scoped_crd_and_deletion_removes_instances(
    cluster: LocalCluster, crds: client.ApiextensionsV1Api
) -> None:
    crds.create_custom_resource_definition(widget_crd("globals", "Global", "Cluster"))
    wait_established(crds, f"globals.{GROUP}")
    custom = client.CustomObjectsApi(cluster.api_client())
    custom.create_cluster_custom_object(GROUP, "v1", "globals", {**widget("g1"), "kind": "Global"})
    assert custom.get_cluster_custom_object(GROUP, "v1", "globals", "g1")["metadata"].get("namespace") is None
    crds.delete_custom_resource_definition(f"globals.{GROUP}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, _, _ = cluster.request("GET", f"/apis/{GROUP}/v1/globals")
        if status == 404:
            break
        time.sleep(0.05)
    assert status == 404
    with pytest.raises(ApiException) as exc:
        crds.read_custom_resource_definition(f"globals.{GROUP}")
    assert exc.value.status == 404
    _, _, resources = cluster.request("GET", f"/apis/{GROUP}/v1")
    assert "globals" not in [r["name"] for r in resources["resources"]]


def test_companion_crds_are_registered_at_boot(cluster: LocalCluster) -> None:
    custom = client.CustomObjectsApi(cluster.api_client())
    for group, plural, kind in (
        ("scheduler.tensorstack.dev", "podgroups", "PodGroup"),
        ("tensorstack.dev", "tensorboards", "TensorBoard"),
        ("flinkoperator.k8s.io", "flinkclusters", "FlinkCluster"),
    ):
        obj = custom.create_namespaced_custom_object(
            group,
            "v1beta1",
            "default",
            plural,
            {
                "apiVersion": f"{group}/v1beta1",
                "kind": kind,
                "metadata": {"name": f"x-{plural}"},
                "spec": {"anything": [1, 2]},
            },
        )
        assert obj["spec"] == {"anything": [1, 2]}
        patched = custom.patch_namespaced_custom_object_status(
            group, "v1beta1", "default", plural, f"x-{plural}", {"status": {"free": "form"}}
        )
        assert patched["status"] == {"free": "form"}


def test_transition_rule_keeps_a_t9k_jobs_resume_specs_immutable(cluster: LocalCluster, ns: str) -> None:
    """01-genericjob.md, 暂停模式: ``pause.enabled`` may change at any time, ``resumeSpecs`` never. The CRD's
    transition rule (``self == oldSelf``) is enforced by the server: a 422 that names the field."""
    custom = client.CustomObjectsApi(cluster.api_client())
    group, version, plural = "batch.tensorstack.dev", "v1beta1", "genericjobs"
    job = {
        "apiVersion": f"{group}/{version}",
        "kind": "GenericJob",
        "metadata": {"name": "paused"},
        "spec": {
            "runMode": {"pause": {"enabled": True, "resumeSpecs": [{"type": "worker", "command": ["a"]}]}},
            "replicaSpecs": [
                {"type": "worker", "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            ],
        },
    }
    custom.create_namespaced_custom_object(group, version, ns, plural, job)
    resumed = {"spec": {"runMode": {"pause": {"enabled": False}}}}
    custom.patch_namespaced_custom_object(group, version, ns, plural, "paused", resumed)  # allowed
    changed = {"spec": {"runMode": {"pause": {"resumeSpecs": [{"type": "worker", "command": ["b"]}]}}}}
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(group, version, ns, plural, "paused", changed)
    body = _status(exc.value)
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    (cause,) = body["details"]["causes"]
    assert cause["field"] == "spec.runMode.pause.resumeSpecs" and cause["reason"] == "FieldValueInvalid"
    assert "resumeSpecs cannot be changed (only pause.enabled can)" in cause["message"]
    stored = custom.get_namespaced_custom_object(group, version, ns, plural, "paused")
    assert stored["spec"]["runMode"]["pause"]["resumeSpecs"][0]["command"] == ["a"]


@pytest.mark.usefixtures("kubectl_binary")
async def test_kubectl_and_the_asyncio_client_meet_the_same_transition_rule(
    cluster: LocalCluster, ns: str, tmp_path: Path
) -> None:
    """The 422 of a changed ``resumeSpecs`` reaches kubectl (its message names the field) and
    kubernetes_asyncio (a Status with the field's cause) as it reaches the ``kubernetes`` client."""
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.client.rest import ApiException as AsyncApiException

    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "frozen"},
        "spec": {
            "runMode": {"pause": {"enabled": True, "resumeSpecs": [{"type": "worker", "command": ["a"]}]}},
            "replicaSpecs": [
                {"type": "worker", "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            ],
        },
    }
    client.CustomObjectsApi(cluster.api_client()).create_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", ns, "genericjobs", job
    )
    changed = {"spec": {"runMode": {"pause": {"resumeSpecs": [{"type": "worker", "command": ["b"]}]}}}}
    run = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(tmp_path), "-n", ns,
         "patch", "genericjob", "frozen", "--type", "merge", "-p", json.dumps(changed)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout
    assert "spec.runMode.pause.resumeSpecs: Invalid value" in run.stderr, run.stderr
    async with cluster.async_api_client() as api:
        with pytest.raises(AsyncApiException) as exc:
            await aclient.CustomObjectsApi(api).patch_namespaced_custom_object(
                "batch.tensorstack.dev", "v1beta1", ns, "genericjobs", "frozen", changed,
                _content_type="application/merge-patch+json",
            )  # fmt: skip
    assert exc.value.status == 422
    (cause,) = json.loads(exc.value.body)["details"]["causes"]
    assert cause["field"] == "spec.runMode.pause.resumeSpecs"
