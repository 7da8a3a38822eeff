"""Controller latency and scale with the simulated kubelet (real API server and controller;
docs/benchmarks.md#2-controller-latency-and-scale).

For 1, 50 and 200 GenericJobs of 4 replicas created at once: time from each job's create acknowledgement to
the last of its 4 pods appearing on a pod watch (p50/p99); controller CPU seconds per 1,000 reconciles, from
/proc/<pid>/stat and its reconcile counter; controller RSS with 1,000 such jobs (4,000 pods) in its caches.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import manifests, procstat
from benchmarks.api import Client, Watch, ensure_namespace, paced, progress
from benchmarks.controller_efficiency import settle
from benchmarks.controller_metrics import PREFIX, controller_process, reconciles
from benchmarks.stats import Figure, percentile
from t9k_provider.jobs.contract import LABEL_OWNER_NAME
from t9k_provider.testing import ControllerProcess, LocalCluster, metric_sum, wait_for

SECTION = "2. Controller latency and scale"
NAMESPACE = "scale"
REPLICAS = 4
REQUESTS = f"{PREFIX}_api_requests_total"
CREATORS = 8


class PodTimes:
    """When each job's pods first appeared on the watch."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first_seen: dict[str, dict[str, float]] = defaultdict(dict)
        self.live: set[str] = set()

    def on_event(self, type_: str, obj: dict[str, Any], received: float) -> None:
        meta = obj.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(LABEL_OWNER_NAME)
        with self.lock:
            if type_ == "DELETED":
                self.live.discard(meta.get("name", ""))
                return
            self.live.add(meta.get("name", ""))
            if owner:
                self.first_seen[owner].setdefault(meta["name"], received)

    def complete(self, names: list[str]) -> bool:
        with self.lock:
            return all(len(self.first_seen.get(n, ())) >= REPLICAS for n in names)

    def last_pod(self, name: str) -> float:
        with self.lock:
            return max(self.first_seen[name].values())


def create_jobs(
    cluster: LocalCluster, namespace: str, names: list[str], rate: float | None = None
) -> dict[str, float]:
    """Create the jobs from ``CREATORS`` parallel clients, all at once or, with ``rate``, each at its slot
    (``rate`` per second); returns each job's create acknowledgement time."""
    acked: dict[str, float] = {}

    def create(client: Client, name: str) -> None:
        body = manifests.job("GenericJob", name, namespace, REPLICAS, None)
        client.json("POST", manifests.collection("GenericJob", namespace), body)
        acked[name] = time.perf_counter()

    paced(cluster, names, CREATORS, rate, create)
    return acked


@dataclass
class Burst:
    latencies: list[float]  # job created -> its last pod seen
    controller_cpu: float  # CPU seconds from the first create until the controller is idle again
    server_cpu: float  # the same for the `t9k-local run` process (API server and its internal controllers)
    agents_cpu: float  # the same for its node agents (controllers: scheduler, Job controller...; kubelet)
    reconciles: float
    busy: float  # seconds from the first create until the controller is idle again


def burst(cluster: LocalCluster, controller: ControllerProcess, pods: PodTimes, jobs: int, tag: str) -> Burst:
    """Create ``jobs`` jobs at once and wait until their pods exist and the controller is idle again."""
    agents = cluster.agent_pids()
    assert cluster.pid is not None and agents
    names = [f"{tag}-{i}" for i in range(jobs)]
    idle = settle(controller, quiet=1.0, timeout=300)
    cpu, server_cpu = procstat.cpu_seconds(controller.pid), procstat.cpu_seconds(cluster.pid)
    agents_cpu = sum(procstat.cpu_seconds(pid) for pid in agents)
    started = time.perf_counter()
    acked = create_jobs(cluster, NAMESPACE, names)
    wait_for(f"the pods of {jobs} jobs", lambda: pods.complete(names), 60 + jobs, 0.1)
    latencies = [pods.last_pod(n) - acked[n] for n in names]
    done = settle(controller, quiet=1.0, timeout=300)
    busy = time.perf_counter() - started - 1.0  # minus the quiet second settle() waited for
    return Burst(
        latencies,
        procstat.cpu_seconds(controller.pid) - cpu,
        procstat.cpu_seconds(cluster.pid) - server_cpu,
        sum(procstat.cpu_seconds(pid) for pid in agents) - agents_cpu,
        reconciles(done) - reconciles(idle),
        busy,
    )


IMPORT_PROBE = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print([l for l in open("/proc/self/status") if l.startswith("VmRSS:")][0].split()[1])
"""


def import_rss(*modules: str) -> float:
    """RSS (MiB) of a fresh interpreter once it has imported ``modules``."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, *modules],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(out.stdout.split()[-1]) / 1024


def measure(
    cluster: LocalCluster,
    log_dir: Path,
    runs: int,
    bursts: tuple[int, ...] = (1, 50, 200),
    resident_jobs: int = 1000,
) -> list[Figure]:
    """Bursts accumulate (jobs stay Running, as in a busy cluster) and are then topped up to
    ``resident_jobs``, whose memory is read from the controller that built them and from restarted ones."""
    client = Client(cluster)
    ensure_namespace(client, NAMESPACE)
    pods = PodTimes()
    watch = Watch(cluster, f"/api/v1/namespaces/{NAMESPACE}/pods", pods.on_event)
    watch.start()
    watch.ready.wait(10)
    p50: dict[int, list[float]] = defaultdict(list)
    p99: dict[int, list[float]] = defaultdict(list)
    cpu_per_1000: list[float] = []
    largest: list[Burst] = []  # the last (largest) burst of every run
    rss: list[float] = []
    resync_writes: list[float] = []
    created = 0
    try:
        with controller_process(cluster.kubeconfig, log_dir / "controller-scale.log") as controller:
            for run in range(runs):
                cpu = count = 0.0
                for jobs in bursts:
                    result = burst(cluster, controller, pods, jobs, f"b{jobs}-{run}")
                    p50[jobs].append(percentile(result.latencies, 50))
                    p99[jobs].append(percentile(result.latencies, 99))
                    cpu, count = cpu + result.controller_cpu, count + result.reconciles
                    created += jobs
                cpu_per_1000.append(cpu / count * 1000)
                largest.append(result)
                progress(f"run {run + 1}/{runs}: bursts done")
            names = [f"resident-{i}" for i in range(max(0, resident_jobs - created))]
            create_jobs(cluster, NAMESPACE, names)
            wait_for("the resident jobs' pods", lambda: pods.complete(names), 120 + len(names), 0.5)
            settle(controller, quiet=2.0, timeout=300)
            rss.append(procstat.rss_bytes(controller.pid) / 2**20)
            progress(f"{resident_jobs} resident jobs created and idle")
        for restart in range(runs):
            log = log_dir / f"controller-restart-{restart}.log"
            with controller_process(cluster.kubeconfig, log) as controller:
                settled = settle(controller, quiet=2.0, timeout=300)
                rss.append(procstat.rss_bytes(controller.pid) / 2**20)
                resync_writes.append(metric_sum(settled, REQUESTS, access="write"))
            progress(f"restarted controller {restart + 1}/{runs} synced and idle")
    finally:
        watch.stop()
        client.close()
    resident = max(resident_jobs, created)
    controller_modules = ("t9k_provider.controller.cli", "t9k_provider.controller.reconcile",
                          "t9k_provider.controller.runtime.manager")  # fmt: skip
    imported = [import_rss(*controller_modules) for _ in range(runs)]
    kube_client = [import_rss("kubernetes_asyncio.client") for _ in range(runs)]
    bare = [import_rss() for _ in range(runs)]

    figures: list[Figure] = []
    for jobs in bursts:
        target = ("<", 1.0) if jobs == max(bursts) else None
        figures += [
            Figure(SECTION, f"{jobs} jobs at once: creation -> all 4 pods, p50", "s", p50[jobs], digits=3),
            Figure(
                SECTION, f"{jobs} jobs at once: creation -> all 4 pods, p99", "s", p99[jobs], target, digits=3
            ),
        ]
    top = bursts[-1]
    figures += [
        Figure(SECTION, f"{top} jobs at once: until the controller is idle again", "s",
               [b.busy for b in largest], digits=1),
        Figure(SECTION, f"{top} jobs at once: controller CPU until idle", "CPU s",
               [b.controller_cpu for b in largest], digits=1),
        Figure(SECTION, f"{top} jobs at once: API server CPU until idle", "CPU s",
               [b.server_cpu for b in largest], digits=1),
        Figure(SECTION, f"{top} jobs at once: node agents CPU until idle", "CPU s",
               [b.agents_cpu for b in largest], digits=1),
        Figure(SECTION, "controller CPU per 1,000 reconciles", "CPU s", cpu_per_1000, digits=2),
        Figure(SECTION, f"controller RSS, {resident:,} jobs x {REPLICAS} pods cached", "MiB", rss,
               note="the controller that created them, then restarted ones",
               target=("<", 200.0), digits=0),
        Figure(SECTION, "RSS of an interpreter with the controller's modules imported, no cluster", "MiB",
               imported, digits=0),
        Figure(SECTION, "RSS of an interpreter after import kubernetes_asyncio.client alone", "MiB",
               kube_client, digits=0),
        Figure(SECTION, "RSS of a bare interpreter", "MiB", bare, digits=0),
    ]  # fmt: skip
    if resync_writes:
        name = f"writes by a restarted controller over {resident:,} settled jobs"
        figures.append(
            Figure(SECTION, name, "requests", resync_writes, target=("<=", 0.0), digits=0, zero_ok=True)
        )
    return figures
