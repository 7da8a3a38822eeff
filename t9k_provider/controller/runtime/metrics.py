"""Prometheus metrics of the controller, on a private registry so several controllers can share a process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

READ_VERBS = frozenset({"get", "list", "watch"})

PREFIX = "t9k_controller"


class Metrics:
    """Every series the controller exports; names are part of the documented interface (docs/install.md)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            f"{PREFIX}_reconcile_total",
            "Reconciles by job kind and result (ok, requeue, error).",
            ["kind", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            f"{PREFIX}_reconcile_errors_total",
            "Reconciles that raised or hit an API error.",
            ["kind"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Wall time of one reconcile, API calls included.",
            ["kind"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.queue_depth = Gauge(f"{PREFIX}_workqueue_depth", "Keys waiting in the work queue.", registry=r)
        self.queue_retries = Counter(
            f"{PREFIX}_workqueue_retries_total", "Rate-limited requeues after errors.", registry=r
        )
        self.api_requests = Counter(
            f"{PREFIX}_api_requests_total",
            "Requests sent to the Kubernetes API by verb, resource, HTTP code and access (read or write).",
            ["verb", "resource", "code", "access"],
            registry=r,
        )
        self.watch_events = Counter(
            f"{PREFIX}_watch_events_total",
            "Watch events received by resource and type.",
            ["resource", "type"],
            registry=r,
        )
        self.relists = Counter(
            f"{PREFIX}_informer_relists_total",
            "Full relists by resource and cause (start, expired, too_large, error).",
            ["resource", "cause"],
            registry=r,
        )
        self.status_writes = Counter(
            f"{PREFIX}_status_writes_total",
            "Status subresource writes by outcome (written, unchanged, conflict).",
            ["outcome"],
            registry=r,
        )
        self.actions = Counter(
            f"{PREFIX}_actions_total",
            "Child object actions by type (create, delete, patch) and outcome.",
            ["action", "kind", "outcome"],
            registry=r,
        )
        self.events = Counter(
            f"{PREFIX}_events_total", "Kubernetes Events recorded by type.", ["type"], registry=r
        )
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this instance holds the leader lease.", registry=r)

    # -- kube.api.ApiMetrics ----------------------------------------------------------------------
    def api_request(self, verb: str, resource: str, code: int) -> None:
        access = "read" if verb in READ_VERBS else "write"
        self.api_requests.labels(verb=verb, resource=resource, code=str(code), access=access).inc()

    def watch_event(self, resource: str, event_type: str) -> None:
        self.watch_events.labels(resource=resource, type=event_type).inc()

    def relist(self, resource: str, cause: str) -> None:
        self.relists.labels(resource=resource, cause=cause).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
