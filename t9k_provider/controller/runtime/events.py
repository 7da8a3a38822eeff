"""Kubernetes Events (core/v1) about jobs; repeats fold into one Event's ``count``, as in client-go."""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any

from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import EVENTS
from t9k_provider.kube.timestamps import rfc3339

log = logging.getLogger(__name__)

COMPONENT = "t9k-controller"
MAX_REMEMBERED = 4096


def _now() -> str:
    return rfc3339(datetime.now(timezone.utc))


class EventRecorder:
    def __init__(self, api: KubeApi, metrics: Metrics, instance: str) -> None:
        self._api = api
        self._metrics = metrics
        self._instance = instance
        self._seen: OrderedDict[tuple[str, str, str, str], tuple[str, int]] = OrderedDict()

    async def record(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Best effort: an Event that cannot be written is logged, never fails the reconcile."""
        meta = job.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        key = (meta.get("uid") or "", type_, reason, message)
        self._metrics.events.labels(type=type_).inc()
        log.info(
            "event %s %s: %s",
            type_,
            reason,
            message,
            extra={"job": f"{namespace}/{meta.get('name')}", "kind": job.get("kind")},
        )
        try:
            seen = self._seen.get(key)
            if seen is not None:
                name, count = seen
                try:
                    await self._api.patch(
                        EVENTS, namespace, name, {"count": count + 1, "lastTimestamp": _now()}
                    )
                    self._remember(key, name, count + 1)
                    return
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            name = f"{meta.get('name')}.{secrets.token_hex(8)}"
            now = _now()
            await self._api.create(
                EVENTS,
                namespace,
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": {
                        "apiVersion": job.get("apiVersion"),
                        "kind": job.get("kind"),
                        "name": meta.get("name"),
                        "namespace": namespace,
                        "uid": meta.get("uid"),
                        "resourceVersion": meta.get("resourceVersion"),
                    },
                    "type": type_,
                    "reason": reason,
                    "message": message,
                    "count": 1,
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "source": {"component": COMPONENT},
                    "reportingComponent": COMPONENT,
                    "reportingInstance": self._instance,
                },
            )
            self._remember(key, name, 1)
        except Exception as exc:
            log.warning("could not record event %s on %s/%s: %s", reason, namespace, meta.get("name"), exc)

    def _remember(self, key: tuple[str, str, str, str], name: str, count: int) -> None:
        self._seen[key] = (name, count)
        self._seen.move_to_end(key)
        while len(self._seen) > MAX_REMEMBERED:
            self._seen.popitem(last=False)
