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
        self.registry = r = CollectorRegistry()

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(f"{PREFIX}_{name}", doc, labels, registry=r)

        self.reconciles = counter(
            "reconcile_total", "Reconciles by job kind and result (ok, requeue, error).", ("kind", "result")
        )
        self.reconcile_errors = counter(
            "reconcile_errors_total", "Reconciles that raised or hit an API error.", ("kind",)
        )
        self.reconcile_seconds = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Wall time of one reconcile, API calls included.",
            ["kind"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.queue_depth = Gauge(f"{PREFIX}_workqueue_depth", "Keys waiting in the work queue.", registry=r)
        self.queue_retries = counter("workqueue_retries_total", "Rate-limited requeues after errors.")
        self.api_requests = counter(
            "api_requests_total",
            "Requests sent to the Kubernetes API by verb, resource, HTTP code and access (read or write).",
            ("verb", "resource", "code", "access"),
        )
        self.watch_events = counter(
            "watch_events_total", "Watch events received by resource and type.", ("resource", "type")
        )
        self.relists = counter(
            "informer_relists_total",
            "Full relists by resource and cause (start, expired, too_large, error).",
            ("resource", "cause"),
        )
        self.status_writes = counter(
            "status_writes_total",
            "Status subresource writes by outcome (written, unchanged, held, conflict).",
            ("outcome",),
        )
        self.actions = counter(
            "actions_total",
            "Child object actions by type (create, delete, patch) and outcome.",
            ("action", "kind", "outcome"),
        )
        self.events = counter("events_total", "Kubernetes Events recorded by type.", ("type",))
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
