"""The one exception type for bad manifests, and its translation from pydantic errors."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

# Error type used by semantic checks; its context carries the (path, message) pairs.
SEMANTIC_ERROR = "t9k_manifest"


class ManifestError(ValueError):
    """A manifest that is not a valid T9k Job; the message starts with the field path."""

    def __init__(self, issues: Sequence[tuple[str, str]]) -> None:
        if not issues:
            raise ValueError("ManifestError needs at least one issue")
        self.issues: list[tuple[str, str]] = list(issues)
        self.path: str = self.issues[0][0]
        super().__init__("\n".join(_line(path, message) for path, message in self.issues))

    def __reduce__(self) -> tuple[type[ManifestError], tuple[list[tuple[str, str]]]]:
        return ManifestError, (self.issues,)


def _line(path: str, message: str) -> str:
    return f"{path}: {message}" if path else message


def semantic_error(issues: Iterable[tuple[str, str]]) -> PydanticCustomError:
    """Wrap semantic issues so they survive pydantic and reach `ManifestError` with their paths."""
    listed = list(issues)
    return PydanticCustomError(
        SEMANTIC_ERROR,
        "{summary}",
        {"summary": "; ".join(_line(p, m) for p, m in listed), "issues": listed},
    )


def join_path(parts: Iterable[str | int]) -> str:
    """`("spec", "replicaSpecs", 1, "template")` -> `spec.replicaSpecs[1].template`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _real_path(loc: tuple[Any, ...], data: Any) -> list[str | int]:
    """Keep only the loc parts that exist in the input (drops pydantic's union-branch tags)."""
    parts: list[str | int] = []
    node = data
    for part in loc:
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            node = node[part]
            parts.append(part)
        elif isinstance(part, str) and not _is_union_tag(part) and isinstance(node, dict):
            parts.append(part)  # a missing required field
            node = None
        # otherwise: a union tag such as 'int', 'str' or 'function-after[...]'
    return parts


def _is_union_tag(part: str) -> bool:
    return part in {"int", "str", "list[str]", "bool", "float"} or "[" in part or part.startswith("function-")


def from_validation_error(exc: ValidationError, data: Any, prefix: Sequence[str | int] = ()) -> ManifestError:
    """Translate a pydantic error into a `ManifestError` whose lines are `path: message`."""
    issues: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        base = [*prefix, *_real_path(tuple(err["loc"]), data)]
        if err["type"] == SEMANTIC_ERROR:
            for path, message in err["ctx"]["issues"]:
                issues.append((join_path([*base, path]) if path else join_path(base), message))
            continue
        issues.append((join_path(base), _message(err)))
    return ManifestError(_merge_union_branches(issues))


def _merge_union_branches(issues: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """One line per path for a value that matches no branch of a union ("a valid string or a valid list")."""
    merged: list[tuple[str, str]] = []
    prefix = "Input should be "
    for path, message in issues:
        if (
            merged
            and merged[-1][0] == path
            and merged[-1][1].startswith(prefix)
            and message.startswith(prefix)
        ):
            merged[-1] = (path, f"{merged[-1][1]} or {message[len(prefix) :]}")
        else:
            merged.append((path, message))
    return merged


def _message(err: Any) -> str:
    kind = err["type"]
    if kind == "missing":
        return "field required"
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; T9k field names are camelCase)"
    msg = str(err["msg"])
    return msg[len("Value error, ") :] if msg.startswith("Value error, ") else msg
