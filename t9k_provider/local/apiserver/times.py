"""Timestamps as the API server writes them: ``metav1.Time`` (whole seconds) and ``MicroTime``."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any


def now_time() -> str:
    """``metav1.Time``: RFC 3339, UTC, whole seconds."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def after(seconds: int) -> str:
    """``now_time`` ``seconds`` from now."""
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime | None:
    text = value.strip()
    if text.endswith("Z") or text.endswith("z"):
        text = text[:-1] + "+00:00"
    match = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
    if not match:
        return None
    frac = (match.group(2) or ".0")[1:][:6].ljust(6, "0")
    try:
        parsed = datetime.fromisoformat(f"{match.group(1)}.{frac}{match.group(3)}")
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def normalize_time(value: Any, micro: bool) -> Any:
    """Re-serialise a timestamp as the real server does (``Time``: whole seconds; ``MicroTime``: 6 digits)."""
    if not isinstance(value, str):
        return value
    parsed = parse_time(value)
    if parsed is None:
        return value
    if micro:
        return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return parsed.strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize_fields(obj: dict[str, Any], times: tuple[str, ...], micro_times: tuple[str, ...]) -> None:
    """Normalize the timestamps at these dotted paths of ``obj`` in place (absent ones are skipped)."""
    for path, micro in [*((p, False) for p in times), *((p, True) for p in micro_times)]:
        *parents, leaf = path.split(".")
        node: Any = obj
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(leaf) is not None:
            node[leaf] = normalize_time(node[leaf], micro)
