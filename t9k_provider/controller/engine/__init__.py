"""The engine's building blocks: the model kinds compile to, JobRun, status, names; no I/O.

The entry point above it is `t9k_provider.controller.reconcile` (docs/architecture.md section 3).
"""

from __future__ import annotations

from .decision import Action, ChildType, Create, Decision, Delete, Event, Observed, Patch

__all__ = ["Action", "ChildType", "Create", "Decision", "Delete", "Event", "Observed", "Patch"]
