"""resourceVersion ordering, shared by the informers and the triggers' shared watch.

Kubernetes calls resourceVersions opaque, but etcd and the local store hand out one global integer counter,
so two integer versions of the same collection compare by value. Anything else is not comparable: callers
decide what an unknown order means (an informer keeps what it holds, a waiting trigger takes the event).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: An object (its ``metadata.resourceVersion`` is read), a version as the API sends it, or a parsed one.
Versioned = Mapping[str, Any] | str | int | None


def resource_version(value: Versioned) -> int | None:
    """The version as a number, or None when there is none or it is not an integer."""
    if isinstance(value, Mapping):
        value = (value.get("metadata") or {}).get("resourceVersion")
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None


def compare(a: Versioned, b: Versioned) -> int | None:
    """-1, 0 or 1 as ``a`` is older than, the same as or newer than ``b``; None when either is unknown."""
    x, y = resource_version(a), resource_version(b)
    if x is None or y is None:
        return None
    return (x > y) - (x < y)
