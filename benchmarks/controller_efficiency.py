"""API requests the controller makes over one job's life, against what a perfect controller needs
(docs/benchmarks.md#1-controller-efficiency).

One job at a time on a fresh cluster (simulated kubelet), so the controller's own request counters
(``t9k_controller_api_requests_total``, by verb and access) before and after belong to that job alone.
The minimum is counted independently of those counters: the children created and deleted (successful
requests only) plus the distinct status states the job went through, as a watch on the job sees them
(timestamps aside: a perfect controller writes each state exactly once).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from benchmarks import manifests
from benchmarks.api import Client, Watch, progress
from benchmarks.controller_metrics import PREFIX, delta, metrics, reconciles
from benchmarks.stats import Figure
from t9k_provider.jobs.contract import LABEL_OWNER_NAME
from t9k_provider.testing import ControllerProcess, LocalCluster, wait_for

SECTION = "1. Controller efficiency"
REQUESTS = f"{PREFIX}_api_requests_total"
TERMINAL = ("Succeeded", "Failed")
FLINK = "/apis/flinkoperator.k8s.io/v1beta1/namespaces/{ns}/flinkclusters"


@dataclass
class JobCost:
    reads: float
    writes: float  # events excluded
    events: float
    creates: float
    deletes: float
    transitions: int

    @property
    def minimum(self) -> float:
        return self.creates + self.deletes + self.transitions

    @property
    def above_minimum(self) -> float:
        """Requests no state change asked for: a poll shows here, and which pod transitions one reconcile
        coalesced (the status states written, 8-10 for the same 1-second job) does not."""
        return self.reads + self.writes + self.events - self.minimum


def semantic(status: Any) -> Any:
    """The status without timestamps: what a perfect controller would have to write."""
    if isinstance(status, dict):
        return {k: semantic(v) for k, v in status.items() if not k.endswith(("Time", "Timestamp", "At"))}
    if isinstance(status, list):
        return [semantic(v) for v in status]
    return status


class StatusTrail:
    """Distinct consecutive status states of one job, as its watch events show them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.states: list[str] = []
        self.phase = ""
        self.deleted = False
        self.lock = threading.Lock()

    def on_event(self, type_: str, obj: dict[str, Any], received: float) -> None:
        if (obj.get("metadata") or {}).get("name") != self.name:
            return
        if type_ == "DELETED":
            self.deleted = True
            return
        status = obj.get("status") or {}
        digest = json.dumps(semantic(status), sort_keys=True)
        with self.lock:
            if status and (not self.states or self.states[-1] != digest):
                self.states.append(digest)
            self.phase = status.get("phase") or ""


def _play_flink_operator(client: Client, namespace: str, name: str, stop: threading.Event) -> None:
    """BeamJob needs a running FlinkCluster; no flink-operator runs here, so the benchmark plays it."""
    path = FLINK.format(ns=namespace) + f"/{name}-flinkcluster"
    while not stop.is_set():
        status, _ = client.call("GET", path)
        if status == 200:
            client.merge_patch(f"{path}/status", {"status": {"state": "Running"}})
            return
        time.sleep(0.05)


def describe(client: Client, kind: str, name: str, namespace: str) -> str:
    """The job's status and its pods' phases, for an error message."""
    job = client.json("GET", f"{manifests.collection(kind, namespace)}/{name}")
    pods = client.json(
        "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={LABEL_OWNER_NAME}%3D{name}"
    )
    phases = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in pods["items"]}
    return f"status {json.dumps(job.get('status'))[:1500]}, pods {phases}"


def settle(controller: ControllerProcess, quiet: float = 1.5, timeout: float = 60) -> dict:
    """Wait until the controller has not reconciled for ``quiet`` seconds; returns its metrics then."""
    deadline = time.monotonic() + timeout
    last = metrics(controller)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = metrics(controller)
        if reconciles(now) != reconciles(last):
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet:
            return now
    raise TimeoutError(f"the controller kept reconciling for {timeout:.0f}s")


def job_cost(
    cluster: LocalCluster,
    controller: ControllerProcess,
    client: Client,
    kind: str,
    name: str,
    namespace: str,
    seconds: float,
    before: dict,
    timeout: float = 60,
) -> tuple[JobCost, dict]:
    """Create one job, wait until it is terminal, delete it, and wait until the controller is idle again.

    ``before`` is the controller's metrics while idle; returns the job's cost and the metrics once idle again.
    """
    trail = StatusTrail(name)
    watch = Watch(cluster, manifests.collection(kind, namespace), trail.on_event)
    watch.start()
    watch.ready.wait(10)
    stop = threading.Event()
    helper = None
    if kind == "BeamJob":
        flink_client = Client(cluster)
        helper = threading.Thread(target=_play_flink_operator, args=(flink_client, namespace, name, stop))
        helper.start()
    client.json(
        "POST", manifests.collection(kind, namespace), manifests.job(kind, name, namespace, 2, seconds)
    )
    try:
        try:
            wait_for(f"{kind} {name} to finish", lambda: trail.phase in TERMINAL, timeout, 0.05)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; now: {describe(client, kind, name, namespace)}") from None
        settle(controller)
        if trail.phase == "Succeeded":  # the end of a job's life: the user deletes it
            client.json("DELETE", f"{manifests.collection(kind, namespace)}/{name}")
            wait_for(f"{kind} {name} to be deleted", lambda: trail.deleted, timeout, 0.05)
        after = settle(controller)
    finally:
        stop.set()
        if helper is not None:
            helper.join(10)
            flink_client.close()
        watch.stop()
    if trail.phase != "Succeeded":
        raise RuntimeError(f"{kind} {name} ended {trail.phase}, not Succeeded: the run measured a failure")

    def d(**labels: str) -> float:
        return delta(after, before, REQUESTS, **labels)

    events = d(access="write", resource="events")
    cost = JobCost(
        reads=d(access="read"),
        writes=d(access="write") - events,
        events=events,
        creates=d(verb="create", code="201") - d(verb="create", code="201", resource="events"),
        deletes=d(verb="delete", code="200") + d(verb="delete", code="202"),
        transitions=len(trail.states),
    )
    return cost, after


def measure(
    cluster: LocalCluster,
    controller: ControllerProcess,
    runs: int,
    kinds: tuple[str, ...] = manifests.KIND_ORDER,
    seconds: float = 1.0,
    durations: tuple[float, float] = (3.0, 15.0),
) -> list[Figure]:
    client = Client(cluster)
    namespace = "efficiency"
    client.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    costs: dict[str, list[JobCost]] = {kind: [] for kind in kinds}
    growth: dict[float, list[JobCost]] = {d: [] for d in durations}
    idle = settle(controller)
    for run in range(runs):
        for kind in kinds:
            name = f"{kind.lower()}-{run}"
            cost, idle = job_cost(cluster, controller, client, kind, name, namespace, seconds, idle)
            costs[kind].append(cost)
        for duration in durations:
            name = f"growth-{duration:g}s-{run}".replace(".", "-")
            cost, idle = job_cost(cluster, controller, client, "GenericJob", name, namespace, duration, idle)
            growth[duration].append(cost)
        progress(f"efficiency run {run + 1}/{runs} done")
    client.close()

    figures: list[Figure] = []
    for kind in kinds:
        samples = costs[kind]
        figures += [
            Figure(SECTION, f"{kind}: writes (children + status; events apart)", "requests",
                   [c.writes for c in samples], digits=0),
            Figure(SECTION, f"{kind}: minimum writes (children created/deleted + status states)", "requests",
                   [c.minimum for c in samples], digits=0),
            Figure(SECTION, f"{kind}: writes / minimum", "x",
                   [c.writes / c.minimum for c in samples], target=("<=", 1.2), digits=2),
            Figure(SECTION, f"{kind}: Events written", "requests", [c.events for c in samples], digits=0),
            Figure(SECTION, f"{kind}: reads (GET/LIST)", "requests", [c.reads for c in samples],
                   target=("<=", 0.0), digits=0, zero_ok=True),
        ]  # fmt: skip
    short, long = durations
    figures += [
        Figure(SECTION, f"GenericJob running {short:g} s: reads + writes + events", "requests",
               [c.reads + c.writes + c.events for c in growth[short]], digits=0),
        Figure(SECTION, f"GenericJob running {long:g} s: reads + writes + events", "requests",
               [c.reads + c.writes + c.events for c in growth[long]], digits=0),
        Figure(SECTION, f"extra requests per job for {long - short:g} s more running, above each job's "
               "minimum (no polling: 0)", "requests",
               [b.above_minimum - a.above_minimum for a, b in zip(growth[short], growth[long], strict=True)],
               target=("<=", 0.0), digits=0, zero_ok=True),
    ]  # fmt: skip
    return figures
