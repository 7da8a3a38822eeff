"""The controller holding many jobs (each 4 pods) under the simulated kubelet
(docs/benchmarks.md#8-controller-at-scale, #9-controller-at-full-scale).

``jobs`` GenericJobs of 4 replicas (which keep running) are created first from 8 client threads, with the
controller running. Then, per run: a freshly started controller syncs them all (time from its start until it
has reconciled every job and then stayed quiet for ``QUIET`` seconds, and its writes meanwhile, which must
be 0); jobs arrive at ``ARRIVAL_RATE`` per second for ``arrival_seconds`` (the reconcile time p99 from its
histogram, interpolated within a bucket, and creation -> all 4 pods p99 from a pod watch; the reconciles and
status writes per arriving job, from its counters, over the same window); its RSS once idle again. Finally
a fresh process measures the informer cache per object against the objects' JSON size.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import manifests, procstat
from benchmarks.api import Client, Watch, ensure_namespace, progress
from benchmarks.controller_efficiency import settle
from benchmarks.controller_metrics import PREFIX, controller_process, delta, metrics, reconciles
from benchmarks.controller_scale import REPLICAS, REQUESTS, PodTimes, create_jobs
from benchmarks.stats import Figure, percentile
from t9k_provider.testing import ControllerProcess, LocalCluster, metric_sum, none_left, wait_for

SECTIONS = ("8. Controller at scale", "9. Controller at full scale")
NAMESPACE = "capacity"
ARRIVAL_RATE = 20.0  # jobs per second
QUIET = 3.0
HISTOGRAM = f"{PREFIX}_reconcile_duration_seconds"
STATUS_WRITES = f"{PREFIX}_status_writes_total"


class JobPhases:
    """Each job's phase, as a watch on the jobs last showed it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.phase: dict[str, str] = {}

    def on_event(self, type_: str, obj: dict[str, Any], _received: float) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        with self.lock:
            self.phase[name] = "" if type_ == "DELETED" else (obj.get("status") or {}).get("phase") or ""

    def short_of(self, count: int) -> str | None:
        """None once ``count`` jobs are Running; else how many are, and the first few that are not."""
        with self.lock:
            running = sum(p == "Running" for p in self.phase.values())
            if running >= count:
                return None
            others = sorted((n, p) for n, p in self.phase.items() if p != "Running")[:5]
        return f"{running:,} of {count:,} Running as the watch saw them; not Running: {others}"


def quiet(controller: ControllerProcess, phases: JobPhases, jobs: int) -> dict:
    """Wait until every job's status says Running (the controller has written what it must; the pods exist
    long before), then until the controller has been quiet for ``QUIET`` seconds; returns its metrics."""
    wait_for(f"{jobs} jobs Running", none_left(lambda: phases.short_of(jobs)), 1200, 1.0)
    return settle(controller, quiet=QUIET, timeout=600)


def histogram_percentile(
    after: dict[tuple[str, frozenset[tuple[str, str]]], float],
    before: dict[tuple[str, frozenset[tuple[str, str]]], float],
    q: float,
) -> float:
    """The ``q`` quantile (0..1) of the reconciles between two scrapes, interpolated linearly within its
    bucket (as Prometheus' histogram_quantile does)."""
    buckets: dict[float, float] = {}
    for (name, labels), value in after.items():
        if name == f"{HISTOGRAM}_bucket":
            bound = float(dict(labels)["le"])
            buckets[bound] = buckets.get(bound, 0.0) + value - before.get((name, labels), 0.0)
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    if total <= 0:
        raise ValueError("no reconcile between the two scrapes")
    rank, lower, below = q * total, 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(buckets[bound] - below, 1e-9)
        lower, below = bound, buckets[bound]
    return lower


def restart_and_sync(cluster: LocalCluster, log: Path, jobs: int) -> tuple[ControllerProcess, float, float]:
    """Start a controller; returns it, the seconds until it had reconciled every job and went quiet, and
    the writes it made meanwhile."""
    controller = controller_process(cluster.kubeconfig, log)
    began = time.monotonic()
    controller.start().wait_ready(600)
    last, last_change = metrics(controller), time.monotonic()
    deadline = began + 1200
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = metrics(controller)
        if reconciles(now) != reconciles(last):
            last, last_change = now, time.monotonic()
        elif reconciles(now) >= jobs and time.monotonic() - last_change >= QUIET:
            return controller, last_change - began, metric_sum(now, REQUESTS, access="write")
    controller.stop()
    raise TimeoutError(f"a restarted controller did not settle over {jobs} jobs in 20 minutes")


def informer_memory(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.informer_memory", str(cluster.kubeconfig)],
        capture_output=True, text=True, timeout=900, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def measure(work: Path, runs: int, jobs: int, arrival_seconds: float, full: bool = False) -> list[Figure]:
    section = SECTIONS[full]
    sync_seconds: list[float] = []
    sync_writes: list[float] = []
    reconcile_p99: list[float] = []
    reconcile_p50: list[float] = []
    arrival_p99: list[float] = []
    writes_per_job: list[float] = []
    reconciles_per_job: list[float] = []
    rss: list[float] = []
    memory: list[dict[str, dict[str, float]]] = []
    arrivals = round(ARRIVAL_RATE * arrival_seconds)
    # thousands of simulated pods: room for them all on the one node
    with LocalCluster(
        work / f"capacity-cluster-{jobs}", kubelet="simulated", capacity={"max_pods": "100000"}
    ) as cluster:
        client = Client(cluster)
        ensure_namespace(client, NAMESPACE)
        client.close()
        pods, phases = PodTimes(), JobPhases()
        watches = [
            Watch(cluster, f"/api/v1/namespaces/{NAMESPACE}/pods", pods.on_event),
            Watch(cluster, manifests.collection("GenericJob", NAMESPACE), phases.on_event),
        ]
        for watch in watches:
            watch.start()
            watch.ready.wait(10)
        try:
            with controller_process(cluster.kubeconfig, work / f"capacity-{jobs}-build.log") as controller:
                names = [f"held-{i}" for i in range(jobs)]
                for i in range(0, jobs, 500):  # in slices: a timeout names how far it got
                    done = names[: i + 500]
                    create_jobs(cluster, NAMESPACE, done[i:])
                    wait_for(f"the pods of {len(done)} jobs", lambda done=done: pods.complete(done), 600, 0.5)
                    progress(f"{len(done):,}/{jobs:,} jobs created, their pods running")
                quiet(controller, phases, jobs)
            held = jobs
            for run in range(runs):
                log = work / f"capacity-{jobs}-run{run}.log"
                controller, seconds, writes = restart_and_sync(cluster, log, held)
                try:
                    sync_seconds.append(seconds)
                    sync_writes.append(writes)
                    progress(
                        f"run {run + 1}/{runs}: a restarted controller synced {held:,} jobs, {seconds:.1f} s"
                    )
                    before = metrics(controller)
                    names = [f"arrival-{run}-{i}" for i in range(arrivals)]
                    acked = create_jobs(cluster, NAMESPACE, names, ARRIVAL_RATE)
                    wait_for("the arrivals' pods", lambda names=names: pods.complete(names), 300, 0.2)
                    held += arrivals
                    after = quiet(controller, phases, held)
                    reconcile_p99.append(histogram_percentile(after, before, 0.99))
                    reconcile_p50.append(histogram_percentile(after, before, 0.50))
                    arrival_p99.append(percentile([pods.last_pod(n) - acked[n] for n in names], 99))
                    writes_per_job.append(delta(after, before, STATUS_WRITES, outcome="written") / arrivals)
                    reconciles_per_job.append((reconciles(after) - reconciles(before)) / arrivals)
                    rss.append(procstat.rss_bytes(controller.pid) / 2**20)
                finally:
                    controller.stop()
            for _ in range(runs):
                memory.append(informer_memory(cluster))
            progress(f"informer memory measured over {held:,} jobs")
        finally:
            for watch in watches:
                watch.stop()
    figures = [
        Figure(section, f"controller RSS once idle after the arrivals ({jobs + arrivals:,}-{held:,} jobs x "
               f"{REPLICAS} pods cached)", "MiB", rss, ("<", 1024.0), digits=0),
        Figure(section, f"restarted controller: start -> every job reconciled and quiet ({jobs:,}-"
               f"{held - arrivals:,} jobs)", "s", sync_seconds, digits=1),
        Figure(section, "restarted controller: writes until it is quiet", "requests", sync_writes,
               ("<=", 0.0), digits=0, zero_ok=True),
        Figure(section, f"{ARRIVAL_RATE:g} jobs/s for {arrival_seconds:g} s: reconcile time p50", "s",
               reconcile_p50, digits=3),
        Figure(section, f"{ARRIVAL_RATE:g} jobs/s for {arrival_seconds:g} s: reconcile time p99", "s",
               reconcile_p99, digits=3),
        Figure(section, f"{ARRIVAL_RATE:g} jobs/s for {arrival_seconds:g} s: creation -> all 4 pods, p99",
               "s", arrival_p99, digits=3),
        Figure(section, f"{ARRIVAL_RATE:g} jobs/s for {arrival_seconds:g} s: reconciles per arriving job",
               "reconciles", reconciles_per_job, digits=1),
        Figure(section, f"{ARRIVAL_RATE:g} jobs/s for {arrival_seconds:g} s: status writes per arriving job",
               "writes", writes_per_job, digits=1),
    ]  # fmt: skip
    for kind in ("GenericJob", "Pod"):
        per_object = [m[kind]["bytes_per_object"] for m in memory]
        json_size = [m[kind]["json_bytes_per_object"] for m in memory]
        figures += [
            Figure(section, f"informer cache per {kind}", "bytes", per_object, digits=0),
            Figure(section, f"{kind} JSON size (compact)", "bytes", json_size, digits=0),
            Figure(section, f"informer cache per {kind} / its JSON size", "x",
                   [a / b for a, b in zip(per_object, json_size, strict=True)], digits=1),
        ]  # fmt: skip
    return figures
