"""What following replica logs live costs the triggerer, 200 deferred tasks, logs on vs off
(docs/benchmarks.md#6-live-replica-logs-in-the-triggerer).

An API-only local cluster holds ``tasks`` Running GenericJobs, each with one Running worker pod (created
through the API, its status set by the benchmark: no kubelet, no controller). The benchmark itself writes
each pod's container log in the kubelet's CRI format, one line per pod every ``LINE_INTERVAL`` seconds, so the
API server's ``pods/log`` endpoint serves a growing log exactly as for a real replica. The stand-in triggerer
(``benchmarks.waiters``) runs ``tasks`` ``T9kJobTrigger``-s with ``log_targets`` (on) or without (off); the
lines are written in both, so the difference is what following them costs. CPU is the triggerer process's
user+system time (/proc/PID/stat) over a quiet window while lines flow, RSS its peak in that window; the
server counts the triggerer's requests (one ``pods/log`` stream per followed replica, none while it runs).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from benchmarks.api import USER_AGENT, Client, ensure_namespace, request_counts
from benchmarks.procstat import cpu_seconds
from benchmarks.stats import Figure
from benchmarks.waiting_cost import Waiters
from t9k_provider.jobs import GROUP, KINDS, VERSION
from t9k_provider.jobs.contract import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from t9k_provider.local.kubelet.logs import CriLogWriter
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.testing import LocalCluster

SECTION = "6. Live replica logs in the triggerer"
NAMESPACE = "livelogs"
PLURAL = KINDS["GenericJob"].PLURAL
JOBS = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{PLURAL}"
CONTAINER = "main"
LINE_INTERVAL = 1.0
WARM_UP = 3.0
MODES = {"off": "live logs off", "on": "live logs on"}

METHOD = """\
One API-only local cluster holds 200 Running GenericJobs in one namespace, each with one Running worker pod
created through the API (no kubelet: the benchmark sets the pod status and writes each container's log file
in the kubelet's CRI format, one 60-byte line per pod per second, so `pods/log` serves a growing log as for
a real replica). The stand-in triggerer of section 3 (`benchmarks/waiters.py`) runs 200 `T9kJobTrigger`-s,
started spread over one poll interval, without `log_targets` (off) or following each job's `worker/0` (on),
while the same lines are written in both cases. After a warm-up the triggerer's user+system CPU time
(/proc/PID/stat) and peak RSS are taken over a 20 s window, and the API server counts the triggerer's
requests: log streams opened, and requests of any kind during the window. Then every job is set Succeeded
and its container's exit file written, so the streams end and every trigger fires. The trigger's log lines
go where Airflow's default logging sends them in that process (formatted, to its standard streams): a real
triggerer also formats each line once and hands it to the task-log handler."""

ANALYSIS = """\
Following costs one `follow=true` stream per replica on the triggerer's one shared client (connections are
not capped, so the 200 streams never queue behind each other or behind the watch), opened when the job's
watch event says the replica started (the 602 requests before the window: 200 job reads, the shared
watch's LIST and watch, 200 pod lists and 200 log streams), and no request after that: the window shows no
request in either mode, and every line written reached the triggers' log (lines in flight at the window's
edges make the ratio move by a few percent). The CPU added is the triggerer reading, parsing and logging
the lines as they arrive: about 1.5 % of a core for 200 lines a second here, so it scales with the log
volume, not with the number of waiting tasks or with time; a replica printing one line per epoch costs
next to nothing. The memory added, about 230 KiB per followed replica, is each stream's connection (TLS
state and read buffers); a task following several replicas (`log_replicas="all"`) pays it per replica, at
most 8 per task."""


def create_jobs(
    cluster: LocalCluster, names: list[str], namespace: str = NAMESPACE
) -> dict[str, dict[str, Any]]:
    """Running jobs, each with a Running worker-0 pod; returns the pods by job name."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    jobs = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    pods = f"/api/v1/namespaces/{namespace}/pods"

    def create(name: str) -> tuple[str, dict[str, Any]]:
        client = Client(cluster)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "GenericJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicaSpecs": [{"type": "worker", "template": {"spec": {"containers": [
                {"name": CONTAINER, "image": "bench:1"}]}}}]},
        }  # fmt: skip
        client.json("POST", jobs, body)
        client.merge_patch(f"{jobs}/{name}/status", {"status": {"phase": "Running"}})
        owner, _, value = pod_selector("GenericJob", name).partition("=")
        labels = {owner: value, LABEL_REPLICA_TYPE: "worker", LABEL_REPLICA_INDEX: "0"}
        pod = client.json("POST", pods, {
            "metadata": {"name": f"{name}-worker-0", "labels": labels},
            "spec": {"containers": [{"name": CONTAINER, "image": "bench:1"}]},
        })  # fmt: skip
        state = {"running": {"startedAt": now}}
        running = {"name": CONTAINER, "ready": True, "restartCount": 0, "state": state}
        status = {"phase": "Running", "containerStatuses": [running]}
        client.merge_patch(f"{pods}/{pod['metadata']['name']}/status", {"status": status})
        client.close()
        return name, pod

    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(create, names))


class LogWriters(threading.Thread):
    """Appends one line to every pod's log every ``interval`` s until ``stop()``; ``finish()`` ends them."""

    def __init__(
        self, cluster: LocalCluster, pods: list[dict[str, Any]], interval: float = LINE_INTERVAL
    ) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.attempts = [PodDir.of(cluster.state_dir, p).container(CONTAINER).attempt(0) for p in pods]
        for attempt in self.attempts:
            attempt.directory.mkdir(parents=True, exist_ok=True)
        self.writers = [CriLogWriter(a.log) for a in self.attempts]
        self.lines = 0
        self._stopping = threading.Event()

    def run(self) -> None:
        step = 0
        while not self._stopping.wait(self.interval):
            for writer in self.writers:
                line = f"epoch {step} loss=0.{step % 1000:06d} rank=0 world_size=1\n"
                writer.write("stdout", line.encode())
            self.lines += len(self.writers)
            step += 1

    def stop(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(10)

    def finish(self) -> None:
        """The containers exit: their logs are complete, so the streams on them end."""
        for writer, attempt in zip(self.writers, self.attempts, strict=True):
            writer.close()
            attempt.write_exit_code(0)


class LoggingWaiters(Waiters):
    """The stand-in triggerer, also counting the replica lines its triggers logged (to its stdout)."""

    def __init__(self, spec_file: Path, log: Path) -> None:
        self.replica_lines = 0
        super().__init__("t9k", spec_file, log)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))
            elif f"/{CONTAINER}] epoch " in line:
                self.replica_lines += 1


def triggerer_requests(counts: dict[tuple[str, str], int]) -> int:
    """Requests of the triggerer (every client but the benchmark): reads include the log streams."""
    return sum(n for (agent, _), n in counts.items() if agent != USER_AGENT)


class Run:
    """One measured triggerer: its jobs and pods, and its interpreter, started ahead of the measurement."""

    def __init__(
        self, cluster: LocalCluster, work: Path, mode: str, run: int, tasks: int, poll: float, window: float
    ) -> None:
        self.cluster, self.mode, self.poll, self.window = cluster, mode, poll, window
        self.names = [f"{mode}-{run}-{i}" for i in range(tasks)]
        self.pods = create_jobs(cluster, self.names)
        spec = {
            "kubeconfig": yaml.safe_load(cluster.kubeconfig.read_text()), "kind": "GenericJob",
            "plural": PLURAL, "namespace": NAMESPACE, "names": self.names, "poll_interval": poll,
            "max_seconds": window + poll * 6 + 120, "log_targets": [["worker", 0]] if mode == "on" else None,
        }  # fmt: skip
        spec_file = work / f"livelogs-{mode}-{run}.json"
        spec_file.write_text(json.dumps(spec))
        self.waiters = LoggingWaiters(spec_file, work / f"livelogs-{mode}-{run}.log")

    def measure(self) -> dict[str, float]:
        waiters, client = self.waiters, Client(self.cluster)
        writers = LogWriters(self.cluster, [self.pods[n] for n in self.names])
        seen: list[dict[str, Any]] = []
        try:
            first = request_counts(client)
            writers.start()
            waiters.go()
            waiters.until("started", self.poll + 60, seen)
            time.sleep(WARM_UP)
            before, cpu_before = request_counts(client), cpu_seconds(waiters.proc.pid)
            began = time.monotonic()
            mark, written, logged = len(seen), writers.lines, waiters.replica_lines
            while time.monotonic() - began < self.window:
                seen.append(waiters.next(10))
            elapsed = time.monotonic() - began
            cpu = cpu_seconds(waiters.proc.pid) - cpu_before
            after = request_counts(client)
            rss = max(line["rss"] for line in seen[mark:] if "rss" in line)
            lines_per_second = (writers.lines - written) / elapsed
            delivered = (waiters.replica_lines - logged) / max(1, writers.lines - written)
            writers.stop()
            writers.finish()
            for name in self.names:
                client.merge_patch(f"{JOBS}/{name}/status", {"status": {"phase": "Succeeded"}})
            done = waiters.until("done", self.poll * 3 + 60, seen)
            if done["done"] != len(self.names):
                fired = f"{done['done']} of {len(self.names)}"
                raise RuntimeError(f"live logs {self.mode}: {fired} triggers fired")
        finally:
            writers.stop()
            client.close()
            waiters.close()
        return {
            "cpu": cpu / elapsed * 100,
            "rss": rss,
            "streams": triggerer_requests(before) - triggerer_requests(first),
            "window_requests": triggerer_requests(after) - triggerer_requests(before),
            "lines": lines_per_second,
            "delivered": delivered,
        }


def measure(
    cluster: LocalCluster, work: Path, runs: int, tasks: int = 200, poll: float = 10.0, window: float = 20.0
) -> list[Figure]:
    client = Client(cluster)
    ensure_namespace(client, NAMESPACE)
    client.close()
    plan = [Run(cluster, work, mode, run, tasks, poll, window) for run in range(runs) for mode in MODES]
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    try:
        for r in plan:  # every interpreter has imported (and compiled) everything before any is measured
            r.waiters.until("ready", 300, [])
        for r in plan:
            results[r.mode].append(r.measure())
    finally:
        for r in plan:
            r.waiters.close()
    figures: list[Figure] = []
    for mode, label in MODES.items():
        r = results[mode]
        figures += [
            Figure(SECTION, f"{label}: triggerer CPU with {tasks} deferred tasks", "% of a core",
                   [x["cpu"] for x in r], digits=1, zero_ok=True),  # a tiny run may not last a clock tick
            Figure(SECTION, f"{label}: triggerer RSS with {tasks} deferred tasks", "MiB",
                   [x["rss"] / 2**20 for x in r], digits=0),
            Figure(SECTION, f"{label}: triggerer requests during the {window:g} s window", "requests",
                   [x["window_requests"] for x in r], digits=0, zero_ok=True),
        ]  # fmt: skip
    on, off = results["on"], results["off"]
    figures += [
        Figure(SECTION, "live logs on: requests before the window (reads, watch, pod lists, log streams)",
               "requests", [x["streams"] for x in on], digits=0),
        Figure(SECTION, "log lines written (all replicas)", "lines/s", [x["lines"] for x in on], digits=0),
        Figure(SECTION, "live logs on: lines logged by the triggers / lines written, in the window", "x",
               [x["delivered"] for x in on], digits=2),
        Figure(SECTION, "CPU added by following, per 1,000 log lines a second", "% of a core",
               [(a["cpu"] - b["cpu"]) / (a["lines"] / 1000) for a, b in zip(on, off, strict=True)],
               digits=1, zero_ok=True),
        Figure(SECTION, "RSS added by following, per followed replica", "KiB",
               [(a["rss"] - b["rss"]) / tasks / 1024 for a, b in zip(on, off, strict=True)], digits=0,
               zero_ok=True),
    ]  # fmt: skip
    return figures
