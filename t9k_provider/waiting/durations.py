"""User-supplied durations (seconds or ``timedelta``) as seconds.

The operator and the sensor check their arguments with it while a DAG file is parsed, so it imports nothing
of the provider.
"""

from __future__ import annotations

from datetime import timedelta


def seconds(value: float | timedelta | None, field: str) -> float | None:
    """A user-supplied duration (number of seconds or timedelta) as seconds, rejecting negatives."""
    if value is None:
        return None
    result = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if result < 0:
        raise ValueError(f"{field}: must not be negative, got {value!r}")
    return result
