"""RFC 3339 timestamps as the node agents and the shim write them into objects and files, and their parser."""

from __future__ import annotations

import time
from datetime import datetime


def rfc3339(seconds: float) -> str:
    """Second precision, as Kubernetes object timestamps have."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def now_rfc3339() -> str:
    return rfc3339(time.time())


def parse_timestamp(text: str) -> datetime:
    """Any RFC 3339 timestamp (the CRI logs' nine fractional digits too); nanoseconds are truncated to µs."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    main, _, rest = text.partition(".")
    if rest:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        frac, tz = rest[:digits], rest[digits:]
        text = f"{main}.{(frac + '000000')[:6]}{tz}"
    return datetime.fromisoformat(text)
