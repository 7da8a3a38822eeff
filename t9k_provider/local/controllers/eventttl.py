"""Event expiry: events whose last activity is older than the TTL are deleted (kube-apiserver's --event-ttl,
one hour, which etcd leases enforce upstream)."""

from __future__ import annotations

from datetime import datetime
from functools import partial

from t9k_provider.kube.timestamps import parse_time
from t9k_provider.local.controllers.serverside import Retries, ServerSide

EVENT_TTL_SECONDS = 3600


class EventExpiry:
    def __init__(self, side: ServerSide) -> None:
        self.side = side
        self.retries = Retries("event expiry")

    def expire(self, now: datetime) -> int:
        """Delete the events expired at ``now``; how many."""
        side = self.side
        res = side.resource("", "events")
        assert res is not None
        expired = 0
        for event in side.store.list("", "events"):
            series = event.get("series") or {}
            stamps = [
                event.get("lastTimestamp"),
                event.get("eventTime"),
                series.get("lastObservedTime"),
                event["metadata"].get("creationTimestamp"),
            ]
            last = max((t for t in map(parse_time, stamps) if t), default=None)
            if last is not None and (now - last).total_seconds() > EVENT_TTL_SECONDS:
                meta = event["metadata"]
                namespace, name = meta.get("namespace", ""), meta["name"]
                delete = partial(side.delete, f"expire event {namespace}/{name}", res, namespace, name)
                expired += self.retries.run(("", "events", namespace, name), delete)
        return expired
