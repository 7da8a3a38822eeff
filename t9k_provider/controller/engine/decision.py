"""The engine's interface with the runtime: what it observes and what it decides."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple


class ChildType(NamedTuple):
    """A type of object created for a job; the runtime watches every type some kind declares."""

    api_version: str
    kind: str
    plural: str


@dataclass(frozen=True)
class Observed:
    """One consistent look at a job: its raw manifest, every object it owns, and the clock."""

    job: dict[str, Any]
    children: list[dict[str, Any]]
    now: datetime


@dataclass(frozen=True)
class Create:
    obj: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    api_version: str
    kind: str
    name: str
    uid: str | None = None
    grace_period_seconds: int | None = None


@dataclass(frozen=True)
class Patch:
    """A JSON merge patch on a child object (never on the job itself)."""

    api_version: str
    kind: str
    name: str
    patch: dict[str, Any]


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


Action = Create | Delete | Patch


@dataclass(frozen=True)
class Decision:
    """The complete desired status plus the ordered actions that move the cluster towards it."""

    status: dict[str, Any]
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
