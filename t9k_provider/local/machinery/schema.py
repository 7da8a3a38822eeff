"""CRD schemas: validation, pruning and defaulting of custom resources.

Semantics of apiextensions-apiserver (``apiserver/validation``, ``apiserver/schema/{pruning,defaulting}``,
``apis/apiextensions/validation``); messages are kube-openapi's, wrapped in field errors.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import re
import uuid
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from t9k_provider.local.machinery.fielderrors import (
    Cause,
    collect,
    duplicate,
    go_value,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
    type_invalid,
)
from t9k_provider.local.machinery.jsonvalues import json_copy, json_in, json_type

__all__ = ["Cause", "apply_defaults", "is_base64", "is_ip", "prune", "validate"]

#: The types a schema node may have.
SCHEMA_TYPES = ["array", "boolean", "integer", "number", "object", "string"]


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _has_type(expected: str, value: Any) -> bool:
    actual = json_type(value)
    if expected == "integer":
        return actual == "integer" or (actual == "number" and math.isfinite(value) and value.is_integer())
    if expected == "number":
        return actual in ("integer", "number")
    return actual == expected


def _number(value: Any) -> str:
    """Numbers as Go's ``%v`` prints a float64 limit."""
    return go_value(float(value)) if isinstance(value, (int, float)) else str(value)


# --------------------------------------------------------------------------------------------- formats

_DURATION = re.compile(
    r"[-+]?(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))*\Z"
)
_HOSTNAME = re.compile(
    r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*\Z"
)
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+\Z")
_MAC = re.compile(r"([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}\Z")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s]*\Z")


def _parses(parse: Callable[[str], object], text: str) -> bool:
    """Whether ``parse`` takes ``text`` without a ValueError."""
    try:
        parse(text)
    except ValueError:
        return False
    return True


def _is_datetime(text: str) -> bool:
    iso = text.replace("Z", "+00:00").replace("z", "+00:00")
    return ("T" in text.upper() or " " in text) and _parses(datetime.fromisoformat, iso)


def is_base64(text: str) -> bool:
    return _parses(lambda t: base64.b64decode(t, validate=True), text)


def is_ip(text: str, version: int | None = None) -> bool:
    """An IP address (of that version, if given)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return version is None or address.version == version


_FORMATS = {
    "date-time": _is_datetime,
    "datetime": _is_datetime,
    "date": lambda t: len(t) == 10 and _parses(date.fromisoformat, t),
    "duration": lambda t: bool(_DURATION.match(t)) or t == "0",
    "byte": is_base64,
    "uuid": lambda t: _parses(uuid.UUID, t),
    "ipv4": lambda t: is_ip(t, 4),
    "ipv6": lambda t: is_ip(t, 6),
    "cidr": lambda t: "/" in t and _parses(lambda n: ipaddress.ip_network(n, strict=False), t),
    "hostname": lambda t: bool(_HOSTNAME.match(t)) and len(t) <= 253,
    "email": lambda t: bool(_EMAIL.match(t)),
    "mac": lambda t: bool(_MAC.match(t)),
    "uri": lambda t: bool(_URI.match(t)),
}


# --------------------------------------------------------------------------------------------- validation


def validate(schema: dict, obj: Any) -> list[Cause]:
    """Validate ``obj`` against an ``openAPIV3Schema``; returns the causes of a 422 (empty if valid)."""
    return collect(lambda out: _validate(schema or {}, obj, "", out))


def _validate(s: dict, value: Any, path: str, out: list[Cause]) -> None:
    declared = s.get("type", "")
    if s.get("x-kubernetes-int-or-string"):
        declared = "integer,string"
    if value is None:
        if declared and not s.get("nullable"):
            out.append(type_invalid(path, "null", f'{path} in body must be of type {declared}: "null"'))
        return
    if declared and not any(_has_type(t, value) for t in declared.split(",")):
        actual = json_type(value)
        out.append(type_invalid(path, actual, f'{path} in body must be of type {declared}: "{actual}"'))
        return

    if "enum" in s and not json_in(value, s["enum"] or []):
        allowed = [e if isinstance(e, str) else go_value(e) for e in s["enum"] or []]
        out.append(not_supported(path, value, allowed))

    if isinstance(value, str):
        _validate_string(s, value, path, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(s, value, path, out)
    elif isinstance(value, list):
        _validate_array(s, value, path, out)
    elif isinstance(value, dict):
        _validate_object(s, value, path, out)

    _validate_composition(s, value, path, out)


def _validate_string(s: dict, value: str, path: str, out: list[Cause]) -> None:
    if "maxLength" in s and len(value) > s["maxLength"]:
        out.append(too_long(path, s["maxLength"]))
    if "minLength" in s and len(value) < s["minLength"]:
        out.append(invalid(path, value, f"{path} in body should be at least {s['minLength']} chars long"))
    pattern = s.get("pattern")
    if pattern:
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True  # check_crd rejects invalid patterns before any object meets them
        if not matched:
            out.append(invalid(path, value, f"{path} in body should match '{pattern}'"))
    check = _FORMATS.get(s.get("format", ""))
    if check is not None and not check(value):
        out.append(type_invalid(path, value, f'{path} in body must be of type {s["format"]}: "{value}"'))


def _validate_number(s: dict, value: float, path: str, out: list[Cause]) -> None:
    if "maximum" in s:
        limit = s["maximum"]
        if s.get("exclusiveMaximum") and value >= limit:
            out.append(invalid(path, value, f"{path} in body should be less than {_number(limit)}"))
        elif value > limit:
            out.append(
                invalid(path, value, f"{path} in body should be less than or equal to {_number(limit)}")
            )
    if "minimum" in s:
        limit = s["minimum"]
        if s.get("exclusiveMinimum") and value <= limit:
            out.append(invalid(path, value, f"{path} in body should be greater than {_number(limit)}"))
        elif value < limit:
            out.append(
                invalid(path, value, f"{path} in body should be greater than or equal to {_number(limit)}")
            )
    factor = s.get("multipleOf")
    if factor and not math.isclose(value / factor, round(value / factor), abs_tol=1e-9):
        out.append(invalid(path, value, f"{path} in body should be a multiple of {_number(factor)}"))


def _validate_array(s: dict, value: list, path: str, out: list[Cause]) -> None:
    if "maxItems" in s and len(value) > s["maxItems"]:
        out.append(too_many(path, len(value), s["maxItems"]))
    if "minItems" in s and len(value) < s["minItems"]:
        out.append(invalid(path, len(value), f"{path} in body should have at least {s['minItems']} items"))
    if s.get("uniqueItems"):
        for i, item in enumerate(value):
            if json_in(item, value[:i]):
                out.append(invalid(path, "", f"{path} in body shouldn't contain duplicates"))
                break
    _validate_list_type(s, value, path, out)
    items = s.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(items, item, f"{path}[{i}]", out)


def _validate_list_type(s: dict, value: list, path: str, out: list[Cause]) -> None:
    """``x-kubernetes-list-type`` set/map: items (or their map keys) must be unique."""
    list_type = s.get("x-kubernetes-list-type")
    if list_type not in ("set", "map"):
        return
    keys = s.get("x-kubernetes-list-map-keys") or []
    seen: list[Any] = []
    for i, item in enumerate(value):
        if list_type == "map":
            if not isinstance(item, dict):
                continue
            identity: Any = {k: item.get(k) for k in keys}
        else:
            identity = item
        if json_in(identity, seen):
            out.append(duplicate(f"{path}[{i}]", identity))
        else:
            seen.append(identity)


def _validate_object(s: dict, value: dict, path: str, out: list[Cause]) -> None:
    if "maxProperties" in s and len(value) > s["maxProperties"]:
        out.append(too_many(path, len(value), s["maxProperties"]))
    if "minProperties" in s and len(value) < s["minProperties"]:
        out.append(
            invalid(path, len(value), f"{path} in body should have at least {s['minProperties']} properties")
        )
    for key in s.get("required") or []:
        if key not in value:
            out.append(required(_child(path, key)))
    if s.get("x-kubernetes-embedded-resource"):
        for key in ("apiVersion", "kind"):
            if not value.get(key):
                out.append(required(_child(path, key), "must not be empty"))
    properties = s.get("properties") or {}
    extra = s.get("additionalProperties")
    for key, item in value.items():
        if key in properties:
            _validate(properties[key], item, _child(path, key), out)
        elif isinstance(extra, dict):
            _validate(extra, item, _child(path, key), out)
        elif extra is False:
            out.append(invalid(path, key, f"{path}.{key} in body is a forbidden property"))


def _validate_composition(s: dict, value: Any, path: str, out: list[Cause]) -> None:
    for sub in s.get("allOf") or []:
        found = validate_at(sub, value, path)
        if found:
            out.extend(found)
            out.append(invalid(path, value, f"{path} in body must validate all the schemas (allOf)"))
    for keyword, rule in (
        ("anyOf", "at least one schema (anyOf)"),
        ("oneOf", "one and only one schema (oneOf)"),
    ):
        alternatives = s.get(keyword)
        if not alternatives:
            continue
        results = [validate_at(sub, value, path) for sub in alternatives]
        passed = sum(1 for r in results if not r)
        if (keyword == "anyOf" and passed == 0) or (keyword == "oneOf" and passed != 1):
            out.append(invalid(path, value, f"{path} in body must validate {rule}"))
            if passed == 0:
                out.extend(min(results, key=len))
    if isinstance(s.get("not"), dict) and not validate_at(s["not"], value, path):
        out.append(invalid(path, value, f"{path} in body must not validate the schema (not)"))


def validate_at(schema: dict, value: Any, path: str) -> list[Cause]:
    """Validate a value found at ``path`` (field paths in the causes start there)."""
    out: list[Cause] = []
    _validate(schema, value, path, out)
    return out


# --------------------------------------------------------------------------------------------- pruning


def prune(schema: dict, obj: dict) -> dict:
    """Drop fields the schema does not declare (unless preserved), and nulls of non-nullable fields.

    The object root and embedded resources keep ``apiVersion``, ``kind`` and ``metadata``.
    """
    result = json_copy(obj)
    _prune(schema or {}, result, root=True)
    return result


def _drops_null(s: dict) -> bool:
    return not s.get("nullable") and "default" not in s


def _prune(s: dict, value: Any, root: bool = False) -> None:
    if isinstance(value, dict):
        properties = s.get("properties") or {}
        extra = s.get("additionalProperties")
        keep_unknown = bool(s.get("x-kubernetes-preserve-unknown-fields")) or extra is True
        envelope = root or bool(s.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            if envelope and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = properties.get(key) if key in properties else extra if isinstance(extra, dict) else None
            if sub is None:
                if not keep_unknown:
                    del value[key]
            elif value[key] is None and _drops_null(sub):
                del value[key]
            else:
                _prune(sub, value[key])
    elif isinstance(value, list):
        items = s.get("items")
        if isinstance(items, dict):
            for item in value:
                _prune(items, item)


# --------------------------------------------------------------------------------------------- defaulting


def apply_defaults(schema: dict, obj: dict) -> dict:
    """Fill absent (or null, non-nullable) fields from ``default:``, recursing into defaulted values too."""
    result = json_copy(obj)
    _default(schema or {}, result)
    return result


def _default(s: dict, value: Any) -> None:
    if isinstance(value, dict):
        properties = s.get("properties") or {}
        for key, prop in properties.items():
            if "default" in prop and (key not in value or (value[key] is None and not prop.get("nullable"))):
                value[key] = json_copy(prop["default"])
        extra = s.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                _default(properties[key], item)
            elif isinstance(extra, dict):
                _default(extra, item)
    elif isinstance(value, list) and isinstance(s.get("items"), dict):
        for item in value:
            _default(s["items"], item)
