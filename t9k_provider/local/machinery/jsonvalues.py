"""JSON value helpers shared by the patch, schema and validation code: type names, equality, membership."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def json_equal(a: Any, b: Any) -> bool:
    """JSON value equality: ``1 == 1.0`` but ``True != 1`` (Python's ``==`` conflates bool and int)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, (int, float)):
        return isinstance(b, (int, float)) and a == b
    return type(a) is type(b) and a == b


MAX_DEPTH = 500  # kube-apiserver's decoder allows 10000; Python's recursive walks of a value need a margin


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a decoded value nests arrays/objects deeper than ``limit`` (checked without recursion)."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        level = [
            c
            for v in level
            if isinstance(v, (dict, list))
            for c in (v.values() if isinstance(v, dict) else v)
        ]
        if not level:
            return False
    return True


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value; the C codec copes with nesting that ``copy.deepcopy`` cannot."""
    return json.loads(json.dumps(value))


def json_in(value: Any, items: Iterable[Any]) -> bool:
    """Whether ``items`` holds ``value``, by ``json_equal`` (set semantics of JSON lists)."""
    return any(json_equal(value, item) for item in items)


def json_type(value: Any) -> str:
    """The JSON Schema type of a decoded value: null, boolean, integer, number, string, array or object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def get_path(obj: Any, path: str) -> Any:
    """The value at a dotted path such as ``.spec.replicas`` (None when any step is missing)."""
    for part in path.strip(".").split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def significant(value: Any) -> Any:
    """Drop what JSON ``omitempty`` would drop, so absent and empty compare equal."""
    if isinstance(value, dict):
        kept = {k: significant(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, "", [], {}, False)}
    if isinstance(value, list):
        return [significant(v) for v in value]
    return value
