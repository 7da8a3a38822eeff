"""apps/v1 workloads, ReplicationControllers, APIServices and ``default/kubernetes`` through the real clients
(API server only: no node agents, so no pods appear)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import config as aconfig

from t9k_provider.testing import LocalCluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def apps(cluster: LocalCluster) -> client.AppsV1Api:
    return client.AppsV1Api(cluster.api_client())


def template(labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox:1", "command": ["sleep", "60"]}], **spec},
    }


def workload(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    labels = labels or {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, "template": template(labels), **spec},
    }


def status_of(exc: client.ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


def test_deployment_defaults_generation_status_and_scale(apps: client.AppsV1Api, ns: str) -> None:
    created = apps.create_namespaced_deployment(ns, workload("web"))
    assert created.metadata.generation == 1
    assert created.spec.replicas == 1
    assert created.spec.revision_history_limit == 10
    assert created.spec.progress_deadline_seconds == 600
    assert created.spec.strategy.type == "RollingUpdate"
    assert created.spec.strategy.rolling_update.max_surge == "25%"
    assert created.spec.strategy.rolling_update.max_unavailable == "25%"
    assert created.spec.template.spec.restart_policy == "Always"
    assert created.spec.template.spec.containers[0].termination_message_path == "/dev/termination-log"

    scale = apps.read_namespaced_deployment_scale("web", ns)
    assert (scale.kind, scale.api_version) == ("Scale", "autoscaling/v1")
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (1, 0, "app=web")
    scaled = apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 3}})
    assert scaled.spec.replicas == 3
    after = apps.read_namespaced_deployment("web", ns)
    assert (after.spec.replicas, after.metadata.generation) == (3, 2)
    with pytest.raises(client.ApiException) as bad:
        apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": -1}})
    assert bad.value.status == 422

    # the main resource keeps the status; /status keeps the spec
    apps.patch_namespaced_deployment_status("web", ns, {"status": {"replicas": 3, "observedGeneration": 2}})
    apps.patch_namespaced_deployment("web", ns, {"status": {"replicas": 9}, "spec": {"minReadySeconds": 1}})
    current = apps.read_namespaced_deployment("web", ns)
    assert (current.status.replicas, current.status.observed_generation) == (3, 2)
    assert (current.spec.min_ready_seconds, current.metadata.generation) == (1, 3)
    apps.patch_namespaced_deployment_status("web", ns, {"spec": {"replicas": 7}, "status": {"replicas": 4}})
    current = apps.read_namespaced_deployment("web", ns)
    assert (current.spec.replicas, current.status.replicas, current.metadata.generation) == (3, 4, 3)


def test_deployment_validation_is_kube_apiservers(apps: client.AppsV1Api, ns: str) -> None:
    bad = workload("bad", replicas=-1)
    bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    bad["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"},
    }
    with pytest.raises(client.ApiException) as err:
        apps.create_namespaced_deployment(ns, bad)
    body = status_of(err.value)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    causes = {(c["field"], c["message"]) for c in body["details"]["causes"]}
    assert causes == {
        ("spec.replicas", "Invalid value: -1: must be greater than or equal to 0"),
        (
            "spec.template.metadata.labels",
            'Invalid value: {"app":"bad"}: `selector` does not match template `labels`',
        ),
        ("spec.template.spec.restartPolicy", 'Unsupported value: "Never": supported values: "Always"'),
        (
            "spec.strategy.rollingUpdate.maxUnavailable",
            'Invalid value: "0%": may not be 0 when `maxSurge` is 0',
        ),
    }
    missing = workload("nosel")
    del missing["spec"]["selector"]
    with pytest.raises(client.ApiException) as err:
        apps.create_namespaced_deployment(ns, missing)
    assert [c["field"] for c in status_of(err.value)["details"]["causes"]] == ["spec.selector"]
    recreate = workload("re", strategy={"type": "Recreate", "rollingUpdate": {"maxSurge": 1}})
    with pytest.raises(client.ApiException) as err:
        apps.create_namespaced_deployment(ns, recreate)
    assert "may not be specified when strategy `type` is 'Recreate'" in status_of(err.value)["message"]

    apps.create_namespaced_deployment(ns, workload("fixed"))
    with pytest.raises(client.ApiException) as err:
        apps.patch_namespaced_deployment(
            "fixed",
            ns,
            {
                "spec": {
                    "selector": {"matchLabels": {"app": "fixed", "x": "y"}},
                    "template": {"metadata": {"labels": {"app": "fixed", "x": "y"}}},
                }
            },
        )
    assert err.value.status == 422
    assert "spec.selector: Invalid value" in status_of(err.value)["message"]
    assert "field is immutable" in status_of(err.value)["message"]


def test_replicaset_statefulset_daemonset_crud_list_and_delete(apps: client.AppsV1Api, ns: str) -> None:
    rs = apps.create_namespaced_replica_set(ns, workload("rs"))
    assert (rs.spec.replicas, rs.status.replicas) == (1, 0)
    sts = apps.create_namespaced_stateful_set(ns, workload("sts", service_name="sts"))
    assert sts.spec.pod_management_policy == "OrderedReady"
    assert sts.spec.update_strategy.rolling_update.partition == 0
    assert sts.spec.persistent_volume_claim_retention_policy.when_deleted == "Retain"
    assert (sts.status.replicas, sts.status.available_replicas) == (0, 0)
    ds = apps.create_namespaced_daemon_set(ns, workload("ds"))
    assert ds.spec.update_strategy.rolling_update.max_unavailable == 1
    assert ds.status.desired_number_scheduled == 0

    assert apps.read_namespaced_stateful_set_scale("sts", ns).status.selector == "app=sts"
    apps.replace_namespaced_replica_set_scale(
        "rs", ns, {"metadata": {"name": "rs", "namespace": ns}, "spec": {"replicas": 4}}
    )
    assert apps.read_namespaced_replica_set("rs", ns).spec.replicas == 4

    with pytest.raises(client.ApiException) as err:
        apps.patch_namespaced_stateful_set("sts", ns, {"spec": {"serviceName": "other"}})
    assert "updates to statefulset spec for fields other than" in status_of(err.value)["message"]
    apps.patch_namespaced_stateful_set("sts", ns, {"spec": {"replicas": 2}})

    items = apps.list_namespaced_replica_set(ns, field_selector="status.replicas=0").items
    assert [i.metadata.name for i in items] == ["rs"]
    every = apps.list_daemon_set_for_all_namespaces().items
    assert [d.metadata.name for d in every if d.metadata.namespace == ns] == ["ds"]
    apps.delete_namespaced_replica_set("rs", ns)
    apps.delete_namespaced_stateful_set("sts", ns)
    apps.delete_namespaced_daemon_set("ds", ns)
    assert apps.list_namespaced_stateful_set(ns).items == []


def test_watch_reports_deployment_changes(apps: client.AppsV1Api, ns: str) -> None:
    start = apps.list_namespaced_deployment(ns).metadata.resource_version
    apps.create_namespaced_deployment(ns, workload("w"))
    apps.patch_namespaced_deployment_scale("w", ns, {"spec": {"replicas": 2}})
    apps.delete_namespaced_deployment("w", ns)
    seen = []
    for event in watch.Watch().stream(
        apps.list_namespaced_deployment, ns, resource_version=start, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].spec.replicas))
        if event["type"] == "DELETED":
            break
    assert seen == [("ADDED", 1), ("MODIFIED", 2), ("DELETED", 2)]


def test_replication_controller_defaults_selector_and_scales(cluster: LocalCluster, ns: str) -> None:
    core = client.CoreV1Api(cluster.api_client())
    rc = core.create_namespaced_replication_controller(
        ns, {"metadata": {"name": "rc"}, "spec": {"replicas": 2, "template": template({"a": "b"})}}
    )
    assert rc.spec.selector == {"a": "b"} and rc.metadata.labels == {"a": "b"}
    assert rc.status.replicas == 0
    scale = core.read_namespaced_replication_controller_scale("rc", ns)
    assert (scale.spec.replicas, scale.status.selector) == (2, "a=b")
    core.patch_namespaced_replication_controller_scale("rc", ns, {"spec": {"replicas": 0}})
    assert core.read_namespaced_replication_controller("rc", ns).spec.replicas == 0
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_replication_controller(
            ns,
            {"metadata": {"name": "bad"}, "spec": {"selector": {"a": "c"}, "template": template({"a": "b"})}},
        )
    assert err.value.status == 422
    assert "`selector` does not match template `labels`" in status_of(err.value)["message"]
    core.delete_namespaced_replication_controller("rc", ns)


def test_api_services_local_and_created(cluster: LocalCluster) -> None:
    reg = client.ApiregistrationV1Api(cluster.api_client())
    names = {a.metadata.name for a in reg.list_api_service().items}
    assert {"v1.", "v1.apps", "v1.batch", "v1.apiregistration.k8s.io"} <= names
    local = reg.read_api_service("v1.apps")
    assert local.spec.service is None
    assert [(c.type, c.status, c.reason) for c in local.status.conditions] == [("Available", "True", "Local")]

    body = {
        "metadata": {"name": "v1beta1.metrics.example.com"},
        "spec": {
            "group": "metrics.example.com",
            "version": "v1beta1",
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "insecureSkipTLSVerify": True,
            "service": {"namespace": "default", "name": "metrics"},
        },
    }
    created = reg.create_api_service(body)
    assert created.spec.service.port == 443
    with pytest.raises(client.ApiException) as err:
        reg.create_api_service({**body, "metadata": {"name": "wrong"}})
    assert err.value.status == 422
    assert (
        'must be `spec.version+"."+spec.group`: "v1beta1.metrics.example.com"'
        in status_of(err.value)["message"]
    )
    # the availability controller marks it: nothing is proxied
    for _ in range(50):
        conditions = reg.read_api_service(created.metadata.name).status.conditions or []
        if conditions:
            break
        time.sleep(0.1)
    assert [(c.type, c.status) for c in conditions] == [("Available", "False")]
    reg.delete_api_service(created.metadata.name)


def test_api_services_follow_crds(cluster: LocalCluster) -> None:
    reg = client.ApiregistrationV1Api(cluster.api_client())
    t9k = reg.read_api_service("v1beta1.batch.tensorstack.dev")
    assert t9k.metadata.labels == {"kube-aggregator.kubernetes.io/automanaged": "true"}
    assert reg.read_api_service("v1.apps").metadata.labels == {
        "kube-aggregator.kubernetes.io/automanaged": "onstart"
    }
    ext = client.ApiextensionsV1Api(cluster.api_client())
    ext.create_custom_resource_definition(
        {
            "metadata": {"name": "widgets.shop.example.com"},
            "spec": {
                "group": "shop.example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [
                    {
                        "name": "v2",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
    )

    def names() -> set[str]:
        return {a.metadata.name for a in reg.list_api_service().items}

    for _ in range(50):
        if "v2.shop.example.com" in names():
            break
        time.sleep(0.1)
    assert "v2.shop.example.com" in names()
    ext.delete_custom_resource_definition("widgets.shop.example.com")
    for _ in range(50):
        if "v2.shop.example.com" not in names():
            break
        time.sleep(0.1)
    assert "v2.shop.example.com" not in names()


def test_default_kubernetes_service_points_at_the_server(cluster: LocalCluster) -> None:
    core = client.CoreV1Api(cluster.api_client())
    svc = core.read_namespaced_service("kubernetes", "default")
    assert svc.spec.cluster_ip == "10.96.0.1"
    assert svc.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}
    port = cluster.api_client().configuration.host.rsplit(":", 1)[1]
    assert [(p.name, p.port, str(p.target_port)) for p in svc.spec.ports] == [("https", 443, port)]
    endpoints = core.read_namespaced_endpoints("kubernetes", "default")
    assert [(a.ip, p.port) for s in endpoints.subsets for a in s.addresses for p in s.ports] == [
        ("127.0.0.1", int(port))
    ]


@pytest.mark.parametrize("version", ["v1", "0", "-3", "00"])
def test_create_clears_a_resource_version_that_is_not_a_positive_integer(
    apps: client.AppsV1Api, ns: str, version: str
) -> None:
    body = workload(f"rv{abs(hash(version)) % 1000}")
    body["metadata"]["resourceVersion"] = version
    created = apps.create_namespaced_deployment(ns, body)
    assert int(created.metadata.resource_version) > 0


def test_create_refuses_a_positive_resource_version(apps: client.AppsV1Api, ns: str) -> None:
    body = workload("rv-set")
    body["metadata"]["resourceVersion"] = "12"
    with pytest.raises(client.ApiException) as err:
        apps.create_namespaced_deployment(ns, body)
    assert err.value.status == 500
    assert status_of(err.value)["message"] == "resourceVersion should not be set on objects to be created"


def test_asyncio_client_crud_scale_and_watch(cluster: LocalCluster, ns: str) -> None:
    async def scenario() -> list[tuple[str, int]]:
        api = await aconfig.new_client_from_config(str(cluster.kubeconfig))
        async with api:
            apps = aclient.AppsV1Api(api)
            await apps.create_namespaced_deployment(ns, workload("aw"))
            scale = await apps.read_namespaced_deployment_scale("aw", ns)
            assert scale.status.selector == "app=aw"
            await apps.patch_namespaced_deployment_scale("aw", ns, {"spec": {"replicas": 2}})
            listed = await apps.list_namespaced_deployment(ns)
            assert [d.spec.replicas for d in listed.items] == [2]
            await apps.replace_namespaced_deployment(
                "aw", ns, {**workload("aw"), "spec": {**workload("aw")["spec"], "replicas": 5}}
            )
            stream = await apps.list_namespaced_deployment(
                ns,
                watch=True,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=3,
                _preload_content=False,
            )
            events = []
            async with stream:
                async for line in stream.content:
                    event = json.loads(line)
                    events.append((event["type"], event["object"]["spec"]["replicas"]))
                    if len(events) == 1:
                        break
            await apps.delete_namespaced_deployment("aw", ns)
            return events

    assert asyncio.run(scenario()) == [("MODIFIED", 5)]
