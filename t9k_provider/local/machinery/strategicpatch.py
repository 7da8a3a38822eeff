"""Strategic merge patch, as apimachinery's ``strategicpatch/patch.go``: lists merge by the merge keys of the
built-in types (their ``patchStrategy``/``patchMergeKey`` tags, which each resource's strategy declares as
``MergeField`` trees) and the patch's directives (``$setElementOrder``, ``$deleteFromPrimitiveList``,
``$patch``, ``$retainKeys``) apply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from t9k_provider.local.machinery.jsonvalues import json_copy, json_equal, json_in
from t9k_provider.local.machinery.patcherrors import bad_request as _bad_request
from t9k_provider.local.machinery.patcherrors import invalid as _invalid

_MISSING = object()


@dataclass(frozen=True)
class MergeField:
    """Patch metadata of one field (its ``patchStrategy``/``patchMergeKey`` tags) and of its children.

    Lists merge only with ``strategy="merge"`` (by ``key``, or as a set of primitives without one);
    every other list is replaced. ``retainKeys`` needs no metadata here: the server honours the
    ``$retainKeys`` directive wherever a patch carries it. A resource's strategy declares the fields of its
    kind (``Strategy.merge_fields``); object metadata's are the same for every kind.
    """

    strategy: str = ""
    key: str = ""
    node: dict[str, MergeField] = field(default_factory=dict)


_PLAIN = MergeField()
OBJECT_META: dict[str, MergeField] = {
    "ownerReferences": MergeField("merge", "uid"),
    "finalizers": MergeField("merge"),
}
_METADATA = MergeField(node=OBJECT_META)
CONDITIONS = MergeField("merge", "type")
STATUS_WITH_CONDITIONS = MergeField(node={"conditions": CONDITIONS})


def strategic_merge_patch(obj: dict, patch: dict, fields: dict[str, MergeField]) -> dict:
    """Strategic merge of ``patch`` into ``obj``, a kind with these merge ``fields`` (besides metadata);
    directives never reach the result."""
    return _merge_map(json_copy(obj), json_copy(patch), {"metadata": _METADATA, **fields})


_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def _merge_map(original: dict, patch: dict, node: dict[str, MergeField]) -> dict:
    if "$patch" in patch:
        directive = patch.pop("$patch")
        if directive == "replace":
            return _merge_map({}, patch, node)
        if directive == "delete":
            return {}
        raise _bad_request(f"unknown patch type: {directive} in map: {patch}")

    if "$retainKeys" in patch:
        retain = patch.pop("$retainKeys")
        if not isinstance(retain, list):
            raise _bad_request("invalid patch format of retainKeys")
        for key, value in patch.items():
            if value is not None and not key.startswith("$") and key not in retain:
                raise _bad_request("invalid patch format of retainKeys")
        original = {k: v for k, v in original.items() if k in retain}

    for key in [k for k in patch if k.startswith(_SET_ORDER)]:
        _apply_element_order(original, patch, key, node)

    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            _delete_from_primitive_list(original, key[len(_DELETE_PRIMITIVE) :], value)
            continue
        if key.startswith("$"):
            continue  # unknown directives are dropped, as decoding into the typed object does
        meta = node.get(key, _PLAIN)
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key, _MISSING)
        if isinstance(value, dict) and isinstance(current, dict):
            original[key] = _merge_map(current, value, meta.node)
        elif isinstance(value, list) and isinstance(current, list) and meta.strategy == "merge":
            original[key] = _merge_list(current, value, meta)
        else:
            original[key] = _fresh(value, meta)
    return original


def _fresh(value: Any, meta: MergeField) -> Any:
    """A patch value that has nothing to merge with: apply it to an empty value to resolve directives."""
    if isinstance(value, dict):
        return _merge_map({}, value, meta.node)
    if isinstance(value, list):
        if meta.strategy == "merge":
            return _merge_list([], value, meta)
        return [_merge_map({}, v, meta.node) if isinstance(v, dict) else v for v in value]
    return value


def _delete_from_primitive_list(original: dict, key: str, value: Any) -> None:
    if not key or not isinstance(value, list):
        raise _bad_request("invalid patch format of primitive list")
    current = original.get(key)
    if isinstance(current, list):
        original[key] = [item for item in current if not json_in(item, value)]


def _element_kind(*lists: list) -> str:
    kinds = set()
    for items in lists:
        for item in items:
            if isinstance(item, list):
                raise _invalid("lists of lists are not supported")
            kinds.add("map" if isinstance(item, dict) else "scalar")
    if len(kinds) > 1:
        raise _invalid(f"list element types are not identical: {lists}")
    return kinds.pop() if kinds else "scalar"


def _key_of(item: Any, merge_key: str) -> Any:
    if not merge_key:
        return item
    if not isinstance(item, dict) or merge_key not in item:
        raise _invalid(f"map: {item} does not contain declared merge key: {merge_key}")
    return item[merge_key]


def _index(items: list, item: Any, merge_key: str) -> int:
    wanted = _key_of(item, merge_key)
    for i, candidate in enumerate(items):
        if json_equal(_key_of(candidate, merge_key), wanted):
            return i
    return -1


def _sort_by(items: list, order: list, merge_key: str) -> list:
    positions = [_index(order, item, merge_key) for item in items]
    found = sorted((p, i) for i, p in enumerate(positions) if p >= 0)
    missing = [items[i] for i, p in enumerate(positions) if p < 0]
    return [items[i] for _, i in found] + missing


def _normalize_order(
    patch_items: list, server_only: list, patch_order: list, server_order: list, merge_key: str
) -> list:
    """Patch items in patch order, server-only items in server order, interleaved as upstream does."""
    right = _sort_by(patch_items, patch_order, merge_key)
    left = _sort_by(server_only, server_order, merge_key)
    result: list = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            result.append(right[j])
            j += 1
        elif j >= len(right):
            result.append(left[i])
            i += 1
        else:
            li = _index(server_order, left[i], merge_key)
            ri = _index(server_order, right[j], merge_key)
            if li >= 0 and ri >= 0 and li < ri:
                result.append(left[i])
                i += 1
            else:
                result.append(right[j])
                j += 1
    return result


def _partition(merged: list, by: list, merge_key: str) -> tuple[list, list]:
    inside, outside = [], []
    for item in merged:
        (inside if _index(by, item, merge_key) >= 0 else outside).append(item)
    return inside, outside


def _merge_list(original: list, patch: list, meta: MergeField) -> list:
    if not original and not patch:
        return []
    if _element_kind(original, patch) == "scalar":
        merged: list = []
        for item in original + patch:
            if not json_in(item, merged):
                merged.append(item)
        inside, outside = _partition(merged, patch, "")
        return _normalize_order(inside, outside, patch, original, "")

    merge_key = meta.key
    if not merge_key:
        raise _invalid("cannot merge lists without merge key for type map")
    plain: list = []
    replace = False
    for item in patch:
        directive = item.get("$patch", _MISSING)
        if directive is _MISSING:
            plain.append(item)
        elif directive == "delete":
            wanted = _key_of(item, merge_key)
            original = [o for o in original if not json_equal(_key_of(o, merge_key), wanted)]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _bad_request("merging lists cannot yet be specified in the patch")
        else:
            raise _bad_request(f"unknown patch type: {directive} in map: {item}")
    if replace:
        return [_merge_map({}, item, meta.node) for item in plain]

    merged = list(original)
    for item in plain:
        position = _index(merged, item, merge_key)
        if position >= 0:
            merged[position] = _merge_map(merged[position], item, meta.node)
        else:
            merged.append(_merge_map({}, item, meta.node))
    inside, outside = _partition(merged, plain, merge_key)
    return _normalize_order(inside, outside, plain, original, merge_key)


def _apply_element_order(
    original: dict, patch: dict, directive_key: str, node: dict[str, MergeField]
) -> None:
    order = patch.pop(directive_key)
    key = directive_key[len(_SET_ORDER) :]
    if not key or not isinstance(order, list):
        raise _bad_request("invalid patch format of setElementOrder list")
    meta = node.get(key, _PLAIN)
    merge_key = meta.key
    current = original.get(key, _MISSING)
    incoming = patch.pop(key, _MISSING)
    if current is not _MISSING and not isinstance(current, list):
        raise _bad_request("invalid patch format of setElementOrder list")
    if incoming is not _MISSING and not isinstance(incoming, list):
        raise _bad_request("invalid patch format of setElementOrder list")
    if incoming is not _MISSING:
        _check_order_matches(incoming, order, merge_key)

    if current is _MISSING and incoming is _MISSING:
        return
    if incoming is _MISSING:
        merged = current
    elif current is _MISSING:
        merged = _fresh(incoming, meta)
    elif meta.strategy == "merge":
        merged = _merge_list(current, incoming, meta)
    else:
        merged = _fresh(incoming, meta)
    inside, outside = _partition(merged, order, merge_key)
    server_order = current if current is not _MISSING else []
    original[key] = _normalize_order(inside, outside, order, server_order, merge_key)


def _check_order_matches(items: list, order: list, merge_key: str) -> None:
    """The patch list must follow the relative order of ``$setElementOrder`` (deletions aside)."""
    relevant = [i for i in items if not (isinstance(i, dict) and "$patch" in i)]
    if not relevant or not order:
        return
    position = 0
    for entry in order:
        if position < len(relevant) and json_equal(
            _key_of(relevant[position], merge_key), _key_of(entry, merge_key)
        ):
            position += 1
    if position < len(relevant):
        raise _bad_request(
            f"The order in patch list:\n{items}\n doesn't match $setElementOrder list:\n{order}\n"
        )
