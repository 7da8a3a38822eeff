"""PATCH semantics of the Kubernetes API server: JSON patch and merge patch here, strategic merge patch in
`strategicpatch`.

Pure functions on decoded JSON values. Status codes, reasons and messages follow
apiserver ``handlers/patch.go``; strategic merge follows apimachinery ``strategicpatch/patch.go``
(merge keys are the ``patchStrategy``/``patchMergeKey`` tags of the built-in types, which each resource's
strategy declares as ``MergeField`` trees).
"""

from __future__ import annotations

import json
from typing import Any

from t9k_provider.local.machinery.jsonvalues import (
    MAX_DEPTH,
    json_copy,
    json_equal,
    json_type,
    too_deep,
)
from t9k_provider.local.machinery.patcherrors import PatchError
from t9k_provider.local.machinery.patcherrors import bad_request as _bad_request
from t9k_provider.local.machinery.patcherrors import invalid as _invalid
from t9k_provider.local.machinery.strategicpatch import MergeField, strategic_merge_patch

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

MAX_JSON_PATCH_OPERATIONS = 10000


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
