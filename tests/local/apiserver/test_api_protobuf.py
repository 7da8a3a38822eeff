"""The protobuf bodies of kubectl's ``create`` generators: decoding and its failure modes."""

from __future__ import annotations

import base64

import pytest

from t9k_provider.local.apiserver.protobuf import MAGIC, ProtobufError, UnsupportedKind, decode_object


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes | str | int) -> bytes:
    if isinstance(payload, int) and not isinstance(payload, bool):
        return varint(number << 3) + varint(payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(number << 3 | 2) + varint(len(data)) + data


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + field(1, field(1, api_version) + field(2, kind)) + field(2, raw)


def test_configmap_with_labels_maps_and_empty_defaults() -> None:
    meta = (
        field(1, "cfg")
        + field(2, "")
        + field(11, field(1, "app") + field(2, "x"))
        + field(14, "f1")
        + field(8, field(1, 0))
    )
    raw = (
        field(1, meta)
        + field(2, field(1, "a") + field(2, "1"))
        + field(3, field(1, "bin") + field(2, b"\x00\xff"))
    )
    assert decode_object(envelope("v1", "ConfigMap", raw)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": {"app": "x"}, "finalizers": ["f1"]},
        "data": {"a": "1"},
        "binaryData": {"bin": base64.b64encode(b"\x00\xff").decode()},
    }


def test_secret_data_is_base64_and_owner_references_repeat() -> None:
    owner = field(1, "Job") + field(3, "j") + field(4, "u-1") + field(5, "batch/v1") + field(6, 1)
    raw = (
        field(1, field(1, "s") + field(13, owner) + field(13, owner))
        + field(2, field(1, "pw") + field(2, b"hi"))
        + field(3, "Opaque")
    )
    obj = decode_object(envelope("v1", "Secret", raw))
    assert obj["data"] == {"pw": "aGk="} and obj["type"] == "Opaque"
    assert (
        obj["metadata"]["ownerReferences"]
        == [{"kind": "Job", "name": "j", "uid": "u-1", "apiVersion": "batch/v1", "controller": True}] * 2
    )


def int_or_string(value: int | str) -> bytes:
    if isinstance(value, str):
        return field(1, 1) + field(2, 0) + field(3, value)
    return field(1, 0) + field(2, value) + field(3, "")


def test_deployment_keeps_set_pointers_drops_go_zero_values_and_reads_int_or_string() -> None:
    """What ``kubectl create deployment --replicas=0 --port=80`` sends: Go encodes every non-pointer field."""
    labels = field(1, "app") + field(2, "web")
    port = field(1, "") + field(2, 0) + field(3, 80) + field(4, "TCP") + field(5, "")
    resources = field(2, field(1, "cpu") + field(2, field(1, "500m")))
    container = (
        field(1, "c")
        + field(2, "busybox:1")
        + field(3, "sleep")
        + field(3, "5")
        + field(6, port)
        + field(8, resources)
        + field(16, 0)
        + field(18, 0)
    )
    pod_spec = field(2, container) + field(11, 0) + field(3, "")
    template = field(1, field(7, 0) + field(11, labels) + field(8, field(1, 0))) + field(2, pod_spec)
    rolling = field(1, int_or_string("25%")) + field(2, int_or_string(1))
    spec = (
        field(1, 0)
        + field(2, field(1, labels))
        + field(3, template)
        + field(4, field(1, "RollingUpdate") + field(2, rolling))
        + field(5, 0)
        + field(7, 0)
    )
    raw = field(1, field(1, "web") + field(7, 0) + field(11, labels)) + field(2, spec) + field(3, b"")
    assert decode_object(envelope("apps/v1", "Deployment", raw)) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox:1",
                            "command": ["sleep", "5"],
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "500m"}},
                        }
                    ]
                },
            },
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
        },
    }


def test_role_binding_and_service_ports() -> None:
    subject = field(1, "ServiceAccount") + field(2, "") + field(3, "robot") + field(4, "ns")
    role_ref = field(1, "rbac.authorization.k8s.io") + field(2, "Role") + field(3, "reader")
    binding = decode_object(
        envelope(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            field(1, field(1, "rb")) + field(2, subject) + field(3, role_ref),
        )
    )
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "robot", "namespace": "ns"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    port = (
        field(1, "80-http") + field(2, "TCP") + field(3, 80) + field(4, int_or_string("http")) + field(5, 0)
    )
    service = decode_object(
        envelope("v1", "Service", field(1, field(1, "s")) + field(2, field(1, port) + field(4, "ClusterIP")))
    )
    assert service["spec"] == {
        "ports": [{"name": "80-http", "protocol": "TCP", "port": 80, "targetPort": "http"}],
        "type": "ClusterIP",
    }


def test_unsupported_kinds_and_garbage() -> None:
    with pytest.raises(UnsupportedKind):
        decode_object(envelope("batch/v1", "CronJob", field(1, field(1, "j"))))
    for bad in (b"{}", MAGIC + b"\xff", MAGIC + field(2, b"x")[:-1] + b"", MAGIC + bytes([0x0B])):
        with pytest.raises(ProtobufError):
            decode_object(bad)


def test_eviction_of_kubectl_drain_with_its_delete_options() -> None:
    """``kubectl drain --grace-period=0 --dry-run=server``'s Eviction: a set pointer keeps its zero."""
    preconditions = field(1, "u-1") + field(2, "42")
    options = field(1, 0) + field(2, preconditions) + field(3, 0) + field(4, "Background") + field(5, "All")
    raw = field(1, field(1, "web-1") + field(3, "team")) + field(2, options)
    assert decode_object(envelope("policy/v1", "Eviction", raw)) == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": "team"},
        "deleteOptions": {
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": "u-1", "resourceVersion": "42"},
            "orphanDependents": False,
            "propagationPolicy": "Background",
            "dryRun": ["All"],
        },
    }
    # what kubectl sends without flags: an empty DeleteOptions
    bare = field(1, field(1, "web-1")) + field(2, b"")
    assert decode_object(envelope("policy/v1", "Eviction", bare))["deleteOptions"] == {}


def test_pod_disruption_budget_of_kubectl_create_pdb() -> None:
    selector = field(1, field(1, "app") + field(2, "web"))
    spec = field(1, int_or_string(0)) + field(2, selector) + field(4, "AlwaysAllow")
    assert decode_object(
        envelope("policy/v1", "PodDisruptionBudget", field(1, field(1, "b")) + field(2, spec))
    ) == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b"},
        "spec": {
            "minAvailable": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
    spec = field(3, int_or_string("20%"))
    decoded = decode_object(envelope("policy/v1", "PodDisruptionBudget", field(2, spec)))
    assert decoded["spec"] == {"maxUnavailable": "20%"}
