"""PodDisruptionBudgets and the eviction subresource through real clients against the API server (no node
agents: each test writes its pods' status as a kubelet would): the ``kubernetes`` client's
``create_namespaced_pod_eviction`` (201, 429, 404, 500), budgets' status kept by the disruption controller,
422s naming the field, protobuf and malformed Eviction bodies, RBAC on ``pods/eviction``, and kubectl's
``create pdb``, ``get pdb`` and ``describe pdb``. The decisions in detail: ``test_eviction.py``; kubectl
drain on a running cluster: ``tests/local/controllers/test_kubectl_drain.py``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from t9k_provider.testing import LocalCluster, wait_for
from tests.local.apiserver.test_api_protobuf import envelope, field

pytestmark = pytest.mark.cluster

APP = {"app": "web"}
TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture(scope="module")
def policy(cluster: LocalCluster) -> client.PolicyV1Api:
    return client.PolicyV1Api(cluster.api_client())


def running(
    core: client.CoreV1Api, ns: str, name: str, ready: bool = True, labels: dict[str, str] = APP
) -> str:
    """A pod bound to a node, Running (and Ready) as its kubelet would report; returns its uid."""
    body = {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox:1"}]},
    }
    uid = core.create_namespaced_pod(ns, body).metadata.uid
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    core.patch_namespaced_pod_status(name, ns, {"status": {"phase": "Running", "conditions": [condition]}})
    return uid


def budget(policy: client.PolicyV1Api, ns: str, name: str = "web", **spec: Any) -> None:
    policy.create_namespaced_pod_disruption_budget(
        ns, {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": APP}, **spec}}
    )


def observed(policy: client.PolicyV1Api, ns: str, name: str = "web", **wanted: int) -> Any:
    """The budget once its controller's status shows ``wanted``."""

    def probe() -> Any:
        status = policy.read_namespaced_pod_disruption_budget(name, ns).status
        seen = {k: getattr(status, _snake(k)) for k in wanted}
        return status if status.observed_generation and seen == wanted else None

    return wait_for(f"budget {ns}/{name} with {wanted}", probe)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def evict(core: client.CoreV1Api, ns: str, name: str, **delete_options: Any) -> Any:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    if delete_options:
        body["deleteOptions"] = delete_options
    return core.create_namespaced_pod_eviction(name, ns, body)


def refused(call: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body)


def test_discovery_serves_budgets_and_names_the_eviction_subresource(cluster: LocalCluster) -> None:
    _, _, core = cluster.request("GET", "/api/v1")
    assert {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    } in core["resources"]
    _, _, policy = cluster.request("GET", "/apis/policy/v1")
    assert [(r["name"], r.get("shortNames")) for r in policy["resources"]] == [
        ("poddisruptionbudgets", ["pdb"]),
        ("poddisruptionbudgets/status", None),
    ]


def test_the_controller_keeps_the_status_and_an_eviction_spends_it(
    core: client.CoreV1Api, policy: client.PolicyV1Api, ns: str
) -> None:
    for name in ("a", "b", "c"):
        running(core, ns, name)
    budget(policy, ns, minAvailable=2)
    status = observed(policy, ns, disruptionsAllowed=1, currentHealthy=3, desiredHealthy=2, expectedPods=3)
    assert [(c.type, c.status, c.reason) for c in status.conditions] == [
        ("DisruptionAllowed", "True", "SufficientPods")
    ]
    version = policy.read_namespaced_pod_disruption_budget("web", ns).metadata.resource_version
    stream = watch.Watch().stream(
        policy.list_namespaced_pod_disruption_budget,
        ns,
        resource_version=version,
        timeout_seconds=5,
        _request_timeout=15,
    )

    evict(core, ns, "a")
    spent = next(e["object"].status for e in stream if e["type"] == "MODIFIED")
    assert (spent.disruptions_allowed, list(spent.disrupted_pods)) == (0, ["a"])
    pod = core.read_namespaced_pod("a", ns)
    assert pod.metadata.deletion_timestamp is not None  # graceful: its kubelet has yet to confirm
    mark = next(c for c in pod.status.conditions if c.type == "DisruptionTarget")
    assert (mark.status, mark.reason, mark.message) == (
        "True",
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )
    # the controller counts the terminating pod out and drops its entry
    observed(policy, ns, disruptionsAllowed=0, currentHealthy=2, desiredHealthy=2)

    code, body = refused(lambda: evict(core, ns, "b"))
    assert (code, body["reason"], body["message"]) == (429, "TooManyRequests", TOO_MANY)
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
        }
    ]
    assert core.read_namespaced_pod("b", ns).metadata.deletion_timestamp is None


def test_a_budget_over_a_deployment_expects_its_replicas(
    core: client.CoreV1Api, policy: client.PolicyV1Api, cluster: LocalCluster, ns: str
) -> None:
    """No node agents run, so no controller makes pods: the test owns them to a ReplicaSet of a Deployment."""
    apps = client.AppsV1Api(cluster.api_client())
    template = {"metadata": {"labels": APP}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}
    spec = {"replicas": 4, "selector": {"matchLabels": APP}, "template": template}
    deployment = apps.create_namespaced_deployment(ns, {"metadata": {"name": "web"}, "spec": spec})
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": deployment.metadata.uid}
    rs = apps.create_namespaced_replica_set(
        ns, {"metadata": {"name": "web-1", "ownerReferences": [{**owner, "controller": True}]}, "spec": spec}
    )
    for name in ("web-1-a", "web-1-b", "web-1-c"):
        running(core, ns, name)
        ref = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web-1",
            "uid": rs.metadata.uid,
            "controller": True,
        }
        core.patch_namespaced_pod(name, ns, {"metadata": {"ownerReferences": [ref]}})
    budget(policy, ns, maxUnavailable="25%")
    observed(policy, ns, expectedPods=4, desiredHealthy=3, currentHealthy=3, disruptionsAllowed=0)
    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 3}})
    observed(policy, ns, expectedPods=3, desiredHealthy=2, currentHealthy=3, disruptionsAllowed=1)


def test_evictions_the_api_refuses(core: client.CoreV1Api, policy: client.PolicyV1Api, ns: str) -> None:
    code, body = refused(lambda: evict(core, ns, "ghost"))
    assert (code, body["message"]) == (404, 'pods "ghost" not found')

    uid = running(core, ns, "a")
    code, body = refused(lambda: evict(core, ns, "a", preconditions={"uid": "not-" + uid}))
    assert code == 409 and body["reason"] == "Conflict"
    assert core.read_namespaced_pod("a", ns).metadata.deletion_timestamp is None

    budget(policy, ns, "one", minAvailable=0)  # an integer: a bare pod counts (maxUnavailable needs a scale)
    budget(policy, ns, "two", maxUnavailable=1)
    code, body = refused(lambda: evict(core, ns, "a"))
    assert (code, body["message"]) == (
        500,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
    )

    policy.delete_namespaced_pod_disruption_budget("two", ns)
    observed(policy, ns, "one", disruptionsAllowed=1)
    evict(core, ns, "a", preconditions={"uid": uid}, gracePeriodSeconds=0)
    assert core.list_namespaced_pod(ns).items == []  # grace 0: gone at once


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[1]", "Object 'Kind' is missing"),
        (b'{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}}', "name in URL"),
        (
            b'{"apiVersion": "v1", "kind": "Eviction", "metadata": {"name": "a"}}',
            "the API version in the data",
        ),
        (b'{"metadata": {"name": "a"}, "deleteOptions": {"gracePeriodSeconds": "x"}}', "gracePeriodSeconds"),
        (b"{not json", "json parse error"),
    ],
)
def test_a_malformed_eviction_is_a_400_and_changes_nothing(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str, body: bytes, message: str
) -> None:
    running(core, ns, "a")
    before = core.read_namespaced_pod("a", ns).metadata.resource_version
    headers = {"Content-Type": "application/json"}
    code, _, answer = cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/pods/a/eviction", body, headers=headers
    )
    assert code == 400 and answer["reason"] == "BadRequest" and message in answer["message"], answer
    assert core.read_namespaced_pod("a", ns).metadata.resource_version == before


def test_invalid_delete_options_are_a_422_naming_the_field_and_change_nothing(
    core: client.CoreV1Api, policy: client.PolicyV1Api, ns: str
) -> None:
    running(core, ns, "a")
    budget(policy, ns, minAvailable=0)
    observed(policy, ns, disruptionsAllowed=1)
    before = core.read_namespaced_pod("a", ns).metadata.resource_version
    code, body = refused(lambda: evict(core, ns, "a", propagationPolicy="Sideways"))
    assert (code, body["reason"], body["details"]["causes"][0]["field"]) == (
        422,
        "Invalid",
        "deleteOptions.propagationPolicy",
    ), body
    assert body["message"].startswith('Eviction.policy "a" is invalid: deleteOptions.propagationPolicy: ')
    assert core.read_namespaced_pod("a", ns).metadata.resource_version == before  # not marked, not deleted
    status = policy.read_namespaced_pod_disruption_budget("web", ns).status
    assert (status.disruptions_allowed, status.disrupted_pods) == (1, None)  # nothing spent


def test_a_protobuf_eviction_as_kubectl_sends_it(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    running(core, ns, "a")
    options = field(1, 7)  # gracePeriodSeconds
    raw = field(1, field(1, "a") + field(3, ns)) + field(2, options)
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf", "Accept": "application/json"}
    path = f"/api/v1/namespaces/{ns}/pods/a/eviction"
    code, _, answer = cluster.request("POST", path, envelope("policy/v1", "Eviction", raw), headers=headers)
    assert (code, answer) == (
        201,
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
    )
    assert core.read_namespaced_pod("a", ns).metadata.deletion_grace_period_seconds == 7


def test_invalid_budgets_are_422_naming_the_field(policy: client.PolicyV1Api, ns: str) -> None:
    cases = [
        ({"minAvailable": -1}, "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
        (
            {"maxUnavailable": "150%"},
            'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%',
        ),
        ({"minAvailable": 1, "maxUnavailable": 1}, "minAvailable and maxUnavailable cannot be both set"),
        (
            {"selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}},
            'spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector '
            "operator",
        ),
        (
            {"unhealthyPodEvictionPolicy": "Sometimes"},
            'spec.unhealthyPodEvictionPolicy: Unsupported value: "Sometimes"',
        ),
    ]
    for spec, message in cases:
        body = {"metadata": {"name": "bad"}, "spec": spec}
        code, status = refused(lambda b=body: policy.create_namespaced_pod_disruption_budget(ns, b))
        assert code == 422 and status["reason"] == "Invalid", status
        assert (
            status["message"].startswith('PodDisruptionBudget.policy "bad" is invalid: ')
            and message in status["message"]
        )
    assert policy.list_namespaced_pod_disruption_budget(ns).items == []
    budget(policy, ns, minAvailable=1)
    code, status = refused(
        lambda: policy.patch_namespaced_pod_disruption_budget_status(
            "web", ns, {"status": {"expectedPods": -2}}
        )
    )
    assert code == 422 and status["details"]["causes"][0]["field"] == "status.expectedPods"


def test_rbac_grants_eviction_as_create_on_pods_eviction(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    core.create_namespaced_service_account(ns, {"metadata": {"name": "drainer"}})
    token = core.create_namespaced_service_account_token("drainer", ns, {"spec": {}}).status.token
    config = client.Configuration()
    config.host, config.ssl_ca_cert = cluster.base_url, str(cluster.state.ca_cert)
    config.api_key, config.api_key_prefix = {"BearerToken": token}, {"BearerToken": "Bearer"}
    as_drainer = client.CoreV1Api(client.ApiClient(config))
    running(core, ns, "a")
    code, body = refused(lambda: evict(as_drainer, ns, "a"))
    assert code == 403 and body["message"] == (
        f'pods "a" is forbidden: User "system:serviceaccount:{ns}:drainer" cannot create resource '
        f'"pods/eviction" in API group "" in the namespace "{ns}"'
    )
    rule = {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
    rbac.create_namespaced_role(ns, {"metadata": {"name": "evict"}, "rules": [rule]})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "evict"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "evict"},
            "subjects": [{"kind": "ServiceAccount", "name": "drainer", "namespace": ns}],
        },
    )
    evict(as_drainer, ns, "a")
    assert core.read_namespaced_pod("a", ns).metadata.deletion_timestamp is not None


@pytest.fixture(scope="module")
def kubectl(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., subprocess.CompletedProcess[str]]:
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cache), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


@pytest.mark.usefixtures("kubectl_binary")
def test_kubectl_creates_lists_and_describes_budgets(
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    core: client.CoreV1Api,
    policy: client.PolicyV1Api,
    ns: str,
) -> None:
    for name in ("a", "b"):
        running(core, ns, name)
    made = kubectl("-n", ns, "create", "pdb", "web", "--selector=app=web", "--min-available=1")
    assert made.stdout.strip() == "poddisruptionbudget.policy/web created", made.stderr
    made = kubectl("-n", ns, "create", "pdb", "db", "--selector=app=db", "--max-unavailable=50%")
    assert made.returncode == 0, made.stderr
    bad = kubectl("-n", ns, "create", "pdb", "bad", "--selector=app=db", "--max-unavailable=150%")
    assert bad.returncode == 1 and bad.stderr.strip() == (
        'error: failed to create poddisruptionbudgets: PodDisruptionBudget.policy "bad" is invalid: '
        'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%'
    )
    observed(policy, ns, disruptionsAllowed=1, currentHealthy=2)
    observed(policy, ns, "db", expectedPods=0)

    header, *rows = kubectl("-n", ns, "get", "pdb").stdout.splitlines()
    assert (
        header.split("   ")
        and " ".join(header.split()) == "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE"
    )
    assert [row.split()[:4] for row in rows] == [["db", "N/A", "50%", "0"], ["web", "1", "N/A", "1"]]
    described = kubectl("-n", ns, "describe", "pdb", "web").stdout
    lines = [" ".join(line.split()) for line in described.splitlines()]
    assert lines == [
        "Name: web",
        f"Namespace: {ns}",
        "Min available: 1",
        "Selector: app=web",
        "Status:",
        "Allowed disruptions: 1",
        "Current: 2",
        "Desired: 1",
        "Total: 2",
        "Events: <none>",
    ]
    assert kubectl("-n", ns, "auth", "can-i", "create", "pods/eviction").stdout.strip() == "yes"
