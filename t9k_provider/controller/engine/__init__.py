"""The pure engine: `reconcile(Observed) -> Decision`, no I/O (docs/architecture.md section 3)."""

from __future__ import annotations

from .reconcile import WATCHED_CHILD_TYPES, reconcile
from .types import Action, Create, Decision, Delete, Event, Observed, Patch

__all__ = [
    "WATCHED_CHILD_TYPES",
    "Action",
    "Create",
    "Decision",
    "Delete",
    "Event",
    "Observed",
    "Patch",
    "reconcile",
]
