"""Validation the write pipeline runs for every resource: object metadata, then the strategy's kind rules.

Covers object metadata (``apimachinery/pkg/api/validation/objectmeta.go``) for every resource, custom
resources included, plus helpers the strategies' kind rules share (``pkg/apis/core/validation``). Each check
appends field-error causes; the server answers 422 Invalid when there is any.

Bodies are untyped JSON here (the real server decodes into Go structs first), so a value of the wrong
JSON type becomes a ``FieldValueTypeInvalid`` cause instead of an exception.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.names import (
    is_qualified_name,
    is_valid_label_value,
    name_is_dns_label,
    regex_error,
)

if TYPE_CHECKING:
    from t9k_provider.local.apiserver.generic.resources import Resource

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
IMMUTABLE = "field is immutable"
CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")
CONFIG_KEY_MSG = regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
    "[-._a-zA-Z0-9]+",
    "key.name",
    "KEY_NAME",
    "key-name",
)
_PROTOCOLS = ["SCTP", "TCP", "UDP"]


def invalid_message(kind: str, group: str, name: str, causes: list[Cause]) -> str:
    """``NewInvalid``'s message: ``<Kind>[.<group>] "<name>" is invalid: <field>: <error>[, ...]``."""
    qualified = f"{kind}.{group}" if group else kind
    return f'{qualified} "{name}" is invalid: {fe.aggregate(causes)}'


def invalid(res: Resource, name: str, causes: list[Cause]) -> errors.ApiError:
    """The 422 Invalid error for an object of ``res`` with these causes."""
    return invalid_kind(res.kind, res.group, name, causes)


def invalid_kind(kind: str, group: str, name: str, causes: list[Cause]) -> errors.ApiError:
    """The 422 Invalid error for an object of a kind no resource serves (a subresource's body)."""
    fields = [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes]
    return errors.invalid(kind, group, name, fields, invalid_message(kind, group, name, causes))


def validate_create(res: Resource, obj: dict) -> list[Cause]:
    """Causes that make creating ``obj`` through ``res`` a 422."""
    return fe.collect(lambda out: _create(res, obj, out))


def validate_update(res: Resource, old: dict, new: dict) -> list[Cause]:
    """Causes that make replacing ``old`` by ``new`` a 422 (metadata immutability, kind rules)."""

    def check(out: list[Cause]) -> None:
        _create(res, new, out)
        # Type errors in ``new`` are already reported; update rules read leniently.
        _object_meta_update(as_map(old.get("metadata")), as_map(new.get("metadata")), out)
        res.strategy.validate_update(old, new, out)

    return fe.collect(check)


def _create(res: Resource, obj: dict, out: list[Cause]) -> None:
    _object_meta(res, decoding.object_field(obj, "metadata", "metadata", out), out)
    res.strategy.validate(obj, out)


def length(value: Any) -> int:
    return len(value) if isinstance(value, list) else 0


def as_map(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _string_set(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ----------------------------------------------------------------------------------------- metadata


def _object_meta(res: Resource, meta: dict, out: list[Cause]) -> None:
    check = res.strategy.name_check
    generate = decoding.text_field(meta, "generateName", "metadata.generateName", out)
    if generate:
        out += [fe.invalid("metadata.generateName", generate, m) for m in check(generate, True)]
    name = decoding.text_field(meta, "name", "metadata.name", out)
    if not name:
        out.append(fe.required("metadata.name", "name or generateName is required"))
    else:
        out += [fe.invalid("metadata.name", name, m) for m in check(name, False)]
    namespace = decoding.text_field(meta, "namespace", "metadata.namespace", out)
    if not res.namespaced:
        if namespace:
            out.append(fe.forbidden("metadata.namespace", "not allowed on this type"))
    elif not namespace:
        out.append(fe.required("metadata.namespace"))
    else:
        problems = name_is_dns_label(namespace, False)
        out += [fe.invalid("metadata.namespace", namespace, m) for m in problems]
    generation = decoding.int_field(meta, "generation", "metadata.generation", out)
    if generation is not None and generation < 0:
        out.append(fe.invalid("metadata.generation", generation, "must be greater than or equal to 0"))
    validate_labels(meta, "labels", "metadata.labels", out)
    _annotations(meta, out)
    _owner_references(meta, out)
    _finalizers(meta, out)


def validate_labels(parent: dict, key: str, path: str, out: list[Cause]) -> None:
    for name, value in decoding.string_map(parent, key, path, out).items():
        out += [fe.invalid(path, name, m) for m in is_qualified_name(name)]
        out += [fe.invalid(path, value, m) for m in is_valid_label_value(value)]


def _annotations(meta: dict, out: list[Cause]) -> None:
    path = "metadata.annotations"
    size = 0
    for name, value in decoding.string_map(meta, "annotations", path, out).items():
        out += [fe.invalid(path, name, m) for m in is_qualified_name(name.lower())]
        size += len(name.encode()) + len(value.encode())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        out.append(fe.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))


def _owner_references(meta: dict, out: list[Cause]) -> None:
    path = "metadata.ownerReferences"
    controller = ""
    for ref_path, ref in decoding.object_items(meta, "ownerReferences", path, out):
        # Upstream reports these on the list path, without the index.
        api_version = decoding.text_field(ref, "apiVersion", f"{ref_path}.apiVersion", out)
        if not api_version.split("/")[-1]:
            out.append(fe.invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not decoding.text_field(ref, key, f"{ref_path}.{key}", out):
                out.append(fe.invalid(f"{path}.{key}", "", f"{key} must not be empty"))
        if ref.get("controller") is True:
            name = as_text(ref.get("name"))
            if controller:
                detail = (
                    'Only one reference can have Controller set to true. Found "true" in references for '
                    f"{controller} and {name}"
                )
                out.append(fe.invalid(path, meta["ownerReferences"], detail))
            controller = controller or name


def _finalizers(meta: dict, out: list[Cause]) -> None:
    path = "metadata.finalizers"
    finalizers = decoding.string_items(meta, "finalizers", path, out)
    for item in finalizers:
        out += [fe.invalid(path, item, m) for m in is_qualified_name(item)]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        out.append(fe.invalid(path, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"))


def _object_meta_update(old: dict, new: dict, out: list[Cause]) -> None:
    for key in ("name", "namespace"):
        if as_text(new.get(key)) != as_text(old.get(key)):
            out.append(fe.invalid(f"metadata.{key}", as_text(new.get(key)), IMMUTABLE))
    for key in ("uid", "creationTimestamp"):
        # Empty values are filled from the stored object by the server before validation.
        if new.get(key) and new.get(key) != old.get(key):
            out.append(fe.invalid(f"metadata.{key}", new[key], IMMUTABLE))
    if old.get("deletionTimestamp"):
        added = sorted(_string_set(new.get("finalizers")) - _string_set(old.get("finalizers")))
        if added:
            shown = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
            detail = (
                "no new finalizers can be added if the object is being deleted, found new finalizers " + shown
            )
            out.append(fe.forbidden("metadata.finalizers", detail))


# ----------------------------------------------------------------------------------------- shared kind rules


def validate_port(parent: dict, key: str, path: str, out: list[Cause], required: bool = True) -> None:
    """Ports are Go ints: a missing required port decodes as 0 and fails the range check."""
    if parent.get(key) is None and not required:
        return
    number = decoding.int_field({key: parent.get(key, 0)}, key, path, out)
    if number is not None and not 1 <= number <= 65535:
        out.append(fe.invalid(path, number, "must be between 1 and 65535, inclusive"))


def validate_protocol(parent: dict, path: str, out: list[Cause]) -> None:
    value = decoding.text_field(parent, "protocol", path, out)
    if value and value not in _PROTOCOLS:
        out.append(fe.not_supported(path, value, _PROTOCOLS))
