"""Status writes: a JSON merge patch (RFC 7386) on the ``/status`` subresource, skipped when nothing changed.

The patch carries the resourceVersion the status was computed from, so a write never lands on a job that
changed since it was read (docs/controller.md#r15): the server answers 409 and the caller recomputes from
fresh state.
"""

from __future__ import annotations

from typing import Any


def merge_patch(current: Any, desired: Any) -> Any:
    """The merge patch turning ``current`` into ``desired``; ``{}`` when they are equal.

    Keys missing from ``desired`` are set to null; lists and scalars are replaced whole (merge patch has no
    list merging). ``None`` values in ``desired`` mean "absent".
    """
    if not isinstance(current, dict) or not isinstance(desired, dict):
        return _strip_none(desired)
    patch: dict[str, Any] = {}
    for key, old in current.items():
        if (key not in desired or desired[key] is None) and old is not None:
            patch[key] = None
    for key, new in desired.items():
        if new is None:
            continue
        old = current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            sub = merge_patch(old, new)
            if sub != {}:
                patch[key] = sub
        elif key not in current or old != _strip_none(new):
            patch[key] = _strip_none(new)
    return patch


def status_patch(job: dict[str, Any], desired_status: dict[str, Any]) -> dict[str, Any] | None:
    """The body to PATCH on ``/status``, or None when the job's status already equals ``desired_status``."""
    diff = merge_patch(job.get("status") or {}, desired_status)
    if not diff:
        return None
    resource_version = (job.get("metadata") or {}).get("resourceVersion")
    body: dict[str, Any] = {"status": diff}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    return body


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value
