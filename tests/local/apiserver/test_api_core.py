"""Acceptance: transport, discovery, CRUD, metadata, errors, patch, tables
(docs/local-cluster.md#fidelity-what-behaves-like-kubernetes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client, utils
from kubernetes.client.rest import ApiException

from t9k_provider.testing import LocalCluster

pytestmark = pytest.mark.cluster


def _pod(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}], **spec},
    }


def _status(exc: ApiException) -> dict:
    return json.loads(exc.body)


# -- transport, auth, discovery ------------------------------------------------------------------------------


def test_requests_without_the_token_get_401_but_health_checks_do_not(cluster: LocalCluster) -> None:
    cluster_no_token = LocalCluster(cluster.state_dir)
    cluster_no_token.port, cluster_no_token.token = cluster.port, "wrong"
    status, _, body = cluster_no_token.request("GET", "/api/v1/namespaces")
    assert status == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
    for path in ("/healthz", "/livez", "/readyz"):
        status, _, text = cluster_no_token.request("GET", path)
        assert (status, text) == (200, "ok")


def test_state_dir_and_kubeconfig_are_private(cluster: LocalCluster) -> None:
    assert cluster.state_dir.stat().st_mode & 0o777 == 0o700
    assert cluster.kubeconfig.stat().st_mode & 0o777 == 0o600
    assert f"https://127.0.0.1:{cluster.port}" in cluster.kubeconfig.read_text()
    for private in ("pki/server.key", "token", "store.db", "store.db-wal", "server.log"):
        assert (cluster.state_dir / private).stat().st_mode & 0o777 == 0o600, private


def test_version_and_discovery(cluster: LocalCluster) -> None:
    version = client.VersionApi(cluster.api_client()).get_code()
    assert version.major == "1" and version.git_version.startswith("v1.")
    status, _, api = cluster.request("GET", "/api")
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    assert api["serverAddressByClientCIDRs"][0]["serverAddress"] == f"127.0.0.1:{cluster.port}"
    _, _, core = cluster.request("GET", "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["kind"] == "Pod" and by_name["pods"]["namespaced"] is True
    assert "po" in by_name["pods"]["shortNames"]
    assert by_name["pods/log"]["verbs"] == ["get"]
    assert by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert "pods/binding" in by_name and by_name["namespaces"]["namespaced"] is False
    _, _, groups = cluster.request(
        "GET",
        "/apis",
        headers={
            "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        },
    )
    names = [g["name"] for g in groups["groups"]]
    assert groups["kind"] == "APIGroupList"
    for group in (
        "batch",
        "coordination.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
        "scheduler.tensorstack.dev",
        "tensorstack.dev",
        "flinkoperator.k8s.io",
    ):
        assert group in names
    status, _, group = cluster.request("GET", "/apis/batch")
    assert status == 200 and group["kind"] == "APIGroup" and group["preferredVersion"]["version"] == "v1"


def test_openapi_v3_lists_field_validation_on_patch(cluster: LocalCluster) -> None:
    _, _, root = cluster.request("GET", "/openapi/v3")
    assert root["paths"]["api/v1"]["serverRelativeURL"] == "/openapi/v3/api/v1"
    assert "apis/batch/v1" in root["paths"]
    _, _, doc = cluster.request("GET", "/openapi/v3/api/v1")
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    status, _, _ = cluster.request("GET", "/openapi/v3/apis/nope/v1")
    assert status == 404


def test_openapi_v2_and_unknown_paths_are_404_status(cluster: LocalCluster) -> None:
    for path in ("/openapi/v2", "/swagger-2.0.0.pb-v1", "/api/v1/nothings", "/apis/nope/v1"):
        status, headers, body = cluster.request("GET", path)
        assert status == 404, path
        assert headers["content-type"].startswith("application/json")
        assert body["reason"] == "NotFound"
        assert body["message"] == "the server could not find the requested resource"


def test_content_negotiation(cluster: LocalCluster) -> None:
    for accept in (
        "application/json",
        "*/*",
        "application/json, */*",
        "application/vnd.kubernetes.protobuf, application/json",
    ):
        status, _, _ = cluster.request("GET", "/api/v1/namespaces/default", headers={"Accept": accept})
        assert status == 200, accept
    status, _, body = cluster.request(
        "GET", "/api/v1/namespaces/default", headers={"Accept": "application/vnd.kubernetes.protobuf"}
    )
    assert status == 406 and body["reason"] == "NotAcceptable"


def test_boot_objects_exist(core: client.CoreV1Api) -> None:
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    node = core.read_node("t9k-local-node")
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    assert core.read_namespaced_service_account("default", "default").metadata.name == "default"


# -- create / read / list ------------------------------------------------------------------------------------


def test_create_sets_system_metadata_and_pod_defaults(core: client.CoreV1Api, ns: str) -> None:
    body = _pod("p1")
    body["metadata"].update(uid="forged", creationTimestamp="2001-01-01T00:00:00Z")
    pod = core.create_namespaced_pod(ns, body)
    assert pod.metadata.uid != "forged" and len(pod.metadata.uid) == 36
    assert pod.metadata.creation_timestamp.year > 2001
    assert isinstance(pod.metadata.resource_version, str) and pod.metadata.resource_version.isdigit()
    assert pod.metadata.namespace == ns
    assert pod.spec.restart_policy == "Always" and pod.spec.termination_grace_period_seconds == 30
    assert pod.spec.dns_policy == "ClusterFirst" and pod.spec.scheduler_name == "default-scheduler"
    assert pod.spec.service_account_name == "default" and pod.spec.enable_service_links is True
    c = pod.spec.containers[0]
    assert (c.image_pull_policy, c.termination_message_path, c.termination_message_policy) == (
        "Always",
        "/dev/termination-log",
        "File",
    )
    assert pod.status.phase == "Pending" and pod.status.qos_class == "BestEffort"


def test_service_defaults_and_allocated_cluster_ip(core: client.CoreV1Api, ns: str) -> None:
    svc = core.create_namespaced_service(ns, {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    assert svc.spec.type == "ClusterIP" and svc.spec.session_affinity == "None"
    assert svc.spec.cluster_ip.startswith("10.96.")
    assert svc.spec.ports[0].protocol == "TCP" and svc.spec.ports[0].target_port == 80
    other = core.create_namespaced_service(
        ns, {"metadata": {"name": "web2"}, "spec": {"ports": [{"port": 80}]}}
    )
    assert other.spec.cluster_ip != svc.spec.cluster_ip


def test_generate_name(core: client.CoreV1Api, ns: str) -> None:
    cm = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "cfg-"}, "data": {"a": "1"}})
    assert cm.metadata.name.startswith("cfg-") and len(cm.metadata.name) == 9
    assert set(cm.metadata.name[4:]) <= set("bcdfghjklmnpqrstvwxz2456789")
    long = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "x" * 70}})
    assert len(long.metadata.name) == 63


def test_batch_job_with_only_generate_name(cluster: LocalCluster, ns: str) -> None:
    """Job defaulting labels the pod template with the job's name: the generated one."""
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    body = {"metadata": {"generateName": "train-"}, "spec": {"suspend": True, "template": template}}
    status, _, job = cluster.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body)
    assert status == 201, job
    name = job["metadata"]["name"]
    assert name.startswith("train-") and len(name) == len("train-") + 5
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/job-name"] == labels["job-name"] == name
    assert labels["controller-uid"] == job["metadata"]["uid"]


def test_list_shape_and_resource_version(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    _, _, empty = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps")
    assert empty["kind"] == "ConfigMapList" and empty["apiVersion"] == "v1"
    assert [i["metadata"]["name"] for i in empty["items"]] == ["kube-root-ca.crt"]  # every namespace has it
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a", "labels": {"app": "x"}}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "b"}})
    core.create_namespaced_config_map("default", {"metadata": {"generateName": "elsewhere-"}})
    _, _, listed = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a", "b", "kube-root-ca.crt"]
    assert "kind" not in listed["items"][0]  # built-in list items omit kind/apiVersion
    assert int(listed["metadata"]["resourceVersion"]) >= max(
        int(i["metadata"]["resourceVersion"]) for i in listed["items"]
    )
    everywhere = core.list_config_map_for_all_namespaces()
    assert len(everywhere.items) >= 4


def test_label_and_field_selectors(core: client.CoreV1Api, ns: str) -> None:
    for name, labels in (("a", {"app": "a", "tier": "x"}), ("b", {"app": "b"}), ("c", {})):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": labels}})

    def names(**kw: str) -> list[str]:
        return [i.metadata.name for i in core.list_namespaced_config_map(ns, **kw).items]

    assert names(label_selector="app in (a,b),!tier") == ["b"]
    # != matches objects without the key (the namespace's kube-root-ca.crt too)
    assert names(label_selector="app!=a") == ["b", "c", "kube-root-ca.crt"]
    assert names(label_selector="tier") == ["a"]
    assert names(field_selector="metadata.name=c") == ["c"]
    assert names(field_selector="metadata.name!=c,metadata.namespace=" + ns) == ["a", "b", "kube-root-ca.crt"]
    with pytest.raises(ApiException) as bad:
        core.list_namespaced_config_map(ns, label_selector="app in (a")
    assert bad.value.status == 400 and _status(bad.value)["reason"] == "BadRequest"
    with pytest.raises(ApiException) as unsupported:
        core.list_namespaced_config_map(ns, field_selector="spec.foo=1")
    assert unsupported.value.status == 400
    assert "field label not supported: spec.foo" in _status(unsupported.value)["message"]


def test_pod_field_selectors(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, _pod("p"))
    assert [
        p.metadata.name for p in core.list_namespaced_pod(ns, field_selector="status.phase=Pending").items
    ] == ["p"]
    assert core.list_namespaced_pod(ns, field_selector="spec.nodeName=other").items == []


def test_paging_with_limit_and_continue(core: client.CoreV1Api, ns: str) -> None:
    for i in range(5):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"c{i}"}})
    first = core.list_namespaced_config_map(ns, limit=2)
    assert [i.metadata.name for i in first.items] == ["c0", "c1"] and first.metadata._continue
    second = core.list_namespaced_config_map(ns, limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_config_map(ns, limit=2, _continue=second.metadata._continue)
    assert [i.metadata.name for i in second.items + third.items] == ["c2", "c3", "c4", "kube-root-ca.crt"]
    assert not third.metadata._continue
    assert second.metadata.resource_version == first.metadata.resource_version


def test_pages_and_exact_lists_are_snapshots(core: client.CoreV1Api, ns: str) -> None:
    for i in range(4):  # named to sort before the namespace's kube-root-ca.crt
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"a{i}"}, "data": {"v": "old"}})
    first = core.list_namespaced_config_map(ns, limit=2)
    core.patch_namespaced_config_map("a3", ns, {"data": {"v": "new"}})
    core.delete_namespaced_config_map("a2", ns)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a9"}})
    rest = core.list_namespaced_config_map(ns, limit=10, _continue=first.metadata._continue)
    assert [(c.metadata.name, c.data.get("v")) for c in rest.items] == [
        ("a2", "old"),
        ("a3", "old"),
        ("kube-root-ca.crt", None),
    ]
    exact = core.list_namespaced_config_map(
        ns, resource_version=first.metadata.resource_version, resource_version_match="Exact"
    )
    assert [c.metadata.name for c in exact.items] == ["a0", "a1", "a2", "a3", "kube-root-ca.crt"]
    assert exact.metadata.resource_version == first.metadata.resource_version


def test_list_accepts_resource_version_parameters(cluster: LocalCluster, ns: str) -> None:
    for query in (
        "resourceVersion=0",
        "resourceVersion=1&resourceVersionMatch=NotOlderThan",
        "limit=500",
        "timeout=32s&fieldManager=kubectl&pretty=true&shardSelector=x",
    ):
        status, _, body = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods?{query}")
        assert status == 200 and body["items"] == [], query


# -- errors --------------------------------------------------------------------------------------------------


def test_error_catalogue(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("nope", ns)
    assert missing.value.status == 404
    assert _status(missing.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as dup:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    assert dup.value.status == 409 and _status(dup.value)["reason"] == "AlreadyExists"
    assert _status(dup.value)["message"] == 'configmaps "dup" already exists'
    with pytest.raises(ApiException) as lease:
        client.CoordinationV1Api(cluster.api_client()).read_namespaced_lease("x", ns)
    assert _status(lease.value)["message"] == 'leases.coordination.k8s.io "x" not found'
    assert _status(lease.value)["details"]["group"] == "coordination.k8s.io"
    status, _, body = cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "rv", "resourceVersion": "5"}}
    )
    assert (status, body["reason"], body["message"]) == (
        500,
        "",
        "resourceVersion should not be set on objects to be created",
    )
    status, _, body = cluster.request(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert status == 400 and body["reason"] == "BadRequest"
    status, _, body = cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/configmaps", b"a=b", headers={"Content-Type": "text/csv"}
    )
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    status, _, body = cluster.request("PUT", f"/api/v1/namespaces/{ns}/configmaps")
    assert status == 405 and body["reason"] == "MethodNotAllowed"


def test_json_responses_end_with_a_newline(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    """kube-apiserver encodes with Go's json.Encoder, which ends the body with a newline; clients quote error
    bodies verbatim (kubernetes.utils' FailToCreateError, as upstream's e2e suite checks it)."""
    api = cluster.api_client()
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nl", "namespace": ns}}
    utils.create_from_dict(api, manifest)
    with pytest.raises(utils.FailToCreateError) as conflict:
        utils.create_from_dict(api, manifest)
    assert str(conflict.value) == (
        'Error from server (Conflict): {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        '"message":"configmaps \\"nl\\" already exists","reason":"AlreadyExists","details":{"name":"nl",'
        '"kind":"configmaps"},"code":409}\n'
    )
    read = core.read_namespaced_config_map("nl", ns, _preload_content=False).data
    listed = core.list_namespaced_config_map(ns, _preload_content=False).data
    assert read.endswith(b"}\n") and json.loads(read)["metadata"]["name"] == "nl"
    assert listed.endswith(b"]}\n") and len(json.loads(listed)["items"]) == 2  # and kube-root-ca.crt


def test_namespace_rules(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as missing_ns:
        core.create_namespaced_config_map("no-such-ns", {"metadata": {"name": "x"}})
    assert (
        missing_ns.value.status == 404
        and _status(missing_ns.value)["message"] == 'namespaces "no-such-ns" not found'
    )
    with pytest.raises(ApiException) as mismatch:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "x", "namespace": "default"}})
    assert mismatch.value.status == 400
    assert _status(mismatch.value)["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )


def test_body_without_content_type_is_json(cluster: LocalCluster, ns: str) -> None:
    status, _, created = cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/configmaps", json.dumps({"metadata": {"name": "raw"}}).encode()
    )
    assert status == 201 and created["metadata"]["name"] == "raw"
    created["data"] = {"k": "v"}
    status, _, updated = cluster.request(
        "PUT", f"/api/v1/namespaces/{ns}/configmaps/raw", json.dumps(created).encode()
    )
    assert status == 200 and updated["data"] == {"k": "v"}
    status, _, body = cluster.request(
        "DELETE",
        f"/api/v1/namespaces/{ns}/configmaps/raw",
        json.dumps({"propagationPolicy": "Background"}).encode(),
    )
    assert (
        status == 200 and body["status"] == "Success" and body["details"]["uid"] == created["metadata"]["uid"]
    )


# -- update, concurrency, patch ------------------------------------------------------------------------------


def test_optimistic_concurrency(core: client.CoreV1Api, ns: str) -> None:
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "cc"}, "data": {"v": "1"}})
    cm.data = {"v": "2"}
    updated = core.replace_namespaced_config_map("cc", ns, cm)
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    cm.data = {"v": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("cc", ns, cm)
    assert conflict.value.status == 409
    assert _status(conflict.value)["message"] == (
        'Operation cannot be fulfilled on configmaps "cc": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    cm.metadata.resource_version = None  # unconditional update is allowed for configmaps
    assert core.replace_namespaced_config_map("cc", ns, cm).data == {"v": "3"}


def test_lease_update_needs_resource_version_and_put_creates(cluster: LocalCluster, ns: str) -> None:
    leases = client.CoordinationV1Api(cluster.api_client())
    lease = {
        "metadata": {"name": "lock"},
        "spec": {
            "holderIdentity": "a",
            "leaseDurationSeconds": 15,
            "renewTime": "2025-01-02T03:04:05.123456789+00:00",
        },
    }
    created = leases.create_namespaced_lease(ns, lease)
    assert created.spec.renew_time.microsecond == 123456
    with pytest.raises(ApiException) as again:
        leases.create_namespaced_lease(ns, lease)
    assert again.value.status == 409
    with pytest.raises(ApiException) as no_rv:
        leases.replace_namespaced_lease("lock", ns, lease)
    assert no_rv.value.status == 422
    assert (
        "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
        in _status(no_rv.value)["message"]
    )
    lease["metadata"]["resourceVersion"] = created.metadata.resource_version
    lease["spec"]["holderIdentity"] = "b"
    assert leases.replace_namespaced_lease("lock", ns, lease).spec.holder_identity == "b"
    status, _, body = cluster.request(
        "PUT",
        f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/fresh",
        {"metadata": {"name": "fresh"}, "spec": {"holderIdentity": "c"}},
    )
    assert status == 201 and body["metadata"]["name"] == "fresh"


def test_patch_content_types(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "pp", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "img:1", "env": [{"name": "A", "value": "1"}]}]},
        },
    )
    # dict -> strategic merge for built-ins: containers merge by name, so the env survives an image change
    pod = core.patch_namespaced_pod(
        "pp",
        ns,
        {"spec": {"containers": [{"name": "c", "image": "img:2"}]}, "metadata": {"labels": {"b": "2"}}},
    )
    assert pod.spec.containers[0].image == "img:2"
    assert [(e.name, e.value) for e in pod.spec.containers[0].env] == [("A", "1")]
    assert pod.metadata.labels == {"a": "1", "b": "2"}
    svc = core.create_namespaced_service(
        ns, {"metadata": {"name": "ports"}, "spec": {"ports": [{"name": "a", "port": 80}]}}
    )
    svc = core.patch_namespaced_service("ports", ns, {"spec": {"ports": [{"name": "b", "port": 81}]}})
    assert sorted(p.port for p in svc.spec.ports) == [80, 81]  # Service ports merge by port
    pod = core.patch_namespaced_pod("pp", ns, [{"op": "replace", "path": "/metadata/labels/a", "value": "9"}])
    assert pod.metadata.labels["a"] == "9"
    path = f"/api/v1/namespaces/{ns}/pods/pp"
    status, _, body = cluster.request(
        "PATCH",
        path,
        [{"op": "test", "path": "/metadata/labels/a", "value": "x"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert status == 422
    status, _, body = cluster.request(
        "PATCH",
        path,
        {"metadata": {"labels": {"a": "1"}}},
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert (
        status == 400 and "cannot unmarshal object into Go value of type jsonpatch.Patch" in body["message"]
    )
    status, _, body = cluster.request(
        "PATCH",
        path,
        {"metadata": {"labels": {"a": None}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200 and "a" not in body["metadata"]["labels"]
    status, _, body = cluster.request("PATCH", path, {"metadata": {}}, headers={"Content-Type": "text/plain"})
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    status, _, body = cluster.request(
        "PATCH",
        path,
        {"metadata": {"resourceVersion": "1", "labels": {"z": "1"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 409


def test_kubectl_apply_strategic_patch_with_set_element_order(cluster: LocalCluster, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/pods/sp"
    cluster.request(
        "POST",
        f"/api/v1/namespaces/{ns}/pods",
        {
            "metadata": {"name": "sp"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "img:1",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "1"}],
                    }
                ]
            },
        },
    )
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}],
            "containers": [
                {
                    "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
                    "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                    "name": "c",
                }
            ],
        }
    }
    status, _, body = cluster.request(
        "PATCH", path, patch, headers={"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert status == 422  # env is part of the immutable pod spec, as on a real server
    cm_path = f"/api/v1/namespaces/{ns}/configmaps/sp"
    cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "sp"}, "data": {"a": "1"}}
    )
    status, _, body = cluster.request(
        "PATCH",
        cm_path,
        {"data": {"b": "2", "$patch": "replace"}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert status == 200 and body["data"] == {"b": "2"}


def test_noop_patch_keeps_resource_version(core: client.CoreV1Api, ns: str) -> None:
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "noop", "labels": {"a": "1"}}})
    again = core.patch_namespaced_config_map("noop", ns, {"metadata": {"labels": {"a": "1"}}})
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_pod_status_split(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, _pod("st"))
    pod = core.patch_namespaced_pod_status(
        "st", ns, {"status": {"phase": "Running"}, "spec": {"nodeName": "elsewhere"}}
    )
    assert pod.status.phase == "Running" and pod.spec.node_name is None
    pod = core.patch_namespaced_pod(
        "st", ns, {"status": {"phase": "Failed"}, "metadata": {"labels": {"x": "1"}}}
    )
    assert pod.status.phase == "Running" and pod.metadata.labels == {"x": "1"}
    assert core.read_namespaced_pod_status("st", ns).status.phase == "Running"


def test_pod_spec_is_immutable_but_image_may_change(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, _pod("imm"))
    pod = core.patch_namespaced_pod(
        "imm", ns, {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}
    )
    assert pod.spec.containers[0].image == "busybox:2"
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("imm", ns, {"spec": {"restartPolicy": "Never"}})
    assert exc.value.status == 422 and _status(exc.value)["reason"] == "Invalid"
    assert "pod updates may not change fields other than" in _status(exc.value)["message"]


def test_binding_assigns_the_node_once(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, _pod("bind"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "bind"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "t9k-local-node"},
    }
    status, _, _ = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods/bind/binding", binding)
    assert status == 201
    pod = core.read_namespaced_pod("bind", ns)
    assert pod.spec.node_name == "t9k-local-node"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in pod.status.conditions)
    status, _, _ = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods/bind/binding", binding)
    assert status == 409


def test_invalid_names_get_422_with_field_causes(core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "Bad_Name"}})
    body = _status(exc.value)
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert body["message"].startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"'
    )
    with pytest.raises(ApiException) as svc:
        core.create_namespaced_service(ns, {"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 1}]}})
    assert svc.value.status == 422


def test_dry_run_persists_nothing(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    status, _, body = cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/configmaps?dryRun=All", {"metadata": {"name": "dry"}}
    )
    assert status == 201 and body["metadata"]["name"] == "dry"
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["kube-root-ca.crt"]


# -- events --------------------------------------------------------------------------------------------------


def test_core_and_events_k8s_io_views_share_objects(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_event(
        ns,
        {
            "metadata": {"generateName": "ev-"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
            "reason": "Started",
            "message": "hello",
            "type": "Normal",
            "firstTimestamp": "2025-01-02T03:04:05.5Z",
            "source": {"component": "kubelet"},
        },
    )
    listed = core.list_namespaced_event(
        ns,
        field_selector="involvedObject.name=p",
        resource_version="1",
        resource_version_match="NotOlderThan",
    )
    assert len(listed.items) == 1 and listed.items[0].message == "hello"
    assert listed.items[0].first_timestamp.microsecond == 0
    _, _, v1 = cluster.request("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")
    assert v1["items"][0]["note"] == "hello" and v1["items"][0]["regarding"]["name"] == "p"
    status, _, _ = cluster.request(
        "POST",
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": "e2"},
            "regarding": {"kind": "Pod", "name": "p"},
            "reason": "R",
            "type": "Normal",
            "action": "A",
            "reportingController": "x",
            "reportingInstance": "y",
        },
    )
    assert status == 422  # eventTime is required through events.k8s.io/v1
    status, _, good = cluster.request(
        "POST",
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": "e3"},
            "regarding": {"kind": "Pod", "name": "p", "namespace": ns},
            "reason": "R",
            "type": "Normal",
            "action": "A",
            "note": "n",
            "reportingController": "x",
            "reportingInstance": "y",
            "eventTime": "2025-01-02T03:04:05.123456+00:00",
        },
    )
    assert status == 201 and good["eventTime"] == "2025-01-02T03:04:05.123456Z"
    assert core.read_namespaced_event("e3", ns).reporting_component == "x"


# -- tables --------------------------------------------------------------------------------------------------

TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)


def test_table_output_for_pods(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, _pod("tp"))
    _, _, table = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods?limit=500", headers={"Accept": TABLE})
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
    ]
    row = table["rows"][0]
    assert row["cells"][:4] == ["tp", "0/1", "Pending", 0]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "tp"
    _, _, full = cluster.request(
        "GET", f"/api/v1/namespaces/{ns}/pods?includeObject=Object", headers={"Accept": TABLE}
    )
    assert full["rows"][0]["object"]["spec"]["containers"][0]["name"] == "c"
    _, _, cms = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps", headers={"Accept": TABLE})
    assert [c["name"] for c in cms["columnDefinitions"]] == ["Name", "Age"]
    _, _, namespaces = cluster.request("GET", f"/api/v1/namespaces/{ns}", headers={"Accept": TABLE})
    assert namespaces["rows"][0]["cells"][:2] == [ns, "Active"]
    _, _, nodes = cluster.request("GET", "/api/v1/nodes", headers={"Accept": TABLE})
    assert nodes["rows"][0]["cells"][:3] == ["t9k-local-node", "Ready", "control-plane"]
    core.create_namespaced_service(ns, {"metadata": {"name": "tsvc"}, "spec": {"ports": [{"port": 80}]}})
    _, _, services = cluster.request("GET", f"/api/v1/namespaces/{ns}/services", headers={"Accept": TABLE})
    assert [c["name"] for c in services["columnDefinitions"]][:5] == [
        "Name",
        "Type",
        "Cluster-IP",
        "External-IP",
        "Port(s)",
    ]
    assert services["rows"][0]["cells"][4] == "80/TCP"


def test_embedded_compact_hook(cluster: LocalCluster, tmp_path: Path) -> None:
    status, _, body = cluster.request("POST", "/_embedded/compact", {})
    assert status == 200 and body["compacted"] == body["revision"]


def test_log_instance_follows_the_kubelet_rules(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_pod(ns, _pod("lg"))
    path = f"/api/v1/namespaces/{ns}/pods/lg/log"

    def with_status(container_status: dict) -> tuple[int, object]:
        core.patch_namespaced_pod_status(
            "lg",
            ns,
            {
                "status": {
                    "containerStatuses": [
                        {"name": "c", "image": "busybox", "imageID": "", "ready": False, **container_status}
                    ]
                }
            },
        )
        status, _, body = cluster.request("GET", path)
        return status, body

    status, body = with_status({"restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull"}}})
    assert (status, body["message"]) == (
        400,
        'container "c" in pod "lg" is waiting to start: image can\'t be pulled',
    )
    status, body = with_status(
        {
            "restartCount": 2,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1}},
        }
    )
    assert status == 200  # the last run's output while the container backs off
    status, _, body = cluster.request("GET", path + "?previous=true")
    assert status == 200


def test_server_side_apply_creates_then_merges(cluster: LocalCluster, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/applied"
    headers = {"Content-Type": "application/apply-patch+yaml"}
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: '1'\n"
    status, _, answer = cluster.request("PATCH", path, body, headers=headers)
    assert status == 400 and "fieldManager" in answer["message"]
    status, _, created = cluster.request("PATCH", path + "?fieldManager=test", body, headers=headers)
    assert status == 201 and created["data"] == {"a": "1"}
    status, _, merged = cluster.request(
        "PATCH", path + "?fieldManager=test", body.replace(b"a: '1'", b"b: '2'"), headers=headers
    )
    assert status == 200 and merged["data"] == {"a": "1", "b": "2"}  # no field ownership: `a` stays
