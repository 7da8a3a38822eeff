"""RBAC, ServiceAccount tokens, reviews and the ServiceAccount admission, through the real clients."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from t9k_provider.local.apiserver.authn import deleted_before
from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.pods import pod_names

pytestmark = pytest.mark.cluster

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture(scope="module")
def rbac(cluster: LocalCluster) -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(cluster.api_client())


def _client_as(cluster: LocalCluster, token: str, ca_file: str | None = None) -> client.ApiClient:
    config = client.Configuration()
    config.host = cluster.base_url
    config.api_key = {"BearerToken": token}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    config.ssl_ca_cert = ca_file or str(cluster.state.ca_cert)
    return client.ApiClient(config)


def _token(core: client.CoreV1Api, ns: str, account: str, **spec: Any) -> str:
    request = core.create_namespaced_service_account_token(account, ns, {"spec": spec})
    return request.status.token


def _account(core: client.CoreV1Api, ns: str, name: str = "robot") -> str:
    core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
    return name


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1", "command": ["true"]}], **spec},
    }


def _status(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


# -- storage and validation -------------------------------------------------------------------------------


def test_role_and_binding_crud_list_watch(rbac: client.RbacAuthorizationV1Api, ns: str) -> None:
    role = {
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}],
    }
    created = rbac.create_namespaced_role(ns, role)
    assert created.rules[0].resources == ["pods", "pods/log"]
    rbac.patch_namespaced_role("reader", ns, {"metadata": {"labels": {"a": "b"}}})
    assert rbac.read_namespaced_role("reader", ns).metadata.labels == {"a": "b"}
    binding = {
        "metadata": {"name": "read"},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot"}, {"kind": "User", "name": "alice"}],
    }
    made = rbac.create_namespaced_role_binding(ns, binding)
    assert [s.api_group for s in made.subjects] == ["", RBAC]  # defaulted per subject kind
    items = rbac.list_namespaced_role_binding(ns).items
    assert [b.metadata.name for b in items] == ["read"]
    events = list(watch.Watch().stream(rbac.list_namespaced_role, ns, timeout_seconds=1, _request_timeout=10))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "reader")]
    rbac.delete_namespaced_role("reader", ns)
    rbac.delete_namespaced_role_binding("read", ns)
    assert rbac.list_namespaced_role(ns).items == []


def test_role_ref_is_immutable_and_rules_are_validated(rbac: client.RbacAuthorizationV1Api, ns: str) -> None:
    rbac.create_namespaced_role_binding(
        ns, {"metadata": {"name": "b"}, "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "x"}}
    )
    with pytest.raises(ApiException) as err:
        rbac.patch_namespaced_role_binding(
            "b", ns, {"roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "y"}}
        )
    assert err.value.status == 422
    assert "roleRef: Invalid value" in _status(err.value)["message"]
    assert "cannot change roleRef" in _status(err.value)["message"]
    with pytest.raises(ApiException) as err:
        rbac.create_namespaced_role(
            ns, {"metadata": {"name": "r"}, "rules": [{"nonResourceURLs": ["/x"], "verbs": []}]}
        )
    message = _status(err.value)["message"]
    assert "rules[0].verbs: Required value: verbs must contain at least one value" in message
    assert "namespaced rules cannot apply to non-resource URLs" in message
    with pytest.raises(ApiException) as err:
        rbac.create_cluster_role_binding(
            {"metadata": {"name": "crb-bad"}, "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "x"}}
        )
    assert (
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"'
        in _status(err.value)["message"]
    )


def test_cluster_role_aggregation(rbac: client.RbacAuthorizationV1Api) -> None:
    rbac.create_cluster_role(
        {
            "metadata": {"name": "agg-parent"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg-test": "true"}}]},
        }
    )
    rule = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]}
    rbac.create_cluster_role(
        {"metadata": {"name": "agg-child", "labels": {"agg-test": "true"}}, "rules": [rule]}
    )
    rbac.create_cluster_role({"metadata": {"name": "agg-other"}, "rules": [{**rule, "verbs": ["delete"]}]})
    parent = wait_for("aggregated rules", lambda: (r := rbac.read_cluster_role("agg-parent")).rules and r)
    assert [(r.api_groups, r.resources, r.verbs) for r in parent.rules] == [(["batch"], ["jobs"], ["get"])]
    rbac.patch_cluster_role("agg-child", {"metadata": {"labels": {"agg-test": "false"}}})
    wait_for("aggregated rules gone", none_left(lambda: rbac.read_cluster_role("agg-parent").rules))


def test_bootstrap_policy_is_there(rbac: client.RbacAuthorizationV1Api) -> None:
    names = {r.metadata.name for r in rbac.list_cluster_role().items}
    assert {"cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer"} <= names
    admin = rbac.read_cluster_role_binding("cluster-admin")
    assert [(s.kind, s.name) for s in admin.subjects] == [("Group", "system:masters")]


# -- authentication, enforcement and reviews ----------------------------------------------------------------


def test_service_account_token_identity_and_403(
    cluster: LocalCluster, core: client.CoreV1Api, rbac: client.RbacAuthorizationV1Api, ns: str
) -> None:
    account = _account(core, ns)
    token = _token(core, ns, account)
    api = _client_as(cluster, token)
    review = client.AuthenticationV1Api(api).create_self_subject_review({})
    user = review.status.user_info
    assert user.username == f"system:serviceaccount:{ns}:{account}"
    assert user.groups == ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]
    assert user.uid == core.read_namespaced_service_account(account, ns).metadata.uid
    sa_core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as err:
        sa_core.create_namespaced_pod(ns, _pod("p"))
    assert err.value.status == 403
    assert _status(err.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods is forbidden: User "system:serviceaccount:{ns}:{account}" cannot create resource '
        f'"pods" in API group "" in the namespace "{ns}"',
        "reason": "Forbidden",
        "details": {"name": "", "kind": "pods"},
        "code": 403,
    }
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(sa_core.list_namespaced_pod, ns, timeout_seconds=1))
    assert err.value.status == 403
    with pytest.raises(ApiException) as err:
        client.AppsV1Api(api).read_namespaced_deployment("d", ns)
    assert _status(err.value)["message"].startswith(
        f'deployments.apps "d" is forbidden: User "system:serviceaccount:{ns}:{account}" cannot get resource '
        '"deployments" in API group "apps"'
    )
    # discovery is open to every authenticated user (system:discovery)
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    # a binding takes effect at once: list, watch and pods/log but not create
    rbac.create_namespaced_role(
        ns,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "robot-reads"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
        },
    )
    core.create_namespaced_pod(ns, _pod("p"))
    assert [p.metadata.name for p in sa_core.list_namespaced_pod(ns).items] == ["p"]
    events = list(watch.Watch().stream(sa_core.list_namespaced_pod, ns, timeout_seconds=1))
    assert [e["object"].metadata.name for e in events] == ["p"]
    with pytest.raises(ApiException) as err:
        sa_core.list_pod_for_all_namespaces()
    assert "at the cluster scope" in _status(err.value)["message"]
    with pytest.raises(ApiException) as err:
        sa_core.read_namespaced_pod_log("p", ns)
    assert 'cannot get resource "pods/log"' in _status(err.value)["message"]
    # non-resource URLs: 403 naming the path
    status, _, body = cluster.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
    assert status == 403
    assert (
        body["message"]
        == f'forbidden: User "system:serviceaccount:{ns}:{account}" cannot get path "/metrics"'
    )
    # only the admin may impersonate
    status, _, body = cluster.request(
        "GET",
        f"/api/v1/namespaces/{ns}/pods",
        headers={"Authorization": f"Bearer {token}", "Impersonate-User": "x"},
    )
    assert status == 403
    assert body["message"] == (
        f'users "x" is forbidden: User "system:serviceaccount:{ns}:{account}" cannot impersonate resource '
        '"users" in API group "" at the cluster scope'
    )
    # the token dies with its ServiceAccount
    core.delete_namespaced_service_account(account, ns)
    with pytest.raises(ApiException) as err:
        sa_core.list_namespaced_pod(ns)
    assert err.value.status == 401


def test_rule_matching_resource_names_subresources_and_wildcards(
    cluster: LocalCluster, core: client.CoreV1Api, rbac: client.RbacAuthorizationV1Api, ns: str
) -> None:
    account = _account(core, ns)
    rbac.create_cluster_role(
        {
            "metadata": {"name": f"cm-one-{ns}"},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["*"]},
                {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]},
            ],
        }
    )
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "cm"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": f"cm-one-{ns}"},
            "subjects": [{"kind": "ServiceAccount", "name": account}],
        },
    )
    sa_core = client.CoreV1Api(_client_as(cluster, _token(core, ns, account)))
    core.create_namespaced_config_map(ns, {"metadata": {"name": "one"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "two"}})
    assert sa_core.read_namespaced_config_map("one", ns).metadata.name == "one"
    sa_core.patch_namespaced_config_map("one", ns, {"data": {"k": "v"}})
    with pytest.raises(ApiException) as err:
        sa_core.read_namespaced_config_map("two", ns)
    assert err.value.status == 403
    with pytest.raises(ApiException):
        sa_core.list_namespaced_config_map(ns)  # a resourceNames rule never allows list
    core.create_namespaced_pod(ns, _pod("p"))
    assert sa_core.read_namespaced_pod_status("p", ns).metadata.name == "p"
    with pytest.raises(ApiException):
        sa_core.read_namespaced_pod("p", ns)
    # the ClusterRole bound in the namespace grants nothing elsewhere
    with pytest.raises(ApiException):
        sa_core.read_namespaced_pod_status("p", "default")


def test_bound_token_dies_with_its_pod(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    pod = core.create_namespaced_pod(ns, _pod("holder"))
    wait_for("the default ServiceAccount", lambda: core.list_namespaced_service_account(ns).items)
    request = core.create_namespaced_service_account_token(
        "default",
        ns,
        {
            "spec": {
                "audiences": ["https://kubernetes.default.svc.cluster.local", "other"],
                "expirationSeconds": 600,
                "boundObjectRef": {
                    "kind": "Pod",
                    "apiVersion": "v1",
                    "name": "holder",
                    "uid": pod.metadata.uid,
                },
            }
        },
    )
    assert request.spec.expiration_seconds == 600
    api = client.AuthenticationV1Api(_client_as(cluster, request.status.token))
    extra = api.create_self_subject_review({}).status.user_info.extra
    assert extra["authentication.kubernetes.io/pod-name"] == ["holder"]
    assert extra["authentication.kubernetes.io/pod-uid"] == [pod.metadata.uid]
    core.delete_namespaced_pod("holder", ns, grace_period_seconds=0)
    wait_for("no pods", none_left(lambda: pod_names(core, ns)))
    with pytest.raises(ApiException) as err:
        api.create_self_subject_review({})
    assert err.value.status == 401


def test_bound_token_outlives_its_terminating_pod(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    """As kube-apiserver (``invalidIfDeletedBefore``): a pod shutting down may still use its token, e.g. a
    leader releasing its Lease on SIGTERM; the token dies once the pod is gone."""
    pod = core.create_namespaced_pod(
        ns, {**_pod("leaving"), "metadata": {"name": "leaving", "finalizers": ["x/y"]}}
    )
    wait_for("the default ServiceAccount", lambda: core.list_namespaced_service_account(ns).items)
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "leaving", "uid": pod.metadata.uid}
    request = core.create_namespaced_service_account_token("default", ns, {"spec": {"boundObjectRef": ref}})
    api = client.AuthenticationV1Api(_client_as(cluster, request.status.token))
    core.delete_namespaced_pod("leaving", ns)
    assert core.read_namespaced_pod("leaving", ns).metadata.deletion_timestamp is not None
    user = api.create_self_subject_review({}).status.user_info
    assert user.extra["authentication.kubernetes.io/pod-name"] == ["leaving"]
    core.patch_namespaced_pod("leaving", ns, {"metadata": {"finalizers": None}})
    wait_for("no pods", none_left(lambda: pod_names(core, ns)))
    with pytest.raises(ApiException) as err:
        api.create_self_subject_review({})
    assert err.value.status == 401


def test_deletion_leeway_of_tokens() -> None:
    pod = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}
    deleted_at = 1767225600.0
    assert deleted_before(pod, deleted_at + 1)
    assert not deleted_before(pod, deleted_at)
    assert not deleted_before({"metadata": {}}, deleted_at + 1)


def test_token_request_validation(core: client.CoreV1Api, ns: str) -> None:
    wait_for("the default ServiceAccount", lambda: core.list_namespaced_service_account(ns).items)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service_account_token("default", ns, {"spec": {"expirationSeconds": 60}})
    assert err.value.status == 422
    assert "may not specify a duration less than 10 minutes" in _status(err.value)["message"]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service_account_token(
            "default", ns, {"spec": {"boundObjectRef": {"kind": "Pod", "name": "missing"}}}
        )
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service_account_token("nobody", ns, {"spec": {}})
    assert err.value.status == 404


def test_access_reviews_answer_from_the_rules(
    cluster: LocalCluster, core: client.CoreV1Api, rbac: client.RbacAuthorizationV1Api, ns: str
) -> None:
    authz = client.AuthorizationV1Api(cluster.api_client())
    rbac.create_namespaced_role(
        ns,
        {
            "metadata": {"name": "lister"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "bob-lists"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "lister"},
            "subjects": [{"kind": "User", "name": "bob"}],
        },
    )

    def review(verb: str, namespace: str) -> Any:
        return authz.create_subject_access_review(
            {
                "spec": {
                    "user": "bob",
                    "resourceAttributes": {"namespace": namespace, "verb": verb, "resource": "pods"},
                }
            }
        ).status

    allowed = review("list", ns)
    assert allowed.allowed is True
    assert allowed.reason == f'RBAC: allowed by RoleBinding "bob-lists/{ns}" of Role "lister" to User "bob"'
    assert review("create", ns).allowed is False
    assert review("list", "default").allowed is False
    mine = authz.create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}}
    )
    assert mine.status.allowed is True  # the admin is in system:masters
    with pytest.raises(ApiException) as err:
        authz.create_subject_access_review({"spec": {"user": "bob"}})
    assert err.value.status == 422


# -- in-cluster credentials --------------------------------------------------------------------------------


def test_pods_get_the_api_access_volume(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    pod = core.create_namespaced_pod(ns, _pod("p", initContainers=[{"name": "i", "image": "busybox:1"}]))
    assert pod.spec.service_account_name == "default"
    (volume,) = pod.spec.volumes
    assert volume.name.startswith("kube-api-access-") and len(volume.name) == len("kube-api-access-") + 5
    sources = volume.projected.sources
    assert sources[0].service_account_token.path == "token"
    assert sources[0].service_account_token.expiration_seconds == 3607
    assert sources[1].config_map.name == "kube-root-ca.crt"
    assert sources[2].downward_api.items[0].field_ref.field_path == "metadata.namespace"
    for c in [*pod.spec.containers, *pod.spec.init_containers]:
        assert [(m.name, m.mount_path, m.read_only) for m in c.volume_mounts] == [
            (volume.name, "/var/run/secrets/kubernetes.io/serviceaccount", True)
        ]
    off = core.create_namespaced_pod(ns, _pod("off", automountServiceAccountToken=False))
    assert off.spec.volumes is None
    core.create_namespaced_service_account(
        ns, {"metadata": {"name": "quiet"}, "automountServiceAccountToken": False}
    )
    quiet = core.create_namespaced_pod(ns, _pod("q", serviceAccountName="quiet"))
    assert quiet.spec.volumes is None
    loud = core.create_namespaced_pod(
        ns, _pod("l", serviceAccountName="quiet", automountServiceAccountToken=True)
    )
    assert len(loud.spec.volumes) == 1


def test_root_ca_config_map_and_a_client_with_token_and_ca(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str, tmp_path: Path
) -> None:
    cm = wait_for(
        "kube-root-ca.crt",
        lambda: core.list_namespaced_config_map(ns, field_selector="metadata.name=kube-root-ca.crt").items,
    )
    ca = cm[0].data["ca.crt"]
    assert ca == cluster.state.ca_cert.read_text()
    (tmp_path / "ca.crt").write_text(ca)
    wait_for("the default ServiceAccount", lambda: core.list_namespaced_service_account(ns).items)
    api = _client_as(cluster, _token(core, ns, "default"), str(tmp_path / "ca.crt"))
    user = client.AuthenticationV1Api(api).create_self_subject_review({}).status.user_info
    assert user.username == f"system:serviceaccount:{ns}:default"


def test_incluster_loader_with_the_files_a_pod_gets(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str, tmp_path: Path
) -> None:
    """kubernetes' in-cluster loader reading what the kube-api-access volume holds (a pod-bound token, the
    namespace's ``kube-root-ca.crt``) and the kubelet's KUBERNETES_SERVICE_HOST/PORT, from the host."""
    from kubernetes.config.incluster_config import InClusterConfigLoader

    wait_for("the default ServiceAccount", lambda: core.list_namespaced_service_account(ns).items)
    pod = core.create_namespaced_pod(ns, _pod("p"))
    volume = pod.spec.volumes[0].projected.sources
    token = _token(
        core,
        ns,
        "default",
        expirationSeconds=volume[0].service_account_token.expiration_seconds,
        boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": pod.metadata.uid},
    )
    (tmp_path / "token").write_text(token)
    ca = core.read_namespaced_config_map(volume[1].config_map.name, ns).data["ca.crt"]
    (tmp_path / "ca.crt").write_text(ca)
    config = client.Configuration()
    InClusterConfigLoader(
        str(tmp_path / "token"),
        str(tmp_path / "ca.crt"),
        environ={"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(cluster.port)},
    ).load_and_set(config)
    review = client.AuthenticationV1Api(client.ApiClient(config)).create_self_subject_review({})
    assert review.status.user_info.username == f"system:serviceaccount:{ns}:default"
    assert review.status.user_info.extra["authentication.kubernetes.io/pod-name"] == ["p"]


def test_kubernetes_asyncio_with_a_service_account_token(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    from kubernetes_asyncio import client as aclient

    wait_for("the default ServiceAccount", lambda: core.list_namespaced_service_account(ns).items)
    token = _token(core, ns, "default")

    async def main() -> tuple[int, str]:
        config = aclient.Configuration()
        config.host = cluster.base_url
        config.api_key = {"BearerToken": token}
        config.api_key_prefix = {"BearerToken": "Bearer"}
        config.ssl_ca_cert = str(cluster.state.ca_cert)
        async with aclient.ApiClient(config) as api:
            try:
                await aclient.CoreV1Api(api).list_namespaced_secret(ns)
            except aclient.ApiException as exc:
                return exc.status, json.loads(exc.body)["message"]
        return 200, ""

    status, message = asyncio.run(main())
    assert status == 403
    assert 'cannot list resource "secrets"' in message


# -- kubectl -----------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("kubectl_binary")
def test_kubectl_whoami_and_can_i(
    cluster: LocalCluster, rbac: client.RbacAuthorizationV1Api, tmp_path: Path
) -> None:
    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(tmp_path), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    who = kubectl("auth", "whoami", "-o", "json")
    assert who.returncode == 0, who.stderr
    info = json.loads(who.stdout)["status"]["userInfo"]
    assert "system:masters" in info["groups"]
    sa = "system:serviceaccount:t9k-system:t9k-controller"
    as_sa = kubectl("auth", "whoami", f"--as={sa}", "-o", "json")
    assert json.loads(as_sa.stdout)["status"]["userInfo"]["username"] == sa
    denied = kubectl("auth", "can-i", f"--as={sa}", "create", "pods", "-n", "default")
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    rbac.create_cluster_role(
        {
            "metadata": {"name": "kubectl-can-i"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "kubectl-can-i"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "kubectl-can-i"},
            "subjects": [{"kind": "ServiceAccount", "name": "t9k-controller", "namespace": "t9k-system"}],
        }
    )
    allowed = kubectl("auth", "can-i", f"--as={sa}", "create", "pods", "-n", "default")
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "yes")
    assert kubectl("auth", "can-i", f"--as={sa}", "delete", "pods").stdout.strip() == "no"
    listed = kubectl("auth", "can-i", "--list", f"--as={sa}", "-n", "default")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert ["pods", "[]", "[]", "[create]"] in rows
    assert ["selfsubjectreviews.authentication.k8s.io", "[]", "[]", "[create]"] in rows
    assert ["[/api/*]", "[]", "[get]"] in rows
    token = kubectl("create", "token", "default", "-n", "default", "--duration=10m")
    assert token.returncode == 0, token.stderr
    with_token = kubectl("auth", "whoami", f"--token={token.stdout.strip()}", "-o", "json")
    assert json.loads(with_token.stdout)["status"]["userInfo"]["username"] == (
        "system:serviceaccount:default:default"
    )
    get = kubectl("get", "secrets", "-n", "default", f"--as={sa}")
    assert get.returncode == 1
    assert (
        f'secrets is forbidden: User "{sa}" cannot list resource "secrets" in API group "" in the namespace '
        '"default"' in get.stderr
    )
