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


def test_unsupported_kinds_and_garbage() -> None:
    with pytest.raises(UnsupportedKind):
        decode_object(envelope("batch/v1", "Job", field(1, field(1, "j"))))
    for bad in (b"{}", MAGIC + b"\xff", MAGIC + field(2, b"x")[:-1] + b"", MAGIC + bytes([0x0B])):
        with pytest.raises(ProtobufError):
            decode_object(bad)
