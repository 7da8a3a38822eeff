"""The operators' choices as types, as cncf's ``OnFinishAction``: a DAG passes the member or its string,
and a wrong string fails at DAG parse, naming the field and what it allows; and the durations the operators
and the sensor take (seconds or ``timedelta``), checked then too. Imports nothing of the provider."""

from __future__ import annotations

from datetime import timedelta
from enum import Enum


class OnFinishAction(str, Enum):
    """What happens to a job once it ended."""

    KEEP = "keep"
    DELETE = "delete"
    DELETE_ON_SUCCESS = "delete_on_success"


class OnKillAction(str, Enum):
    """What happens to a job when its task is killed or gives up on it (a wait limit)."""

    DELETE = "delete"
    KEEP = "keep"


class ReattachPolicy(str, Enum):
    """Whether a try adopts the job an earlier try of its task instance left (``jobclient.reattach``)."""

    IF_UNCHECKED = "if_unchecked"
    IF_RUNNING = "if_running"
    NEVER = "never"


def choose(options: type[Enum], value: object, field: str) -> str:
    """``value`` (a member of ``options`` or its string) as the plain string the operator keeps."""
    try:
        return str(options(value).value)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in options)
        raise ValueError(f"{field}: {value!r} is not one of {allowed}") from None


def seconds(value: float | timedelta | None, field: str) -> float | None:
    """A user-supplied duration (number of seconds or timedelta) as seconds, rejecting negatives."""
    if value is None:
        return None
    result = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if result < 0:
        raise ValueError(f"{field}: must not be negative, got {value!r}")
    return result
