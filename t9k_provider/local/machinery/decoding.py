"""Typed reads of untyped JSON bodies: a value of the wrong JSON type becomes a cause, not an exception.

The real server decodes bodies into Go structs before validating them; these helpers stand in for that
step wherever validation reads a field.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.local.machinery.fielderrors import Cause, required, type_invalid


def type_error(path: str, value: Any, expected: str, out: list[Cause]) -> None:
    out.append(type_invalid(path, value, f"must be of type {expected}"))


def _field(parent: dict, key: str, path: str, out: list[Cause], kind: type, expected: str) -> Any:
    """The value, or an empty ``kind`` when it is absent or (a cause) of another JSON type."""
    value = parent.get(key)
    if value is None or isinstance(value, kind):
        return value or kind()
    type_error(path, value, expected, out)
    return kind()


def text_field(parent: dict, key: str, path: str, out: list[Cause]) -> str:
    return _field(parent, key, path, out, str, "string")


def required_text(parent: dict, key: str, path: str, out: list[Cause]) -> str:
    """A string field that must not be empty or absent (a ``required`` cause)."""
    value = text_field(parent, key, path, out)
    if not value:
        out.append(required(path))
    return value


def object_field(parent: dict, key: str, path: str, out: list[Cause]) -> dict:
    return _field(parent, key, path, out, dict, "object")


def array_field(parent: dict, key: str, path: str, out: list[Cause]) -> list:
    return _field(parent, key, path, out, list, "array")


def object_items(parent: dict, key: str, path: str, out: list[Cause]) -> list[tuple[str, dict]]:
    """The objects of a list field with their paths; non-object items are type errors."""
    found = []
    for i, item in enumerate(array_field(parent, key, path, out)):
        if isinstance(item, dict):
            found.append((f"{path}[{i}]", item))
        else:
            type_error(f"{path}[{i}]", item, "object", out)
    return found


def string_items(parent: dict, key: str, path: str, out: list[Cause]) -> list[str]:
    found = []
    for i, item in enumerate(array_field(parent, key, path, out)):
        if isinstance(item, str):
            found.append(item)
        else:
            type_error(f"{path}[{i}]", item, "string", out)
    return found


def string_map(parent: dict, key: str, path: str, out: list[Cause]) -> dict[str, str]:
    found = {}
    for name, value in object_field(parent, key, path, out).items():
        if isinstance(value, str):
            found[name] = value
        else:
            type_error(path, value, "string", out)
    return found


def int_field(parent: dict, key: str, path: str, out: list[Cause]) -> int | None:
    value = parent.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    type_error(path, value, "integer", out)
    return None
