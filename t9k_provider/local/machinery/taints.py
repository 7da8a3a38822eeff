"""Taints and tolerations (core/v1 ``Toleration.ToleratesTaint``), shared by the scheduler's TaintToleration
filter and the node lifecycle controller's taint-based eviction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Taint = dict[str, Any]
Toleration = dict[str, Any]


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration tolerates one taint: same effect (or any), same key (or any with Exists), and
    with the Equal operator the same value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    same_key = toleration.get("key", "") == taint.get("key")
    return same_key and toleration.get("value", "") == taint.get("value", "")


def untolerated(
    taints: Iterable[Taint], tolerations: Iterable[Toleration], effects: tuple[str, ...]
) -> Taint | None:
    """The first of ``taints`` with one of ``effects`` that no toleration tolerates, if any."""
    held = list(tolerations)
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in held):
            return taint
    return None
