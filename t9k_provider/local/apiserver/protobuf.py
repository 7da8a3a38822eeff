"""Decode the Kubernetes protobuf request bodies kubectl's ``create <kind>`` generators send.

kubectl 1.32 posts ``kubectl create namespace|configmap|secret|serviceaccount`` objects (and the access review
of ``kubectl auth can-i``) as
``application/vnd.kubernetes.protobuf``: the magic ``k8s\\0`` followed by a ``runtime.Unknown`` envelope
whose ``raw`` field is the object's message (field numbers from k8s.io/api ``generated.proto``). Only those
kinds are decoded; any other protobuf body gets 415, as JSON and YAML are the server's formats. Empty strings
and zero timestamps, which Go encodes but the JSON form omits, are dropped.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

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
    7: ("generation", "int", False),
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
                stamp = datetime.fromtimestamp(decoded["seconds"], timezone.utc)
                decoded = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        elif kind in ("map_string", "map_bytes"):
            entry = {n: v for n, _, v in _fields(value)} if isinstance(value, bytes) else {}
            key = _text(entry.get(1, b""))
            raw = entry.get(2, b"")
            item = _text(raw) if kind == "map_string" else base64.b64encode(raw).decode()
            out.setdefault(name, {})[key] = item
            continue
        else:
            decoded = _scalar(kind, value)
            if decoded == "" and not repeated:
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
