"""Core/v1 Events as the node agents (scheduler, kubelet, Job controller, flink-operator) record them."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import EVENTS
from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.machinery.nodes import FIRST_NODE

log = logging.getLogger(__name__)


async def record(
    kube: KubeApi,
    obj: dict[str, Any],
    reason: str,
    message: str,
    *,
    component: str,
    event_type: str = "Normal",
    field_path: str | None = None,
    host: str = FIRST_NODE,
) -> None:
    """Post one event about `obj`; failures are logged, never raised (events are best effort, as upstream).
    ``host``: the node a kubelet's event comes from (the control plane's components run on the first)."""
    meta = obj["metadata"]
    ns = meta.get("namespace", "default")
    involved: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Pod"),
        "namespace": ns,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if field_path:
        involved["fieldPath"] = field_path
    now = now_rfc3339()
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{time.time_ns():x}{os.getpid() % 256:02x}", "namespace": ns},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": component, **({"host": host} if component == "kubelet" else {})},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host if component == "kubelet" else f"{component}-{host}",
    }
    try:
        await kube.create(EVENTS, ns, body)
    except (ApiError, OSError) as exc:
        log.debug("event %s for %s/%s not recorded: %s", reason, ns, meta["name"], exc)
