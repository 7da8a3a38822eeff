"""Which pods a Service publishes, as Endpoints subsets (the controller's pure part)."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.controllers.endpoints import endpoint_subsets
from t9k_provider.local.machinery.endpoints import is_endpoint

SERVICE = {
    "metadata": {"name": "web", "namespace": "ns"},
    "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
}


def _pod(name: str, ip: str, *, ready: bool, phase: str = "Running", **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {"app": "web"}},
        "spec": {"nodeName": "n", "containers": [container], **spec},
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_ready_and_not_ready_addresses_with_resolved_ports() -> None:
    pods = [
        _pod("a", "10.0.0.2", ready=True, hostname="a", subdomain="web"),
        _pod("b", "10.0.0.3", ready=False),
        _pod("done", "10.0.0.4", ready=False, phase="Succeeded"),
        {
            **_pod("other", "10.0.0.5", ready=True),
            "metadata": {"name": "other", "namespace": "ns", "labels": {}},
        },
        _pod("noip", "", ready=False),
    ]
    [subset] = endpoint_subsets(SERVICE, pods)
    assert subset["addresses"] == [
        {
            "ip": "10.0.0.2",
            "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "u-a"},
            "nodeName": "n",
            "hostname": "a",
        }
    ]
    assert [a["ip"] for a in subset["notReadyAddresses"]] == ["10.0.0.3"]
    assert subset["ports"] == [{"port": 8080, "protocol": "TCP", "name": "http"}]
    assert is_endpoint(SERVICE, pods[0]) and not is_endpoint(SERVICE, pods[1])


def test_published_not_ready_addresses_and_deleting_pods() -> None:
    published = {**SERVICE, "spec": {**SERVICE["spec"], "publishNotReadyAddresses": True}}
    deleting = _pod("d", "10.0.0.6", ready=False)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pods = [_pod("b", "10.0.0.3", ready=False), deleting]
    [subset] = endpoint_subsets(published, pods)
    assert [a["ip"] for a in subset["addresses"]] == [
        "10.0.0.3",
        "10.0.0.6",
    ] and "notReadyAddresses" not in subset
    assert is_endpoint(published, pods[0])
    [subset] = endpoint_subsets(SERVICE, pods)
    assert [a["ip"] for a in subset["notReadyAddresses"]] == ["10.0.0.3"]  # a deleting pod drops out
    assert endpoint_subsets(SERVICE, []) == []
