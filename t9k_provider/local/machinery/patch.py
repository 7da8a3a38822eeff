"""PATCH semantics of the Kubernetes API server: JSON patch, merge patch and strategic merge patch.

Pure functions on decoded JSON values. Status codes, reasons and messages follow
apiserver ``handlers/patch.go``; strategic merge follows apimachinery ``strategicpatch/patch.go``
(merge keys are the ``patchStrategy``/``patchMergeKey`` tags of the built-in types, which each resource's
strategy declares as ``MergeField`` trees).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from t9k_provider.local.machinery.jsonvalues import (
    MAX_DEPTH,
    json_copy,
    json_equal,
    json_in,
    json_type,
    too_deep,
)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

MAX_JSON_PATCH_OPERATIONS = 10000
_INVALID_PATCH_MESSAGE = "the server rejected our request due to an error in our request"


class PatchError(Exception):
    """A patch the server refuses (400/413/415/422); ``code``/``reason``/``message`` go into the Status.

    ``detail`` says what exactly failed, for logs: the real server hides it behind a generic
    message for JSON patch failures.
    """

    def __init__(self, code: int, reason: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.detail = detail or message


def _bad_request(message: str) -> PatchError:
    return PatchError(400, "BadRequest", message)


def _invalid(detail: str) -> PatchError:
    return PatchError(422, "Invalid", _INVALID_PATCH_MESSAGE, detail)


def accepted_patch_types(strategic: bool) -> list[str]:
    """Media types the real server accepts for PATCH, in its order (CRs lack strategic merge)."""
    if not strategic:
        return [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    return [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH]


def apply_patch(
    current: dict, body: bytes, content_type: str, merge_fields: dict[str, MergeField] | None
) -> dict:
    """Apply a PATCH request body to ``current`` as the real server does for that content type.

    ``merge_fields`` are the strategic merge fields of the object's kind; None: no strategic merge (CRs).
    """
    media = content_type.split(";", 1)[0].strip().lower()
    accepted = accepted_patch_types(merge_fields is not None)
    if media not in accepted:
        raise PatchError(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )
    if media == APPLY_PATCH:
        raise PatchError(
            415,
            "UnsupportedMediaType",
            "server-side apply (application/apply-patch+yaml) is not supported by the embedded local "
            "cluster; use kubectl apply without --server-side, or a merge/strategic-merge patch",
        )
    try:
        return _apply(current, body, media, merge_fields or {})
    except RecursionError as exc:
        raise _bad_request("the patch is nested too deeply") from exc


def _apply(current: dict, body: bytes, media: str, merge_fields: dict[str, MergeField]) -> dict:
    try:
        patch = json.loads(body.decode())  # UTF-8 only, as Go's decoder (bytes would admit UTF-16/32)
    except (ValueError, UnicodeDecodeError) as exc:
        message = {
            MERGE_PATCH: "Invalid JSON Patch",
            STRATEGIC_MERGE_PATCH: "invalid JSON document",
        }.get(media, f"invalid JSON: {exc}")
        raise _bad_request(message) from exc

    if media == JSON_PATCH:
        if patch is None:
            patch = []
        if not isinstance(patch, list):
            raise _bad_request(
                f"json: cannot unmarshal {_go_json_type(patch)} into Go value of type jsonpatch.Patch"
            )
        if len(patch) > MAX_JSON_PATCH_OPERATIONS:
            raise PatchError(
                413,
                "RequestEntityTooLarge",
                "Request entity too large: The allowed maximum operations in a JSON patch is "
                f"{MAX_JSON_PATCH_OPERATIONS}, got {len(patch)}",
            )
        result: Any = json_patch(current, patch)
    elif media == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise _bad_request("Invalid JSON Patch")
        result = merge_patch(current, patch)
    else:
        if not isinstance(patch, dict):
            raise _bad_request("invalid JSON document")
        result = strategic_merge_patch(current, patch, merge_fields)
    if not isinstance(result, dict):
        raise _bad_request(f"the patched object must be a JSON object, not {_go_json_type(result)}")
    if too_deep(result):
        raise _bad_request(f"the patched object nests deeper than {MAX_DEPTH} levels")
    return result


def _go_json_type(value: Any) -> str:
    """The JSON type as Go's decoder names it in errors ("bool", and "number" for any number)."""
    kind = json_type(value)
    return {"boolean": "bool", "integer": "number"}.get(kind, kind)


# --------------------------------------------------------------------------------------------
# RFC 7386 merge patch


def merge_patch(obj: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = dict(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --------------------------------------------------------------------------------------------
# RFC 6902 JSON patch (with RFC 6901 pointers)

_MISSING = object()


def _parse_pointer(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise _invalid(f"JSON pointer must be a string, got {pointer!r}")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise _invalid(f'JSON pointer "{pointer}" must start with "/"')
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def _array_index(token: str, length: int, *, allow_end: bool, pointer: str) -> int:
    if allow_end and token == "-":
        return length
    negative = token.startswith("-")
    digits = token[1:] if negative else token
    if not digits.isdigit() or (len(digits) > 1 and digits.startswith("0")) or not digits.isascii():
        raise _invalid(f"invalid array index {token!r} in {pointer}")
    index = -int(digits) if negative else int(digits)
    if index < 0:
        # The apiserver's json-patch library accepts negative indices counted from the end.
        index += length
    upper = length if allow_end else length - 1
    if index < 0 or index > upper:
        raise _invalid(f"array index {token} out of bounds in {pointer}")
    return index


def _locate(doc: Any, pointer: str, op: str) -> tuple[dict | list, str]:
    """The object or array the pointer's last token is in, and that token (the pointer is not the root)."""
    parts = _parse_pointer(pointer)
    node = doc
    for token in parts[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_array_index(token, len(node), allow_end=False, pointer=pointer)]
        else:
            node = None
            break
    if not isinstance(node, (dict, list)):
        raise _invalid(f"{op} operation does not apply: doc is missing path: {pointer}")
    return node, parts[-1]


def _get(doc: Any, pointer: str, op: str) -> Any:
    if pointer == "":
        return doc
    parent, token = _locate(doc, pointer, op)
    if isinstance(parent, dict):
        return parent.get(token, _MISSING)
    return parent[_array_index(token, len(parent), allow_end=False, pointer=pointer)]


def _add(doc: Any, pointer: str, value: Any) -> Any:
    if pointer == "":
        return value
    parent, token = _locate(doc, pointer, "add")
    if isinstance(parent, dict):
        parent[token] = value
    else:
        parent.insert(_array_index(token, len(parent), allow_end=True, pointer=pointer), value)
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    if pointer == "":
        raise _invalid("remove operation cannot remove the whole document")
    parent, token = _locate(doc, pointer, "remove")
    if isinstance(parent, list):
        return doc, parent.pop(_array_index(token, len(parent), allow_end=False, pointer=pointer))
    if token not in parent:
        raise _invalid(f"remove operation does not apply: doc is missing path: {pointer}")
    return doc, parent.pop(token)


def _replace(doc: Any, pointer: str, value: Any) -> Any:
    if pointer == "":
        return value
    parent, token = _locate(doc, pointer, "replace")
    if isinstance(parent, list):
        parent[_array_index(token, len(parent), allow_end=False, pointer=pointer)] = value
    elif token not in parent:
        raise _invalid(f"replace operation does not apply: doc is missing key: {pointer}")
    else:
        parent[token] = value
    return doc


def _operand(op: dict, name: str, index: int) -> Any:
    if name not in op:
        raise _invalid(f"operation {index} ({op.get('op')}) is missing {name!r}")
    return op[name]


def json_patch(obj: Any, patch: list) -> Any:
    """RFC 6902: apply the operations in order to a copy of ``obj``; any failure raises 422."""
    doc = json_copy(obj)
    for index, op in enumerate(patch):
        if not isinstance(op, dict):
            raise _invalid(f"operation {index} is not a JSON object")
        kind = op.get("op")
        path = _operand(op, "path", index)
        if kind == "add":
            doc = _add(doc, path, json_copy(_operand(op, "value", index)))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc = _replace(doc, path, json_copy(_operand(op, "value", index)))
        elif kind == "move":
            source = _operand(op, "from", index)
            if path != source and path.startswith(source + "/"):
                raise _invalid(f"move operation cannot move {source} into its own child {path}")
            doc, value = _remove(doc, source)
            doc = _add(doc, path, value)
        elif kind == "copy":
            value = _get(doc, _operand(op, "from", index), "copy")
            if value is _MISSING:
                raise _invalid(f"copy operation does not apply: doc is missing from path: {op['from']}")
            doc = _add(doc, path, json_copy(value))
        elif kind == "test":
            actual = _get(doc, path, "test")
            expected = op.get("value")
            if actual is _MISSING:
                if expected is not None:
                    raise _invalid(f"testing value {path} failed: path is missing")
            elif not json_equal(actual, expected):
                raise _invalid(f"testing value {path} failed")
        else:
            raise _invalid(f"Unexpected kind: {kind}")
    return doc


# --------------------------------------------------------------------------------------------
# Strategic merge patch


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
