"""Field errors worded like apimachinery ``util/validation/field``: they become the causes of 422 Invalid."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One ``details.causes[]`` entry: ``reason`` is the cause type, ``message`` the error body."""

    reason: str
    message: str
    field: str

    def error(self) -> str:
        """``field.Error.Error()``: the form used inside aggregated messages."""
        return f"{self.field}: {self.message}"


def go_value(value: Any) -> str:
    """A value as ``field.Error`` prints it: strings quoted, scalars bare, the rest as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def invalid(field: str, value: Any, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {go_value(value)}: {detail}", field)


def type_invalid(field: str, value: Any, detail: str) -> Cause:
    return Cause("FieldValueTypeInvalid", f"Invalid value: {go_value(value)}: {detail}", field)


def required(field: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", f"Required value: {detail}" if detail else "Required value", field)


def forbidden(field: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {detail}" if detail else "Forbidden", field)


def duplicate(field: str, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {go_value(value)}", field)


def not_supported(field: str, value: Any, supported: list[str]) -> Cause:
    quoted = ", ".join(json.dumps(s, ensure_ascii=False) for s in supported)
    message = f"Unsupported value: {go_value(value)}: supported values: {quoted}"
    return Cause("FieldValueNotSupported", message, field)


def too_long(field: str, max_bytes: int) -> Cause:
    unit = "byte" if max_bytes == 1 else "bytes"
    return Cause("FieldValueTooLong", f"Too long: may not be more than {max_bytes} {unit}", field)


def too_many(field: str, actual: int, maximum: int) -> Cause:
    unit = "item" if maximum == 1 else "items"
    return Cause("FieldValueTooMany", f"Too many: {actual}: must have at most {maximum} {unit}", field)


def aggregate(causes: list[Cause]) -> str:
    """``ErrorList.ToAggregate().Error()``: one error bare, several as ``[a, b]``, duplicates dropped."""
    messages = list(dict.fromkeys(c.error() for c in causes))
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def not_found(field: str, value: Any) -> Cause:
    return Cause("FieldValueNotFound", f"Not found: {go_value(value)}", field)


def collect(check: Callable[[list[Cause]], None]) -> list[Cause]:
    """The causes ``check`` appends; an object nested too deeply to walk gets one cause instead."""
    out: list[Cause] = []
    try:
        check(out)
    except RecursionError:
        return [invalid("", "<value omitted>", "the object is nested too deeply to be validated")]
    return out
