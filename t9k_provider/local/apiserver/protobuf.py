"""Decode the Kubernetes protobuf request bodies kubectl's ``create <kind>`` generators send.

kubectl 1.32 posts the objects of ``kubectl create namespace|configmap|secret|serviceaccount|deployment|job|
service|role|clusterrole|rolebinding|clusterrolebinding|poddisruptionbudget|token`` (the access review of
``kubectl auth can-i``, the Eviction of ``kubectl drain``) as ``application/vnd.kubernetes.protobuf``: the
magic ``k8s\\0`` followed by a ``runtime.Unknown`` envelope whose ``raw`` field is the object's message (field
numbers from k8s.io/api ``generated.proto``). Only those kinds are decoded (the generators' other kinds,
cronjob, priorityclass, quota and ingress, are not served here); any other protobuf body gets 415, as JSON and
YAML are the server's formats.
Empty strings, zero timestamps and the zero values of Go's non-pointer numbers and booleans (kinds ending in
``?``), which Go encodes but the JSON form omits, are dropped.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from t9k_provider.kube.timestamps import rfc3339

MAGIC = b"k8s\x00"

# A schema maps field numbers to (json name, type, repeated). A type is a scalar name or a nested schema.
Schema = dict[int, tuple[str, Any, bool]]

_TIME: Schema = {1: ("seconds", "int", False), 2: ("nanos", "int", False)}
_OWNER_REFERENCE: Schema = {
    1: ("kind", "string", False),
    3: ("name", "string", False),
    4: ("uid", "string", False),
    5: ("apiVersion", "string", False),
    6: ("controller", "bool", False),
    7: ("blockOwnerDeletion", "bool", False),
}
_OBJECT_META: Schema = {
    1: ("name", "string", False),
    2: ("generateName", "string", False),
    3: ("namespace", "string", False),
    5: ("uid", "string", False),
    6: ("resourceVersion", "string", False),
    7: ("generation", "int?", False),
    8: ("creationTimestamp", _TIME, False),
    11: ("labels", "map_string", False),
    12: ("annotations", "map_string", False),
    13: ("ownerReferences", _OWNER_REFERENCE, True),
    14: ("finalizers", "string", True),
}
_OBJECT_REFERENCE: Schema = {
    1: ("kind", "string", False),
    2: ("namespace", "string", False),
    3: ("name", "string", False),
    4: ("uid", "string", False),
    5: ("apiVersion", "string", False),
}
_RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string", False),
    2: ("verb", "string", False),
    3: ("group", "string", False),
    4: ("version", "string", False),
    5: ("resource", "string", False),
    6: ("subresource", "string", False),
    7: ("name", "string", False),
}
_INT_OR_STRING = "intorstring"
_LABEL_SELECTOR: Schema = {
    1: ("matchLabels", "map_string", False),
    2: (
        "matchExpressions",
        {1: ("key", "string", False), 2: ("operator", "string", False), 3: ("values", "string", True)},
        True,
    ),
}
_DELETE_OPTIONS: Schema = {
    1: ("gracePeriodSeconds", "int", False),  # a pointer: 0 (delete now) is sent, and kept
    2: ("preconditions", {1: ("uid", "string", False), 2: ("resourceVersion", "string", False)}, False),
    3: ("orphanDependents", "bool", False),
    4: ("propagationPolicy", "string", False),
    5: ("dryRun", "string", True),
}
_ENV_VAR: Schema = {1: ("name", "string", False), 2: ("value", "string", False)}
_CONTAINER: Schema = {
    1: ("name", "string", False),
    2: ("image", "string", False),
    3: ("command", "string", True),
    4: ("args", "string", True),
    5: ("workingDir", "string", False),
    6: (
        "ports",
        {
            1: ("name", "string", False),
            2: ("hostPort", "int?", False),
            3: ("containerPort", "int", False),
            4: ("protocol", "string", False),
            5: ("hostIP", "string", False),
        },
        True,
    ),
    7: ("env", _ENV_VAR, True),
    8: (
        "resources",
        {1: ("limits", "map_quantity", False), 2: ("requests", "map_quantity", False)},
        False,
    ),
    13: ("terminationMessagePath", "string", False),
    14: ("imagePullPolicy", "string", False),
    16: ("stdin", "bool?", False),
    17: ("stdinOnce", "bool?", False),
    18: ("tty", "bool?", False),
    20: ("terminationMessagePolicy", "string", False),
}
_POD_SPEC: Schema = {
    2: ("containers", _CONTAINER, True),
    3: ("restartPolicy", "string", False),
    4: ("terminationGracePeriodSeconds", "int", False),
    5: ("activeDeadlineSeconds", "int", False),
    6: ("dnsPolicy", "string", False),
    7: ("nodeSelector", "map_string", False),
    8: ("serviceAccountName", "string", False),
    10: ("nodeName", "string", False),
    11: ("hostNetwork", "bool?", False),
    16: ("hostname", "string", False),
    17: ("subdomain", "string", False),
    19: ("schedulerName", "string", False),
    20: ("initContainers", _CONTAINER, True),
    21: ("automountServiceAccountToken", "bool", False),
}
_POD_TEMPLATE: Schema = {1: ("metadata", _OBJECT_META, False), 2: ("spec", _POD_SPEC, False)}
_POLICY_RULE: Schema = {
    1: ("verbs", "string", True),
    2: ("apiGroups", "string", True),
    3: ("resources", "string", True),
    4: ("resourceNames", "string", True),
    5: ("nonResourceURLs", "string", True),
}
_ROLE_BINDING: Schema = {
    1: ("metadata", _OBJECT_META, False),
    2: (
        "subjects",
        {
            1: ("kind", "string", False),
            2: ("apiGroup", "string", False),
            3: ("name", "string", False),
            4: ("namespace", "string", False),
        },
        True,
    ),
    3: (
        "roleRef",
        {1: ("apiGroup", "string", False), 2: ("kind", "string", False), 3: ("name", "string", False)},
        False,
    ),
}
KINDS: dict[str, Schema] = {
    "Namespace": {
        1: ("metadata", _OBJECT_META, False),
        2: ("spec", {1: ("finalizers", "string", True)}, False),
    },
    "ConfigMap": {
        1: ("metadata", _OBJECT_META, False),
        2: ("data", "map_string", False),
        3: ("binaryData", "map_bytes", False),
        4: ("immutable", "bool", False),
    },
    "Secret": {
        1: ("metadata", _OBJECT_META, False),
        2: ("data", "map_bytes", False),
        3: ("type", "string", False),
        4: ("stringData", "map_string", False),
        5: ("immutable", "bool", False),
    },
    "SelfSubjectReview": {1: ("metadata", _OBJECT_META, False)},  # kubectl auth whoami: no spec
    "SelfSubjectRulesReview": {
        1: ("metadata", _OBJECT_META, False),
        2: ("spec", {1: ("namespace", "string", False)}, False),
    },
    "SelfSubjectAccessReview": {
        1: ("metadata", _OBJECT_META, False),
        2: (
            "spec",
            {
                1: ("resourceAttributes", _RESOURCE_ATTRIBUTES, False),
                2: (
                    "nonResourceAttributes",
                    {1: ("path", "string", False), 2: ("verb", "string", False)},
                    False,
                ),
            },
            False,
        ),
    },
    "Deployment": {
        1: ("metadata", _OBJECT_META, False),
        2: (
            "spec",
            {
                1: ("replicas", "int", False),
                2: ("selector", _LABEL_SELECTOR, False),
                3: ("template", _POD_TEMPLATE, False),
                4: (
                    "strategy",
                    {
                        1: ("type", "string", False),
                        2: (
                            "rollingUpdate",
                            {
                                1: ("maxUnavailable", _INT_OR_STRING, False),
                                2: ("maxSurge", _INT_OR_STRING, False),
                            },
                            False,
                        ),
                    },
                    False,
                ),
                5: ("minReadySeconds", "int?", False),
                6: ("revisionHistoryLimit", "int", False),
                7: ("paused", "bool?", False),
                9: ("progressDeadlineSeconds", "int", False),
            },
            False,
        ),
    },
    "Job": {
        1: ("metadata", _OBJECT_META, False),
        2: (
            "spec",
            {
                1: ("parallelism", "int", False),
                2: ("completions", "int", False),
                3: ("activeDeadlineSeconds", "int", False),
                4: ("selector", _LABEL_SELECTOR, False),
                5: ("manualSelector", "bool", False),
                6: ("template", _POD_TEMPLATE, False),
                7: ("backoffLimit", "int", False),
                8: ("ttlSecondsAfterFinished", "int", False),
                9: ("completionMode", "string", False),
                10: ("suspend", "bool", False),
            },
            False,
        ),
    },
    "Service": {
        1: ("metadata", _OBJECT_META, False),
        2: (
            "spec",
            {
                1: (
                    "ports",
                    {
                        1: ("name", "string", False),
                        2: ("protocol", "string", False),
                        3: ("port", "int", False),
                        4: ("targetPort", _INT_OR_STRING, False),
                        5: ("nodePort", "int?", False),
                        6: ("appProtocol", "string", False),
                    },
                    True,
                ),
                2: ("selector", "map_string", False),
                3: ("clusterIP", "string", False),
                4: ("type", "string", False),
                5: ("externalIPs", "string", True),
                7: ("sessionAffinity", "string", False),
                10: ("externalName", "string", False),
                18: ("clusterIPs", "string", True),
            },
            False,
        ),
    },
    "Role": {1: ("metadata", _OBJECT_META, False), 2: ("rules", _POLICY_RULE, True)},
    "ClusterRole": {
        1: ("metadata", _OBJECT_META, False),
        2: ("rules", _POLICY_RULE, True),
        3: ("aggregationRule", {1: ("clusterRoleSelectors", _LABEL_SELECTOR, True)}, False),
    },
    "RoleBinding": _ROLE_BINDING,
    "ClusterRoleBinding": _ROLE_BINDING,
    "TokenRequest": {
        1: ("metadata", _OBJECT_META, False),
        2: (
            "spec",
            {
                1: ("audiences", "string", True),
                3: (
                    "boundObjectRef",
                    {
                        1: ("kind", "string", False),
                        2: ("apiVersion", "string", False),
                        3: ("name", "string", False),
                        4: ("uid", "string", False),
                    },
                    False,
                ),
                4: ("expirationSeconds", "int", False),
            },
            False,
        ),
    },
    "Eviction": {1: ("metadata", _OBJECT_META, False), 2: ("deleteOptions", _DELETE_OPTIONS, False)},
    "PodDisruptionBudget": {
        1: ("metadata", _OBJECT_META, False),
        2: (
            "spec",
            {
                1: ("minAvailable", _INT_OR_STRING, False),
                2: ("selector", _LABEL_SELECTOR, False),
                3: ("maxUnavailable", _INT_OR_STRING, False),
                4: ("unhealthyPodEvictionPolicy", "string", False),
            },
            False,
        ),
    },
    "ServiceAccount": {
        1: ("metadata", _OBJECT_META, False),
        2: ("secrets", _OBJECT_REFERENCE, True),
        3: ("imagePullSecrets", {1: ("name", "string", False)}, True),
        4: ("automountServiceAccountToken", "bool", False),
    },
}
_ENVELOPE: Schema = {
    1: ("typeMeta", {1: ("apiVersion", "string", False), 2: ("kind", "string", False)}, False),
    2: ("raw", "raw", False),
}


class ProtobufError(ValueError):
    """The body is not a decodable Kubernetes protobuf message."""


class UnsupportedKind(ProtobufError):
    """A well-formed envelope around a kind this server does not decode."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ProtobufError("truncated field")
            value, pos = buf[pos : pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = int.from_bytes(buf[pos : pos + size], "little"), pos + size
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        yield number, wire, value


def _text(value: Any) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a length-delimited string")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise ProtobufError("invalid UTF-8 in a string field") from None


def _scalar(kind: str, value: Any) -> Any:
    kind = kind.rstrip("?")
    if kind == _INT_OR_STRING:
        if not isinstance(value, bytes):
            raise ProtobufError("expected an IntOrString message")
        parts = {n: v for n, _, v in _fields(value)}
        return _text(parts.get(3, b"")) if parts.get(1) == 1 else _scalar("int", parts.get(2, 0))
    if kind == "string":
        return _text(value)
    if kind == "int":
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == "bool":
        return bool(value)
    return value  # raw


def _decode(buf: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _, value in _fields(buf):
        if number not in schema:
            continue
        name, kind, repeated = schema[number]
        if isinstance(kind, dict):
            if not isinstance(value, bytes):
                raise ProtobufError(f"{name}: expected a message")
            decoded: Any = _decode(value, kind)
            if kind is _TIME:
                if not decoded.get("seconds"):
                    continue
                decoded = rfc3339(decoded["seconds"])
        elif kind in ("map_string", "map_bytes", "map_quantity"):
            entry = {n: v for n, _, v in _fields(value)} if isinstance(value, bytes) else {}
            key = _text(entry.get(1, b""))
            raw = entry.get(2, b"")
            if kind == "map_quantity":  # a resource.Quantity message: its string form in field 1
                raw = {n: v for n, _, v in _fields(raw)}.get(1, b"") if isinstance(raw, bytes) else b""
            item = base64.b64encode(raw).decode() if kind == "map_bytes" else _text(raw)
            out.setdefault(name, {})[key] = item
            continue
        else:
            decoded = _scalar(kind, value)
            if not repeated and (decoded == "" or (kind.endswith("?") and not decoded)):
                continue
        if repeated:
            out.setdefault(name, []).append(decoded)
        else:
            out[name] = decoded
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object; raises UnsupportedKind or ProtobufError."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf prefix")
    envelope = _decode(body[len(MAGIC) :], _ENVELOPE)
    type_meta = envelope.get("typeMeta") or {}
    kind = type_meta.get("kind", "")
    schema = KINDS.get(kind)
    if schema is None:
        raise UnsupportedKind(kind or "<none>")
    obj = _decode(envelope.get("raw", b""), schema)
    return {"apiVersion": type_meta.get("apiVersion", "v1"), "kind": kind, **obj}
