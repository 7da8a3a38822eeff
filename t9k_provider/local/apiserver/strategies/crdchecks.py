"""What a CRD must be to be accepted, as ``ValidateCustomResourceDefinition`` checks it: names, versions,
subresources, printer columns, and a structural schema (every node has a type, no value validation above an
array or object it does not describe)."""

from __future__ import annotations

import re
from typing import Any

from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery.fielderrors import (
    Cause,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    type_invalid,
)
from t9k_provider.local.machinery.names import is_dns1035_label, is_dns1123_subdomain
from t9k_provider.local.machinery.schema import SCHEMA_TYPES, validate_at


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

    if kind and kind not in SCHEMA_TYPES:
        out.append(not_supported(f"{path}.type", kind, SCHEMA_TYPES))
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
