"""CRD transition rules (``x-kubernetes-validations`` whose rule reads ``oldSelf``), checked on update.

A real API server evaluates every rule in CEL; the local one evaluates the immutability rule
``self == oldSelf``, which is the one the T9k CRDs serve (``spec.runMode.pause.resumeSpecs``), and leaves
other rules unevaluated (docs/local-cluster.md#what-the-local-cluster-does-not-enforce). As in Kubernetes, a
transition rule applies only where the old and the new object both have a value, and not to list items
(which it cannot correlate without ``x-kubernetes-list-type: map``).
"""

from __future__ import annotations

from typing import Any

from t9k_provider.local.machinery.fielderrors import Cause, collect, invalid

IMMUTABLE = "self == oldSelf"


def transition_causes(schema: dict[str, Any] | None, old: Any, new: Any) -> list[Cause]:
    """The causes of a 422 for replacing ``old`` by ``new`` under ``schema`` (empty if the rules hold)."""
    return collect(lambda out: _check(schema or {}, old, new, "", out))


def _check(s: dict[str, Any], old: Any, new: Any, path: str, out: list[Cause]) -> None:
    if old is None or new is None:
        return
    for rule in s.get("x-kubernetes-validations") or ():
        if " ".join(str(rule.get("rule", "")).split()) == IMMUTABLE and old != new:
            out.append(
                invalid(path, s.get("type", "object"), rule.get("message") or f"failed rule: {IMMUTABLE}")
            )
    if isinstance(old, dict) and isinstance(new, dict):
        for key, sub in (s.get("properties") or {}).items():
            _check(sub, old.get(key), new.get(key), f"{path}.{key}" if path else key, out)
