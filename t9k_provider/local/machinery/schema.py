"""CRD schemas: validation, pruning and defaulting of custom resources, and the checks a CRD must pass.

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

from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery.fielderrors import (
    Cause,
    collect,
    duplicate,
    forbidden,
    go_value,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
    type_invalid,
)
from t9k_provider.local.machinery.jsonvalues import json_copy, json_in, json_type
from t9k_provider.local.machinery.names import is_dns1035_label, is_dns1123_subdomain

__all__ = ["Cause", "apply_defaults", "check_crd", "is_base64", "is_ip", "prune", "validate"]

_TYPES = ["array", "boolean", "integer", "number", "object", "string"]


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


# --------------------------------------------------------------------------------------------- CRD checks


def check_crd(crd: dict) -> list[Cause]:
    """The validation a CustomResourceDefinition (apiextensions.k8s.io/v1) must pass to be stored.

    A CRD that passes has well-typed schemas, so ``validate``, ``prune`` and ``apply_defaults`` can
    rely on them.
    """
    out: list[Cause] = []
    spec = decoding.object_field(crd, "spec", "spec", out)
    names = decoding.object_field(spec, "names", "spec.names", out)
    group = decoding.text_field(spec, "group", "spec.group", out)
    plural = decoding.text_field(names, "plural", "spec.names.plural", out)
    name = decoding.text_field(
        decoding.object_field(crd, "metadata", "metadata", out), "name", "metadata.name", out
    )
    if name != f"{plural}.{group}":
        out.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))

    if not group:
        out.append(required("spec.group"))
    else:
        errs = is_dns1123_subdomain(group)
        if errs:
            out.append(invalid("spec.group", group, ",".join(errs)))
        if "." not in group:
            out.append(invalid("spec.group", group, "should be a domain with at least one dot"))

    scope = decoding.text_field(spec, "scope", "spec.scope", out)
    if not scope:
        out.append(required("spec.scope"))
    elif scope not in ("Cluster", "Namespaced"):
        out.append(not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))

    _check_names(names, out)
    _check_versions(spec, out)
    if spec.get("preserveUnknownFields"):
        detail = (
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
            "spec.versions[*].schema instead"
        )
        out.append(invalid("spec.preserveUnknownFields", spec["preserveUnknownFields"], detail))
    return out


def _check_names(names: dict, out: list[Cause]) -> None:
    if not names.get("plural"):
        out.append(required("spec.names.plural"))
    for key in ("plural", "singular"):
        value = (
            decoding.text_field(names, key, f"spec.names.{key}", out)
            if key == "singular"
            else _text(names, key)
        )
        errs = is_dns1035_label(value) if value else []
        if errs:
            out.append(invalid(f"spec.names.{key}", value, ",".join(errs)))
    for key in ("kind", "listKind"):
        value = decoding.text_field(names, key, f"spec.names.{key}", out)
        if not value:
            if key == "kind":
                out.append(required("spec.names.kind"))
            continue
        errs = is_dns1035_label(value.lower())
        if errs:
            detail = "may have mixed case, but should otherwise match: " + ",".join(errs)
            out.append(invalid(f"spec.names.{key}", value, detail))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        out.append(invalid("spec.names.listKind", names["listKind"], "kind and listKind cannot be the same"))
    for i, short in enumerate(decoding.string_items(names, "shortNames", "spec.names.shortNames", out)):
        errs = is_dns1035_label(short)
        if errs:
            out.append(invalid(f"spec.names.shortNames[{i}]", short, ",".join(errs)))
    decoding.string_items(names, "categories", "spec.names.categories", out)


def _text(parent: dict, key: str) -> str:
    value = parent.get(key)
    return value if isinstance(value, str) else ""


def _check_versions(spec: dict, out: list[Cause]) -> None:
    versions = decoding.object_items(spec, "versions", "spec.versions", out)
    if not versions:
        out.append(required("spec.versions", "must have exactly one version marked as storage version"))
        return
    listed = [_text(v, "name") for _, v in versions]
    if sum(1 for _, v in versions if v.get("storage") is True) != 1:
        out.append(
            invalid("spec.versions", listed, "must have exactly one version marked as storage version")
        )
    if not any(v.get("served") is True for _, v in versions):
        out.append(invalid("spec.versions", listed, "must have at least one version marked as served"))
    seen: set[str] = set()
    for base, version in versions:
        vname = decoding.text_field(version, "name", f"{base}.name", out)
        if not vname:
            out.append(required(f"{base}.name"))
        else:
            errs = is_dns1035_label(vname)
            if errs:
                out.append(invalid(f"{base}.name", vname, ",".join(errs)))
            if vname in seen:
                out.append(duplicate(f"{base}.name", vname))
            seen.add(vname)
        for flag in ("served", "storage"):
            if flag in version and not isinstance(version[flag], bool):
                out.append(type_invalid(f"{base}.{flag}", version[flag], "must be of type boolean"))
        schema_holder = decoding.object_field(version, "schema", f"{base}.schema", out)
        path = f"{base}.schema.openAPIV3Schema"
        if schema_holder.get("openAPIV3Schema") is None:
            out.append(required(path, "schemas are required"))
        else:
            _check_structural(schema_holder["openAPIV3Schema"], path, out, root=True)
        _check_subresources(
            decoding.object_field(version, "subresources", f"{base}.subresources", out), base, out
        )
        _check_printer_columns(version, base, out)


def _check_subresources(subresources: dict, base: str, out: list[Cause]) -> None:
    path = f"{base}.subresources.scale"
    scale = decoding.object_field(subresources, "scale", path, out)
    if "scale" not in subresources:
        return
    for key, root in (("specReplicasPath", ".spec."), ("statusReplicasPath", ".status.")):
        value = decoding.text_field(scale, key, f"{path}.{key}", out)
        if not value:
            out.append(required(f"{path}.{key}"))
        elif not value.startswith(root):
            out.append(invalid(f"{path}.{key}", value, f"should be a json path under {root[:-1]}"))


_COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]


def _check_printer_columns(version: dict, base: str, out: list[Cause]) -> None:
    path = f"{base}.additionalPrinterColumns"
    for column_path, column in decoding.object_items(version, "additionalPrinterColumns", path, out):
        if not decoding.text_field(column, "name", f"{column_path}.name", out):
            out.append(required(f"{column_path}.name"))
        kind = decoding.text_field(column, "type", f"{column_path}.type", out)
        if not kind:
            out.append(required(f"{column_path}.type"))
        elif kind not in _COLUMN_TYPES:
            out.append(not_supported(f"{column_path}.type", kind, _COLUMN_TYPES))
        if not decoding.text_field(column, "jsonPath", f"{column_path}.jsonPath", out):
            out.append(required(f"{column_path}.jsonPath"))


# The JSON type of each schema keyword, as JSONSchemaProps declares it.
_KEYWORD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("type", "format", "pattern", "description", "title"), (str,)),
    **dict.fromkeys(("properties", "not"), (dict,)),
    "items": (dict, list),
    "additionalProperties": (dict, bool),
    **dict.fromkeys(("required", "enum", "allOf", "anyOf", "oneOf"), (list,)),
    **dict.fromkeys(("nullable", "uniqueItems", "exclusiveMinimum", "exclusiveMaximum"), (bool,)),
    **dict.fromkeys(("x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string"), (bool,)),
    "x-kubernetes-embedded-resource": (bool,),
    "x-kubernetes-list-type": (str,),
    "x-kubernetes-list-map-keys": (list,),
    "x-kubernetes-map-type": (str,),
    **dict.fromkeys(("minimum", "maximum", "multipleOf"), (int, float)),
    **dict.fromkeys(("minLength", "maxLength", "minItems", "maxItems"), (int,)),
    **dict.fromkeys(("minProperties", "maxProperties"), (int,)),
}


def _check_shape(s: Any, path: str, out: list[Cause]) -> bool:
    """Keyword types (what decoding into JSONSchemaProps enforces); False stops deeper checks."""
    if not isinstance(s, dict):
        out.append(type_invalid(path, s, "must be of type object"))
        return False
    ok = True
    for key, expected in _KEYWORD_TYPES.items():
        value = s.get(key)
        if value is None:
            continue
        wrong = not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected)
        if not wrong and expected == (int,) and value < 0:
            out.append(invalid(f"{path}.{key}", value, "must be greater than or equal to 0"))
            ok = False
        elif wrong:
            out.append(type_invalid(f"{path}.{key}", value, f"must be of type {_type_name(expected)}"))
            ok = False
    for key in ("required", "x-kubernetes-list-map-keys"):
        if isinstance(s.get(key), list) and not all(isinstance(r, str) for r in s[key]):
            out.append(type_invalid(f"{path}.{key}", s[key], "must be of type array of strings"))
            ok = False
    list_type = s.get("x-kubernetes-list-type")
    if isinstance(list_type, str) and list_type not in ("atomic", "set", "map"):
        out.append(not_supported(f"{path}.x-kubernetes-list-type", list_type, ["atomic", "set", "map"]))
        ok = False
    if list_type == "map" and not s.get("x-kubernetes-list-map-keys"):
        detail = "must not be empty if x-kubernetes-list-type is map"
        out.append(required(f"{path}.x-kubernetes-list-map-keys", detail))
        ok = False
    if isinstance(s.get("multipleOf"), (int, float)) and s["multipleOf"] <= 0:
        out.append(invalid(f"{path}.multipleOf", s["multipleOf"], "must be greater than 0"))
        ok = False
    for keyword in ("allOf", "anyOf", "oneOf"):
        alternatives = s.get(keyword)
        for i, sub in enumerate(alternatives if isinstance(alternatives, list) else []):
            ok = _check_value_validation(sub, f"{path}.{keyword}[{i}]", out) and ok
    if "not" in s and isinstance(s["not"], dict):
        ok = _check_value_validation(s["not"], f"{path}.not", out) and ok
    return ok


def _type_name(expected: tuple[type, ...]) -> str:
    names = {str: "string", dict: "object", list: "array", bool: "boolean", int: "integer", float: "number"}
    if expected == (int, float):
        return "number"
    return " or ".join(names[t] for t in expected)


def _check_value_validation(s: Any, path: str, out: list[Cause]) -> bool:
    """Schemas under allOf/anyOf/oneOf/not only constrain values; they need shape, not types."""
    if not _check_shape(s, path, out):
        return False
    ok = True
    for key, sub in (s.get("properties") or {}).items():
        ok = _check_value_validation(sub, f"{path}.properties[{key}]", out) and ok
    for key in ("items", "additionalProperties"):
        if isinstance(s.get(key), dict):
            ok = _check_value_validation(s[key], f"{path}.{key}", out) and ok
    return ok


def _check_structural(s: Any, path: str, out: list[Cause], root: bool = False, level: str = "object") -> bool:
    """Structural-schema rules; returns whether the subtree is well-typed (so defaults can be checked)."""
    if not _check_shape(s, path, out):
        return False
    kind = s.get("type") or ""
    preserve = s.get("x-kubernetes-preserve-unknown-fields")
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    embedded = s.get("x-kubernetes-embedded-resource") is True
    properties = s.get("properties")
    extra = s.get("additionalProperties")
    items = s.get("items")

    if kind and kind not in _TYPES:
        out.append(not_supported(f"{path}.type", kind, _TYPES))
    if root:
        if not kind:
            out.append(required(f"{path}.type", "must not be empty at the root"))
        elif kind != "object":
            out.append(invalid(f"{path}.type", kind, "must be object at the root"))
        _check_root_metadata(properties, path, out)
    elif not kind and not preserve and not int_or_string and not embedded:
        out.append(required(f"{path}.type", f"must not be empty for specified {level} fields"))
    if preserve is False:
        out.append(
            invalid(f"{path}.x-kubernetes-preserve-unknown-fields", preserve, "must be true or undefined")
        )
    if int_or_string and kind:
        out.append(invalid(f"{path}.type", kind, "must be empty if x-kubernetes-int-or-string is true"))
    if embedded:
        if kind != "object":
            out.append(
                invalid(f"{path}.type", kind, "must be object if x-kubernetes-embedded-resource is true")
            )
        if not properties and not preserve:
            detail = (
                "must not be empty if x-kubernetes-embedded-resource is true "
                "without x-kubernetes-preserve-unknown-fields"
            )
            out.append(required(f"{path}.properties", detail))
    if extra is False:
        out.append(forbidden(f"{path}.additionalProperties", "additionalProperties cannot be set to false"))
    elif extra is not None and properties:
        detail = "additionalProperties and properties are mutual exclusive"
        out.append(forbidden(f"{path}.additionalProperties", detail))
    if kind == "array" and items is None:
        out.append(required(f"{path}.items", "must be specified"))
    if isinstance(items, list):
        out.append(forbidden(f"{path}.items", "items must be a schema object and not an array"))
    if s.get("uniqueItems") is True:
        detail = "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        out.append(forbidden(f"{path}.uniqueItems", detail))
    pattern = s.get("pattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            detail = f"must be a valid regular expression, but isn't: {exc}"
            out.append(invalid(f"{path}.pattern", pattern, detail))

    ok = True
    for key, sub in (properties or {}).items():
        ok = _check_structural(sub, f"{path}.properties[{key}]", out) and ok
    if isinstance(items, dict):
        ok = _check_structural(items, f"{path}.items", out, level="array") and ok
    if isinstance(extra, dict):
        ok = _check_structural(extra, f"{path}.additionalProperties", out) and ok
    if "default" in s and ok:
        out.extend(validate_at(s, s["default"], f"{path}.default"))
    return ok


def _check_root_metadata(properties: dict | None, path: str, out: list[Cause]) -> None:
    metadata = (properties or {}).get("metadata")
    if not isinstance(metadata, dict):
        return
    nested = metadata.get("properties") if isinstance(metadata.get("properties"), dict) else {}
    if set(metadata) - {"type", "properties", "description"} or set(nested) - {"name", "generateName"}:
        detail = (
            "must not specify anything other than name and generateName, but metadata is implicitly specified"
        )
        out.append(forbidden(f"{path}.properties[metadata]", detail))
