"""CRD schema validation, pruning, defaulting and CRD checks, with apiextensions wording."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from t9k_provider.local.apiserver.strategies.crdchecks import check_crd
from t9k_provider.local.machinery.schema import Cause, apply_defaults, prune, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["replicas"],
            "properties": {
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
                "port": {"x-kubernetes-int-or-string": True},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "minItems": 1},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "maybe": {"type": "string", "nullable": True},
                "when": {"type": "string", "format": "date-time"},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["id"],
                        "properties": {
                            "id": {"type": "integer"},
                            "flag": {"type": "boolean", "default": False},
                        },
                    },
                },
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def obj(**spec: Any) -> dict:
    return {"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "x"}, "spec": {"replicas": 2, **spec}}


def only(causes: list[Cause]) -> Cause:
    assert len(causes) == 1, causes
    return causes[0]


def test_valid_object_has_no_causes() -> None:
    good = obj(
        mode="a",
        name="abc",
        ratio=0.5,
        port="http",
        tags=["x"],
        env={"A": "1"},
        free={"any": [1, {"thing": None}]},
        maybe=None,
        when="2025-01-02T03:04:05Z",
        items=[{"id": 1}],
        template={"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}},
    )
    assert validate(SCHEMA, good) == []


def test_type_error_wording_matches_apiserver() -> None:
    cause = only(validate(SCHEMA, obj(replicas="string")))
    assert cause == Cause(
        "FieldValueTypeInvalid",
        'Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        "spec.replicas",
    )


def test_integral_float_is_an_integer_but_bool_is_not() -> None:
    assert validate(SCHEMA, obj(replicas=3.0)) == []
    assert only(validate(SCHEMA, obj(replicas=True))).message == (
        'Invalid value: "boolean": spec.replicas in body must be of type integer: "boolean"'
    )


def test_required_and_nested_paths_with_indices() -> None:
    bad = obj(items=[{"id": 1}, {"flag": True}, {"id": "x"}])
    del bad["spec"]["replicas"]
    causes = validate(SCHEMA, bad)
    assert Cause("FieldValueRequired", "Required value", "spec.replicas") in causes
    assert Cause("FieldValueRequired", "Required value", "spec.items[1].id") in causes
    assert any(c.field == "spec.items[2].id" and c.reason == "FieldValueTypeInvalid" for c in causes)


def test_enum_is_unsupported_value() -> None:
    assert only(validate(SCHEMA, obj(mode="x"))) == Cause(
        "FieldValueNotSupported", 'Unsupported value: "x": supported values: "a", "b"', "spec.mode"
    )


def test_numeric_limits() -> None:
    assert only(validate(SCHEMA, obj(replicas=0))).message == (
        "Invalid value: 0: spec.replicas in body should be greater than or equal to 1"
    )
    assert only(validate(SCHEMA, obj(replicas=11))).message == (
        "Invalid value: 11: spec.replicas in body should be less than or equal to 10"
    )
    assert only(validate(SCHEMA, obj(ratio=0))).message == (
        "Invalid value: 0: spec.ratio in body should be greater than 0"
    )


def test_string_limits() -> None:
    assert only(validate(SCHEMA, obj(name="a"))).message == (
        'Invalid value: "a": spec.name in body should be at least 2 chars long'
    )
    assert only(validate(SCHEMA, obj(name="abcdef"))) == Cause(
        "FieldValueTooLong", "Too long: may not be more than 5 bytes", "spec.name"
    )
    assert only(validate(SCHEMA, obj(name="AB"))).message == (
        "Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"
    )


def test_array_limits_and_item_types() -> None:
    assert only(validate(SCHEMA, obj(tags=["a", "b", "c"]))) == Cause(
        "FieldValueTooMany", "Too many: 3: must have at most 2 items", "spec.tags"
    )
    assert only(validate(SCHEMA, obj(tags=[]))).message == (
        "Invalid value: 0: spec.tags in body should have at least 1 items"
    )
    assert only(validate(SCHEMA, obj(tags=["a", 1]))).field == "spec.tags[1]"


def test_additional_properties_schema_and_int_or_string() -> None:
    assert only(validate(SCHEMA, obj(env={"A": 1}))).field == "spec.env.A"
    assert validate(SCHEMA, obj(port=8080)) == []
    assert only(validate(SCHEMA, obj(port=True))).reason == "FieldValueTypeInvalid"


def test_nullable() -> None:
    assert validate(SCHEMA, obj(maybe=None)) == []
    assert only(validate(SCHEMA, obj(mode=None))).message == (
        'Invalid value: "null": spec.mode in body must be of type string: "null"'
    )


@pytest.mark.parametrize(
    "fmt,good,bad",
    [
        ("date-time", "2025-01-02T03:04:05.123Z", "yesterday"),
        ("date", "2025-01-02", "2025-13-02"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "nope"),
        ("ipv4", "10.0.0.1", "::1"),
        ("ipv6", "::1", "10.0.0.1"),
        ("cidr", "10.0.0.0/8", "10.0.0.1"),
        ("byte", "aGVsbG8=", "not base64!"),
        ("duration", "1h30m", "1 hour"),
        ("hostname", "a.example.com", "-bad-"),
        ("email", "a@b.io", "nobody"),
    ],
)
def test_formats(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}
    assert validate(schema, {"v": good}) == []
    cause = only(validate(schema, {"v": bad}))
    assert cause.reason == "FieldValueTypeInvalid"
    assert cause.message.endswith(f'v in body must be of type {fmt}: "{bad}"')


def test_unknown_format_is_ignored() -> None:
    assert validate({"type": "string", "format": "whatever"}, "x") == []


def test_embedded_resource_requires_api_version_and_kind() -> None:
    causes = validate(SCHEMA, obj(template={"metadata": {}}))
    assert {c.field for c in causes} == {"spec.template.apiVersion", "spec.template.kind"}


def test_composition_keywords() -> None:
    any_of = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert validate(any_of, 1) == []
    assert any("must validate at least one schema (anyOf)" in c.message for c in validate(any_of, True))
    one_of = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert any("one and only one schema (oneOf)" in c.message for c in validate(one_of, 1))
    assert validate(one_of, 1.5) == []
    all_of = {"allOf": [{"minimum": 1}, {"maximum": 3}]}
    assert validate(all_of, 2) == []
    assert validate(all_of, 5) != []
    not_schema = {"not": {"type": "string"}}
    assert validate(not_schema, 1) == []
    assert validate(not_schema, "x") != []


def test_additional_properties_false_forbids_unknown_keys() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    assert only(validate(schema, {"a": "x", "b": 1})) == Cause(
        "FieldValueInvalid", 'Invalid value: "b": .b in body is a forbidden property', ""
    )


def test_object_size_limits_and_unique_items() -> None:
    assert (
        only(validate({"type": "object", "maxProperties": 1}, {"a": 1, "b": 2})).reason == "FieldValueTooMany"
    )
    assert "at least 2 properties" in only(validate({"type": "object", "minProperties": 2}, {"a": 1})).message
    assert (
        "shouldn't contain duplicates"
        in only(validate({"type": "array", "uniqueItems": True}, [1, 1])).message
    )


def test_list_type_set_and_map_reject_duplicates() -> None:
    as_set = {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
    assert validate(as_set, ["a", "b"]) == []
    assert only(validate(as_set, ["a", "b", "a"])) == Cause(
        "FieldValueDuplicate", 'Duplicate value: "a"', "[2]"
    )
    as_map = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {"type": "object", "properties": {"type": {"type": "string"}, "v": {"type": "integer"}}},
    }
    ok = [{"type": "Ready", "v": 1}, {"type": "Done", "v": 1}]
    assert validate(as_map, ok) == []
    assert only(validate(as_map, [*ok, {"type": "Ready", "v": 2}])) == Cause(
        "FieldValueDuplicate", 'Duplicate value: {"type":"Ready"}', "[2]"
    )


# --------------------------------------------------------------------------------------------- pruning


def test_prune_drops_unknown_fields_and_keeps_envelope() -> None:
    given_obj = obj(unknown=1, env={"A": "1"}, free={"x": {"y": 1}}, items=[{"id": 1, "junk": 2}])
    given_obj["metadata"]["anything"] = "kept"
    given_obj["extraTop"] = True
    given_obj["status"] = {"phase": "Running", "undeclared": "gone"}
    pruned = prune(SCHEMA, given_obj)
    assert "unknown" not in pruned["spec"]
    assert "extraTop" not in pruned
    assert pruned["metadata"]["anything"] == "kept"
    assert pruned["spec"]["free"] == {"x": {"y": 1}}
    assert pruned["spec"]["items"] == [{"id": 1}]
    assert pruned["status"] == {"phase": "Running"}
    assert "unknown" in given_obj["spec"], "prune must not mutate its input"


def test_prune_keeps_embedded_resource_envelope_and_drops_non_nullable_nulls() -> None:
    schema = {
        "type": "object",
        "properties": {
            "t": {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "properties": {"spec": {"type": "object"}},
            },
            "a": {"type": "string"},
            "b": {"type": "string", "nullable": True},
            "c": {"type": "string", "default": "d"},
        },
    }
    pruned = prune(
        schema,
        {"t": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "x": 1}, "a": None, "b": None, "c": None},
    )
    assert pruned == {"t": {"apiVersion": "v1", "kind": "Pod", "metadata": {}}, "b": None, "c": None}
    assert apply_defaults(schema, pruned)["c"] == "d"


def test_preserve_unknown_fields_at_root_keeps_everything_unknown() -> None:
    schema = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"spec": {"type": "object"}},
    }
    data = {"spec": {"a": 1}, "other": {"b": 2}}
    assert prune(schema, data) == {"spec": {}, "other": {"b": 2}}


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=2))
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["spec", "replicas", "env", "x", "items", "id"]), inner, max_size=3),
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["spec", "status", "kind", "zzz"]), json_values, max_size=4))
def test_prune_and_default_are_idempotent(data: dict) -> None:
    once = prune(SCHEMA, data)
    assert prune(SCHEMA, once) == once
    defaulted = apply_defaults(SCHEMA, once)
    assert apply_defaults(SCHEMA, defaulted) == defaulted


# --------------------------------------------------------------------------------------------- defaulting


def test_defaults_fill_absent_fields_recursively_including_arrays() -> None:
    data = obj(items=[{"id": 1}, {"id": 2, "flag": True}])
    del data["spec"]["replicas"]
    out = apply_defaults(SCHEMA, data)
    assert out["spec"]["replicas"] == 1
    assert out["spec"]["items"] == [{"id": 1, "flag": False}, {"id": 2, "flag": True}]
    assert "replicas" not in data["spec"]


def test_defaults_inside_defaulted_objects_and_additional_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "outer": {
                "type": "object",
                "default": {},
                "properties": {"inner": {"type": "integer", "default": 7}},
            },
            "map": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"v": {"type": "string", "default": "z"}},
                },
            },
        },
    }
    out = apply_defaults(schema, {"map": {"k": {}}})
    assert out == {"outer": {"inner": 7}, "map": {"k": {"v": "z"}}}


# --------------------------------------------------------------------------------------------- CRD checks


def crd(**overrides: Any) -> dict:
    base = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)},
                }
            ],
        },
    }
    base["spec"].update(overrides)
    return base


def fields(causes: list[Cause]) -> set[str]:
    return {c.field for c in causes}


def test_good_crd_passes() -> None:
    assert check_crd(crd()) == []


def test_shipped_crds_pass() -> None:
    """The project's CRDs and the companion CRDs the local cluster registers must be accepted."""
    root = Path(__file__).resolve().parents[3]
    shipped = sorted((root / "deploy" / "crds").glob("*.yaml")) + sorted(
        (root / "t9k_provider" / "local" / "crds").glob("*.yaml")
    )
    assert len(shipped) >= 9, "deploy/crds and t9k_provider/local/crds must hold the CRDs"
    for path in shipped:
        for document in yaml.safe_load_all(path.read_text()):
            assert check_crd(document) == [], path.name


def test_crd_name_must_be_plural_dot_group() -> None:
    bad = crd()
    bad["metadata"]["name"] = "widget.example.com"
    assert only(check_crd(bad)) == Cause(
        "FieldValueInvalid",
        'Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group',
        "metadata.name",
    )


def test_crd_names_scope_and_group() -> None:
    bad = crd(scope="Global", group="example", names={"plural": "Widgets", "kind": ""})
    bad["metadata"]["name"] = "Widgets.example"
    got = fields(check_crd(bad))
    assert {"spec.scope", "spec.group", "spec.names.plural", "spec.names.kind"} <= got


def test_crd_needs_exactly_one_storage_version_and_a_served_one() -> None:
    versions = crd()["spec"]["versions"]
    two = [versions[0], {**copy.deepcopy(versions[0]), "name": "v2"}]
    causes = check_crd(crd(versions=two))
    assert any("exactly one version marked as storage version" in c.message for c in causes)
    unserved = [{**copy.deepcopy(versions[0]), "served": False}]
    assert any("marked as served" in c.message for c in check_crd(crd(versions=unserved)))
    assert fields(check_crd(crd(versions=[]))) == {"spec.versions"}
    dup = [versions[0], {**copy.deepcopy(versions[0]), "storage": False}]
    assert only(check_crd(crd(versions=dup))).reason == "FieldValueDuplicate"


def test_crd_requires_structural_schema() -> None:
    root = "spec.versions[0].schema.openAPIV3Schema"
    no_schema = crd(versions=[{"name": "v1", "served": True, "storage": True}])
    assert only(check_crd(no_schema)).field == root

    untyped = crd()
    untyped["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["x"] = {}
    cause = only(check_crd(untyped))
    assert cause.field == f"{root}.properties[spec].properties[x].type"
    assert cause.message == "Required value: must not be empty for specified object fields"

    not_object = crd()
    not_object["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {"type": "string"}
    assert only(check_crd(not_object)).field == f"{root}.type"


@pytest.mark.parametrize(
    "node,field_suffix",
    [
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string"},
            },
            "additionalProperties",
        ),
        ({"type": "object", "additionalProperties": False}, "additionalProperties"),
        ({"type": "array"}, "items"),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems"),
        ({"type": "string", "pattern": "("}, "pattern"),
        ({"type": "integer", "default": "x"}, "default"),
        ({"type": "string", "x-kubernetes-int-or-string": True}, "type"),
        ({"type": "object", "x-kubernetes-embedded-resource": True}, "properties"),
        ({"type": "thing"}, "type"),
        (
            {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"},
            "x-kubernetes-list-type",
        ),
        (
            {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map"},
            "x-kubernetes-list-map-keys",
        ),
    ],
)
def test_crd_structural_rules(node: dict, field_suffix: str) -> None:
    bad = crd()
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["n"] = node
    causes = check_crd(bad)
    assert causes
    assert all(
        c.field.startswith("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[n]")
        for c in causes
    )
    assert any(c.field.endswith(field_suffix) for c in causes), causes


def test_crd_root_metadata_may_only_restrict_name() -> None:
    bad = crd()
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] = {
        "type": "object",
        "properties": {"labels": {"type": "object"}},
    }
    assert only(check_crd(bad)).reason == "FieldValueForbidden"


def test_crd_scale_subresource_paths_and_printer_columns() -> None:
    good = crd()
    version = good["spec"]["versions"][0]
    version["subresources"] = {
        "status": {},
        "scale": {"specReplicasPath": ".spec.r", "statusReplicasPath": ".status.r"},
    }
    version["additionalPrinterColumns"] = [{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}]
    assert check_crd(good) == []
    version["subresources"]["scale"] = {"specReplicasPath": ".status.r"}
    version["additionalPrinterColumns"] = [{"name": "Age", "type": "time"}]
    base = "spec.versions[0]"
    assert fields(check_crd(good)) == {
        f"{base}.subresources.scale.specReplicasPath",
        f"{base}.subresources.scale.statusReplicasPath",
        f"{base}.additionalPrinterColumns[0].type",
        f"{base}.additionalPrinterColumns[0].jsonPath",
    }


def test_crd_preserve_unknown_fields_must_be_false() -> None:
    assert fields(check_crd(crd(preserveUnknownFields=True))) == {"spec.preserveUnknownFields"}


# --------------------------------------------------------------------------------------------- robustness

_names = st.sampled_from(["spec", "a", "b", "items", "type", "metadata", "x"])
_scalars_json = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5), st.text(max_size=3))
_json = st.recursive(
    _scalars_json,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_names, inner, max_size=3)),
    max_leaves=15,
)
_leaf_schemas = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "boolean"])}),
    st.just({"x-kubernetes-int-or-string": True}),
    st.just({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
    st.just({"type": "string", "enum": ["a", "b"], "default": "a"}),
    st.just({"type": "integer", "minimum": 0, "maximum": 3, "default": 1}),
    st.just({"type": "string", "pattern": "^[a-z]*$", "maxLength": 2, "nullable": True}),
)
_schemas = st.recursive(
    _leaf_schemas,
    lambda inner: st.one_of(
        st.builds(lambda p: {"type": "object", "properties": p}, st.dictionaries(_names, inner, max_size=3)),
        st.builds(lambda i: {"type": "array", "items": i, "maxItems": 3}, inner),
        st.builds(lambda a: {"type": "object", "additionalProperties": a}, inner),
        st.builds(
            lambda p: {"type": "object", "properties": p, "default": {}},
            st.dictionaries(_names, inner, max_size=2),
        ),
    ),
    max_leaves=8,
)


def _wrap(schema: dict) -> dict:
    spec_schema = {"type": "object", "properties": {"apiVersion": {"type": "string"}, "spec": schema}}
    wrapped = crd()
    wrapped["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = spec_schema
    return wrapped


@settings(max_examples=300, deadline=None)
@given(_schemas, _json)
def test_accepted_schemas_never_crash_validation_pruning_or_defaulting(schema: dict, value: Any) -> None:
    wrapped = _wrap(schema)
    if check_crd(wrapped):
        return
    root = wrapped["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    obj = {"apiVersion": "example.com/v1", "spec": value}
    assert all(isinstance(c, Cause) for c in validate(root, obj))
    pruned = prune(root, obj)
    assert prune(root, pruned) == pruned
    defaulted = apply_defaults(root, pruned)
    assert apply_defaults(root, defaulted) == defaulted


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["metadata", "spec", "names", "versions", "group", "scope"]), _json))
def test_check_crd_reports_causes_for_any_json_instead_of_raising(body: dict) -> None:
    assert all(isinstance(c, Cause) for c in check_crd(body))
    broken = _wrap({"type": "object", "properties": body})
    assert all(isinstance(c, Cause) for c in check_crd(broken))


def test_deeply_nested_values_are_copied_pruned_and_validated() -> None:
    deep = json.loads('{"a":' * 900 + "1" + "}" * 900)
    data = obj(free=deep, replicas="x")
    assert prune(SCHEMA, data)["spec"]["free"] == deep
    assert apply_defaults(SCHEMA, data)["spec"]["free"] == deep
    assert fields(validate(SCHEMA, data)) == {"spec.replicas"}
