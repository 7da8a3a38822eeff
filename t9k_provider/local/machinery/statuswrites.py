"""Writing an object's status subresource as the node agents do, one way: patch it, then hand the result to
the agent's informer at once, so its next sync starts from what was written rather than from a stale cache."""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import Informer
from t9k_provider.kube.resources import ResourceType


async def patch_status(
    kube: KubeApi,
    resource: ResourceType,
    obj: dict[str, Any],
    status: dict[str, Any],
    seen_by: Informer,
    *,
    strategic: bool = False,
) -> dict[str, Any] | None:
    """Patch ``obj``'s status with ``status`` (a JSON merge patch; ``strategic``: a strategic merge patch, so
    a condition merges by type and another writer's stays) and observe the result in ``seen_by``; None when
    the object is gone (404), which no caller needs to handle further."""
    meta = obj["metadata"]
    try:
        written = await kube.patch(
            resource,
            meta.get("namespace"),
            meta["name"],
            {"status": status},
            subresource="status",
            strategic=strategic,
        )
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    seen_by.observe(written)
    return written
