"""The operators' choices as types, as cncf's ``OnFinishAction``: a DAG passes the member or its string,
and a wrong string fails at DAG parse, naming the field and what it allows."""

from __future__ import annotations

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
