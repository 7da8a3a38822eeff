"""PATCH semantics: content types, RFC 7386, RFC 6902 and strategic merge as the apiserver applies them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t9k_provider.local.apiserver.served import BUILTIN
from t9k_provider.local.machinery.jsonvalues import json_equal
from t9k_provider.local.machinery.patch import apply_patch, json_patch, merge_patch
from t9k_provider.local.machinery.patcherrors import PatchError
from t9k_provider.local.machinery.strategicpatch import MergeField, strategic_merge_patch

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x/a", "x/b"]},
    "spec": {
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80}, {"containerPort": 81, "name": "m"}],
            },
            {"name": "d", "image": "alpine", "args": ["x", "y"]},
        ],
        "volumes": [{"name": "v", "emptyDir": {}}],
    },
}


def merge_fields(kind: str) -> dict[str, MergeField]:
    """The strategic merge fields a built-in kind's strategy declares."""
    fields = next(r.strategy.merge_fields for r in BUILTIN if r.kind == kind)
    assert fields is not None
    return fields


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


# ---------------------------------------------------------------- content types and error codes


def test_unknown_content_type_is_415_listing_accepted_types() -> None:
    with pytest.raises(PatchError) as err:
        apply_patch(POD, b"{}", "application/json", merge_fields("Pod"))
    assert err.value.code == 415
    assert err.value.reason == "UnsupportedMediaType"
    assert err.value.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml"
    )


def test_strategic_merge_on_custom_resource_is_415_without_strategic_in_list() -> None:
    with pytest.raises(PatchError) as err:
        apply_patch({"spec": {}}, b"{}", "application/strategic-merge-patch+json", None)
    assert err.value.code == 415
    assert err.value.message.endswith(
        "accepted media types include: application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml"
    )


def test_apply_patch_yaml_is_refused_with_415() -> None:
    with pytest.raises(PatchError) as err:
        apply_patch(POD, b"{}", "application/apply-patch+yaml", merge_fields("Pod"))
    assert err.value.code == 415


def test_dict_body_as_json_patch_is_400_like_go() -> None:
    with pytest.raises(PatchError) as err:
        apply_patch({"spec": {}}, b'{"spec": {"a": 1}}', "application/json-patch+json", None)
    assert (err.value.code, err.value.reason) == (400, "BadRequest")
    assert err.value.message == "json: cannot unmarshal object into Go value of type jsonpatch.Patch"


@pytest.mark.parametrize("raw,word", [(b'"x"', "string"), (b"3", "number"), (b"true", "bool")])
def test_scalar_json_patch_body_names_go_type(raw: bytes, word: str) -> None:
    with pytest.raises(PatchError) as err:
        apply_patch({}, raw, "application/json-patch+json", None)
    assert err.value.message == f"json: cannot unmarshal {word} into Go value of type jsonpatch.Patch"


@pytest.mark.parametrize(
    "ctype",
    ["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"],
)
def test_malformed_json_is_400(ctype: str) -> None:
    with pytest.raises(PatchError) as err:
        apply_patch(POD, b"{not json", ctype, merge_fields("Pod"))
    assert err.value.code == 400


def test_failed_test_op_is_422_invalid() -> None:
    patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": "5"}]
    obj = {"metadata": {"resourceVersion": "6"}}
    with pytest.raises(PatchError) as err:
        apply_patch(obj, body(patch), "application/json-patch+json", None)
    assert (err.value.code, err.value.reason) == (422, "Invalid")
    assert err.value.message == "the server rejected our request due to an error in our request"
    assert "testing value /metadata/resourceVersion failed" in err.value.detail


def test_too_many_json_patch_operations_is_413() -> None:
    ops = [{"op": "test", "path": "/a", "value": 1}] * 10001
    with pytest.raises(PatchError) as err:
        apply_patch({"a": 1}, body(ops), "application/json-patch+json", None)
    assert (err.value.code, err.value.reason) == (413, "RequestEntityTooLarge")
    assert err.value.message.endswith("is 10000, got 10001")
    assert apply_patch({"a": 1}, body(ops[:10000]), "application/json-patch+json", None) == {"a": 1}


@pytest.mark.parametrize("ctype", ["application/json-patch+json", "application/merge-patch+json"])
def test_deeply_nested_bodies_are_400_not_crashes(ctype: str) -> None:
    with pytest.raises(PatchError) as err:
        apply_patch({}, b"[" * 100_000, ctype, merge_fields("Pod"))
    assert err.value.code == 400
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    with pytest.raises(PatchError):
        apply_patch({}, deep, "application/strategic-merge-patch+json", merge_fields("Pod"))


def test_content_type_parameters_are_ignored() -> None:
    out = apply_patch({"a": 1}, b'{"b": 2}', "application/merge-patch+json; charset=utf-8", None)
    assert out == {"a": 1, "b": 2}


def test_null_json_patch_is_a_noop() -> None:
    assert apply_patch({"a": 1}, b"null", "application/json-patch+json", None) == {"a": 1}


def test_patch_replacing_root_with_non_object_is_400() -> None:
    patch = [{"op": "replace", "path": "", "value": [1]}]
    with pytest.raises(PatchError) as err:
        apply_patch({"a": 1}, body(patch), "application/json-patch+json", None)
    assert err.value.code == 400


def test_merge_patch_non_object_body_is_400() -> None:
    with pytest.raises(PatchError) as err:
        apply_patch({"a": 1}, b"[1]", "application/merge-patch+json", None)
    assert err.value.code == 400


def test_strategic_dispatch_uses_kind_metadata() -> None:
    patch = {"spec": {"containers": [{"name": "c", "image": "new"}]}}
    out = apply_patch(POD, body(patch), "application/strategic-merge-patch+json", merge_fields("Pod"))
    assert out["spec"]["containers"][0]["env"] == POD["spec"]["containers"][0]["env"]
    assert out["spec"]["containers"][0]["image"] == "new"


# ---------------------------------------------------------------- merge patch (RFC 7386 examples)


@pytest.mark.parametrize(
    "target,patch,result",
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc7386_appendix(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_does_not_mutate_inputs() -> None:
    target = {"a": {"b": [1]}}
    patch = {"a": {"c": {"d": 1}}}
    saved = (copy.deepcopy(target), copy.deepcopy(patch))
    out = merge_patch(target, patch)
    out["a"]["c"]["d"] = 2
    assert (target, patch) == saved


def merge_diff(original: Any, modified: Any) -> Any:
    """Reference diff for the round-trip property: the merge patch turning original into modified."""
    if not isinstance(original, dict) or not isinstance(modified, dict):
        return modified
    patch: dict = {k: None for k in original if k not in modified}
    for key, value in modified.items():
        if key in original and isinstance(value, dict) and isinstance(original[key], dict):
            sub = merge_diff(original[key], value)
            if sub:
                patch[key] = sub
        elif key not in original or not json_equal(original[key], value):
            patch[key] = value
    return patch


scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=3))
# Merge patch cannot express a null value inside an object, so generated documents contain none.
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abcd"), inner, max_size=4)
    ),
    max_leaves=12,
)
objects = st.dictionaries(st.sampled_from("abcd"), documents, max_size=4)


@settings(max_examples=200, deadline=None)
@given(objects, objects)
def test_merge_patch_of_diff_reproduces_target(a: dict, b: dict) -> None:
    assert merge_patch(a, merge_diff(a, b)) == b


@settings(max_examples=100, deadline=None)
@given(objects, objects)
def test_merge_patch_is_idempotent(a: dict, p: dict) -> None:
    once = merge_patch(a, p)
    assert merge_patch(once, p) == once


# ---------------------------------------------------------------- JSON patch (RFC 6902)


def test_json_patch_all_operations() -> None:
    doc = {"a": {"b": [1, 2, 3]}, "x/y": 1, "t~": 2}
    ops = [
        {"op": "add", "path": "/a/b/1", "value": 9},
        {"op": "add", "path": "/a/b/-", "value": 4},
        {"op": "remove", "path": "/a/b/0"},
        {"op": "replace", "path": "/x~1y", "value": "slash"},
        {"op": "move", "from": "/t~0", "path": "/moved"},
        {"op": "copy", "from": "/a/b", "path": "/c"},
        {"op": "test", "path": "/c", "value": [9, 2, 3, 4]},
        {"op": "test", "path": "/x~1y", "value": "slash"},
    ]
    assert json_patch(doc, ops) == {"a": {"b": [9, 2, 3, 4]}, "x/y": "slash", "moved": 2, "c": [9, 2, 3, 4]}
    assert doc == {"a": {"b": [1, 2, 3]}, "x/y": 1, "t~": 2}


def test_json_patch_copy_is_deep() -> None:
    out = json_patch(
        {"a": {"b": 1}},
        [{"op": "copy", "from": "/a", "path": "/c"}, {"op": "replace", "path": "/c/b", "value": 2}],
    )
    assert out == {"a": {"b": 1}, "c": {"b": 2}}


def test_json_patch_negative_index_counts_from_end_like_the_apiserver_library() -> None:
    assert json_patch({"a": [1, 2, 3]}, [{"op": "remove", "path": "/a/-1"}]) == {"a": [1, 2]}


def test_json_patch_test_null_matches_missing_key() -> None:
    assert json_patch({"a": 1}, [{"op": "test", "path": "/b", "value": None}]) == {"a": 1}


def test_json_patch_test_distinguishes_bool_from_int() -> None:
    with pytest.raises(PatchError):
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": True}])
    assert json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}]) == {"a": 1}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/no/parent", "value": 1}],
        [{"op": "add", "path": "/a/5", "value": 1}],
        [{"op": "add", "path": "/a/01", "value": 1}],
        [{"op": "add", "path": "a", "value": 1}],
        [{"op": "add", "path": "/b"}],
        [{"op": "move", "from": "/missing", "path": "/b"}],
        [{"op": "move", "from": "/m", "path": "/m/child"}],
        [{"op": "copy", "from": "/missing", "path": "/b"}],
        [{"op": "test", "path": "/a", "value": [1]}],
        [{"op": "frobnicate", "path": "/a"}],
        [{"path": "/a"}],
        ["add"],
    ],
)
def test_json_patch_failures_are_422(ops: list) -> None:
    doc = {"a": [0], "m": {}}
    with pytest.raises(PatchError) as err:
        json_patch(doc, ops)
    assert err.value.code == 422
    assert doc == {"a": [0], "m": {}}


def test_json_patch_root_operations() -> None:
    assert json_patch({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}
    assert json_patch({"a": 1}, [{"op": "test", "path": "", "value": {"a": 1}}]) == {"a": 1}


@settings(max_examples=150, deadline=None)
@given(objects, st.sampled_from("abcd"), documents)
def test_json_patch_add_then_remove_restores_missing_key(doc: dict, key: str, value: Any) -> None:
    doc.pop(key, None)
    added = json_patch(doc, [{"op": "add", "path": f"/{key}", "value": value}])
    assert added[key] == value
    assert json_patch(added, [{"op": "remove", "path": f"/{key}"}]) == doc


@settings(max_examples=150, deadline=None)
@given(st.lists(scalars, min_size=1, max_size=6), st.data())
def test_json_patch_move_is_inverted_by_reverse_move(items: list, data: st.DataObject) -> None:
    src = data.draw(st.integers(0, len(items) - 1))
    dst = data.draw(st.integers(0, len(items) - 1))
    moved = json_patch({"l": items}, [{"op": "move", "from": f"/l/{src}", "path": f"/l/{dst}"}])
    back = json_patch(moved, [{"op": "move", "from": f"/l/{dst}", "path": f"/l/{src}"}])
    assert back == {"l": items}


# ---------------------------------------------------------------- strategic merge patch


def smp(patch: dict, obj: dict = POD, kind: str = "Pod") -> dict:
    return strategic_merge_patch(obj, patch, merge_fields(kind))


def test_containers_merge_by_name_keeping_unpatched_fields() -> None:
    out = smp({"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "3"}]}]}})
    c = out["spec"]["containers"][0]
    assert c["image"] == "busybox"
    assert c["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert out["spec"]["containers"][1] == POD["spec"]["containers"][1]


def test_kubectl_apply_patch_with_set_element_order() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "d"}],
            "containers": [
                {
                    "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
                    "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                    "name": "c",
                }
            ],
        }
    }
    out = smp(patch)
    assert [c["name"] for c in out["spec"]["containers"]] == ["c", "d"]
    assert out["spec"]["containers"][0]["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert "$setElementOrder/containers" not in json.dumps(out)


def test_set_element_order_reorders_existing_items() -> None:
    patch = {"spec": {"$setElementOrder/containers": [{"name": "d"}, {"name": "c"}]}}
    assert [c["name"] for c in smp(patch)["spec"]["containers"]] == ["d", "c"]


def test_set_element_order_with_new_item_in_between() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "n"}, {"name": "d"}],
            "containers": [{"name": "n", "image": "new"}],
        }
    }
    assert [c["name"] for c in smp(patch)["spec"]["containers"]] == ["c", "n", "d"]


def test_set_element_order_mismatching_patch_list_is_400() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "d"}],
            "containers": [{"name": "d", "image": "x"}, {"name": "c", "image": "y"}],
        }
    }
    with pytest.raises(PatchError) as err:
        smp(patch)
    assert err.value.code == 400
    assert "doesn't match" in err.value.message


def test_set_element_order_on_primitive_list() -> None:
    out = smp({"metadata": {"$setElementOrder/finalizers": ["x/b", "x/a"]}})
    assert out["metadata"]["finalizers"] == ["x/b", "x/a"]


def test_order_from_patch_with_server_only_items_interleaved() -> None:
    obj = {
        "metadata": {},
        "spec": {"containers": [{"name": "1"}, {"name": "2", "image": "b"}, {"name": "3"}]},
    }
    out = smp({"spec": {"containers": [{"name": "3", "image": "c"}, {"name": "1", "image": "a"}]}}, obj)
    assert out["spec"]["containers"] == [
        {"name": "2", "image": "b"},
        {"name": "3", "image": "c"},
        {"name": "1", "image": "a"},
    ]


def test_new_list_item_goes_before_server_only_items_as_upstream() -> None:
    out = smp({"spec": {"containers": [{"name": "z", "image": "new"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["z", "c", "d"]


def test_ports_merge_by_container_port_and_volume_mounts_by_mount_path() -> None:
    obj = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "volumeMounts": [{"mountPath": "/a", "name": "v"}],
                }
            ]
        }
    }
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "ports": [{"containerPort": 80, "name": "http"}],
                    "volumeMounts": [{"mountPath": "/a", "readOnly": True}],
                }
            ]
        }
    }
    c = smp(patch, obj)["spec"]["containers"][0]
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}]
    assert c["volumeMounts"] == [{"mountPath": "/a", "name": "v", "readOnly": True}]


def test_non_merging_lists_are_replaced() -> None:
    out = smp({"spec": {"containers": [{"name": "d", "args": ["z"]}]}})
    assert out["spec"]["containers"][1]["args"] == ["z"]


def test_delete_directive_in_list_removes_item() -> None:
    out = smp({"spec": {"containers": [{"name": "c", "env": [{"name": "A", "$patch": "delete"}]}]}})
    assert out["spec"]["containers"][0]["env"] == [{"name": "B", "value": "2"}]


def test_replace_directive_in_list_replaces_whole_list() -> None:
    out = smp(
        {"spec": {"containers": [{"name": "c", "env": [{"name": "Z", "value": "9"}, {"$patch": "replace"}]}]}}
    )
    assert out["spec"]["containers"][0]["env"] == [{"name": "Z", "value": "9"}]


def test_replace_and_delete_directives_on_maps() -> None:
    out = smp({"metadata": {"labels": {"$patch": "replace", "b": "2"}}})
    assert out["metadata"]["labels"] == {"b": "2"}
    # Inside a merging list, a `$patch: replace` element replaces the list itself (by the other elements).
    out = smp({"spec": {"containers": [{"name": "c", "$patch": "replace", "image": "x"}]}})
    assert out["spec"]["containers"] == []
    out = smp({"spec": {"containers": [{"name": "c", "image": "x", "command": {"$patch": "replace"}}]}})
    assert out["spec"]["containers"][0]["command"] == {}
    assert smp({"$patch": "delete"}) == {}


def test_merge_directive_is_rejected_as_upstream() -> None:
    with pytest.raises(PatchError):
        smp({"metadata": {"labels": {"$patch": "merge"}}})
    with pytest.raises(PatchError):
        smp({"spec": {"containers": [{"name": "c", "$patch": "merge"}]}})


def test_finalizers_merge_as_primitive_set_and_delete_from_primitive_list() -> None:
    out = smp({"metadata": {"finalizers": ["x/b", "x/c"]}})
    assert sorted(out["metadata"]["finalizers"]) == ["x/a", "x/b", "x/c"]
    out = smp({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/a"]}})
    assert out["metadata"]["finalizers"] == ["x/b"]


def test_retain_keys_clears_fields_not_listed() -> None:
    obj = {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}
    patch = {
        "spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}]}
    }
    assert smp(patch, obj)["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]


def test_retain_keys_must_cover_patch_fields() -> None:
    patch = {"spec": {"volumes": [{"name": "v", "$retainKeys": ["name"], "hostPath": {"path": "/x"}}]}}
    with pytest.raises(PatchError) as err:
        smp(patch)
    assert err.value.code == 400


def test_conditions_merge_by_type_and_owner_references_by_uid() -> None:
    obj = {
        "metadata": {"ownerReferences": [{"uid": "u1", "name": "a"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
        },
    }
    patch = {
        "metadata": {"ownerReferences": [{"uid": "u2", "name": "b"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    out = smp(patch, obj)
    assert {c["type"]: c["status"] for c in out["status"]["conditions"]} == {
        "Ready": "True",
        "PodScheduled": "True",
    }
    assert {r["uid"] for r in out["metadata"]["ownerReferences"]} == {"u1", "u2"}


def test_service_ports_merge_by_port() -> None:
    obj = {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}}
    out = smp({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}, obj, "Service")
    assert out["spec"]["ports"] == [
        {"port": 80, "name": "http", "targetPort": 8080},
        {"port": 443, "name": "https"},
    ]


def test_job_pod_template_containers_merge_by_name() -> None:
    obj = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "a", "command": ["x"]}]}}}}
    out = smp({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "b"}]}}}}, obj, "Job")
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "c", "image": "b", "command": ["x"]}]


def test_unknown_kind_replaces_lists() -> None:
    obj = {"spec": {"containers": [{"name": "c", "image": "a"}]}}
    out = smp({"spec": {"containers": [{"name": "c"}]}}, obj, "ConfigMap")
    assert out["spec"]["containers"] == [{"name": "c"}]


def test_null_deletes_and_new_values_are_cleaned_of_directives() -> None:
    out = smp(
        {
            "metadata": {"labels": {"a": None}},
            "spec": {
                "initContainers": [{"name": "i", "env": [{"name": "X", "$patch": "delete"}, {"name": "Y"}]}]
            },
        }
    )
    assert out["metadata"]["labels"] == {}
    assert out["spec"]["initContainers"] == [{"name": "i", "env": [{"name": "Y"}]}]
    assert "$" not in json.dumps(out)


def test_missing_merge_key_is_422() -> None:
    with pytest.raises(PatchError) as err:
        smp({"spec": {"containers": [{"image": "x"}]}})
    assert err.value.code == 422


def test_strategic_merge_does_not_mutate_inputs() -> None:
    obj = copy.deepcopy(POD)
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "d"}, {"name": "c"}],
            "containers": [{"name": "c", "image": "q"}],
        }
    }
    saved = copy.deepcopy(patch)
    smp(patch, obj)
    assert obj == POD
    assert patch == saved


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.text(max_size=2)), max_size=3)
)
def test_strategic_merge_on_plain_maps_equals_merge_patch(labels_patch: dict) -> None:
    patch = {"metadata": {"labels": labels_patch}}
    assert smp(patch) == merge_patch(POD, patch)


plain_keys = st.sampled_from(["data", "spec", "x", "y", "z"])
no_null_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(plain_keys, inner, max_size=3)),
    max_leaves=10,
)
plain_patches = st.recursive(
    st.one_of(scalars, st.none(), st.lists(no_null_values, max_size=3)),
    lambda inner: st.dictionaries(plain_keys, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(plain_keys, no_null_values, max_size=4),
    st.dictionaries(plain_keys, plain_patches, max_size=3),
)
def test_strategic_merge_without_merge_keys_or_directives_is_merge_patch(obj: dict, patch: dict) -> None:
    assert strategic_merge_patch(obj, patch, merge_fields("ConfigMap")) == merge_patch(obj, patch)


container_names = st.sampled_from(["a", "b", "c", "d", "e"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(container_names, unique=True, max_size=4),
    st.lists(container_names, unique=True, max_size=4),
    st.sets(container_names, max_size=2),
)
def test_merge_key_lists_union_update_and_delete(current: list, patched: list, deleted: set) -> None:
    obj = {"spec": {"containers": [{"name": n, "image": f"old-{n}", "args": [n]} for n in current]}}
    items: list[dict] = [{"name": n, "image": f"new-{n}"} for n in patched if n not in deleted]
    items += [{"name": n, "$patch": "delete"} for n in deleted]
    out = strategic_merge_patch(obj, {"spec": {"containers": items}}, merge_fields("Pod"))["spec"][
        "containers"
    ]
    names = [c["name"] for c in out]
    assert set(names) == (set(current) | set(patched)) - deleted
    assert len(names) == len(set(names))
    by_name = {c["name"]: c for c in out}
    for n in set(patched) - deleted:
        assert by_name[n]["image"] == f"new-{n}"
        assert by_name[n].get("args") == ([n] if n in current else None)
    for n in set(current) - set(patched) - deleted:
        assert by_name[n] == {"name": n, "image": f"old-{n}", "args": [n]}
    patched_order = [n for n in names if n in patched]
    assert patched_order == [n for n in patched if n not in deleted]
