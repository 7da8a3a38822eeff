"""Status diffing: RFC 7386 merge patches that null removed keys and skip unchanged status."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from t9k_provider.controller.runtime.status_writer import merge_patch, status_patch


def apply_merge_patch(target: object, patch: object) -> object:
    """RFC 7386 section 2, written out independently of the code under test."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def test_unchanged_status_needs_no_write() -> None:
    status = {"phase": "Running", "conditions": [{"type": "Running", "status": "True"}]}
    job = {"metadata": {"resourceVersion": "7"}, "status": copy.deepcopy(status)}
    assert status_patch(job, status) is None


def test_empty_status_on_new_job_needs_no_write() -> None:
    assert status_patch({"metadata": {"resourceVersion": "1"}}, {}) is None


def test_removed_keys_are_nulled_and_nested_dicts_merged() -> None:
    current = {"phase": "Running", "aggregate": {"running": 2, "pending": 1}, "tensorboard": {"ready": True}}
    desired = {"phase": "Succeeded", "aggregate": {"running": 0, "succeeded": 2}}
    assert merge_patch(current, desired) == {
        "phase": "Succeeded",
        "aggregate": {"running": 0, "pending": None, "succeeded": 2},
        "tensorboard": None,
    }


def test_lists_are_replaced_whole() -> None:
    current = {"conditions": [{"type": "A"}, {"type": "B"}]}
    desired = {"conditions": [{"type": "A"}]}
    assert merge_patch(current, desired) == {"conditions": [{"type": "A"}]}


def test_patch_is_fenced_on_the_resource_version_it_was_computed_from() -> None:
    job = {"metadata": {"resourceVersion": "42"}, "status": {"phase": "Pending"}}
    assert status_patch(job, {"phase": "Running"}) == {
        "metadata": {"resourceVersion": "42"},
        "status": {"phase": "Running"},
    }


def test_none_in_desired_means_absent() -> None:
    assert merge_patch({"a": 1, "b": 2}, {"a": None, "b": 2}) == {"a": None}
    assert merge_patch({}, {"a": {"x": None, "y": 1}}) == {"a": {"y": 1}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abcd"), inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.sampled_from("abcdef"), json_values, max_size=5)


def _without_none(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(json_objects, json_objects)
def test_applying_the_patch_yields_the_desired_document(current: dict, desired: dict) -> None:
    current = _without_none(current)  # a stored object never holds nulls
    patch = merge_patch(current, desired)
    assert apply_merge_patch(current, patch) == _without_none(desired)
    if _without_none(desired) == current:
        assert patch == {}
