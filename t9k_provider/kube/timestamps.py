"""RFC 3339 timestamps as Kubernetes writes them (``metav1.Time``: whole seconds; ``MicroTime``), and their
parsers: the one time format of the controller, the Airflow hooks and the local cluster."""

from __future__ import annotations

import contextlib
import re
import time
from datetime import datetime, timezone
from typing import Any

_TIME = "%Y-%m-%dT%H:%M:%SZ"
_MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def rfc3339(moment: datetime | float) -> str:
    """``metav1.Time`` of a datetime or epoch seconds: UTC, whole seconds."""
    seconds = moment.timestamp() if isinstance(moment, datetime) else moment
    return time.strftime(_TIME, time.gmtime(seconds))


def micro_rfc3339(moment: datetime) -> str:
    """``metav1.MicroTime`` (a Lease's times): UTC, microseconds."""
    return moment.astimezone(timezone.utc).strftime(_MICRO_TIME)


def now_rfc3339(after: float = 0) -> str:
    """Now, or ``after`` seconds from now."""
    return rfc3339(time.time() + after)


def parse_timestamp(text: str) -> datetime:
    """Any RFC 3339 timestamp (the CRI logs' nine fractional digits too: truncated to µs), in UTC; a missing
    offset means UTC. ValueError if ``text`` is none."""
    match = re.fullmatch(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(.*)", text.strip())
    if not match:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    head, fraction, offset = match.groups()
    offset = "+00:00" if offset in ("Z", "z") else offset
    parsed = datetime.fromisoformat(f"{head}.{(fraction or '')[:6].ljust(6, '0')}{offset}")
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)


def parse_time(value: Any) -> datetime | None:
    """A timestamp read back from the API (or a datetime; naive ones are UTC), None when it is not one."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    try:
        return parse_timestamp(value) if isinstance(value, str) else None
    except ValueError:
        return None


def normalize_fields(obj: dict[str, Any], times: tuple[str, ...], micro_times: tuple[str, ...]) -> None:
    """Re-serialise the timestamps at these dotted paths of ``obj`` in place as the real server does (absent
    ones and ones that do not parse are left alone)."""
    for path, micro in [*((p, False) for p in times), *((p, True) for p in micro_times)]:
        *parents, leaf = path.split(".")
        node: Any = obj
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(leaf), str):
            with contextlib.suppress(ValueError):
                node[leaf] = parse_timestamp(node[leaf]).strftime(_MICRO_TIME if micro else _TIME)
