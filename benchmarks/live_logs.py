"""What following replica logs live costs the triggerer, 200 deferred tasks: logs off, on, and on with
progress reports for lines (docs/benchmarks.md#6-live-replica-logs-in-the-triggerer).

An API-only local cluster holds ``tasks`` Running GenericJobs, each with one Running worker pod (created
through the API, its status set by the benchmark: no kubelet, no controller). The benchmark itself writes each
pod's container log in the kubelet's CRI format, one line per pod every ``LINE_INTERVAL`` seconds, so the API
server's ``pods/log`` endpoint serves a growing log exactly as for a real replica. The stand-in triggerer
(``benchmarks.waiters``) runs ``tasks`` ``T9kJobTrigger``-s with ``log_targets`` (on) or without (off); the
lines are written in both, so the difference is what following them costs. In ``progress`` the lines are
``t9k_provider.progress`` reports and the triggers also get the replica as their ``leader`` and a
``progress_timeout`` that never fires: reading progress must add no request to ``on``, and every trigger's
event must carry what it read. CPU is the triggerer process's user+system time (/proc/PID/stat) over a quiet
window while lines flow, RSS its peak in that window; the server counts the triggerer's requests (one
``pods/log`` stream per followed replica, none while it runs).
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
from t9k_provider.local.kubelet.crilog import CriLogWriter
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.progress import MARKER
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.testing import LocalCluster

SECTION = "6. Live replica logs in the triggerer"
NAMESPACE = "livelogs"
PLURAL = KINDS["GenericJob"].PLURAL
JOBS = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{PLURAL}"
CONTAINER = "main"
LINE_INTERVAL = 1.0
WARM_UP = 3.0
MODES = {"off": "live logs off", "on": "live logs on", "progress": "live logs on, reporting progress"}
#: ``total`` of the reports written in mode progress (never reached: the steps count seconds)
TOTAL_STEPS = 100_000
#: ``progress_timeout`` in mode progress: never fires in a run, though each look computes the stall deadline
PROGRESS_TIMEOUT = 3600.0

METHOD = """\
One API-only local cluster holds 200 Running GenericJobs in one namespace, each with one Running worker pod
created through the API (no kubelet: the benchmark sets the pod status and writes each container's log file
in the kubelet's CRI format, one 60-byte line per pod per second, so `pods/log` serves a growing log as for
a real replica). The stand-in triggerer of section 3 (`benchmarks/waiters.py`) runs 200 `T9kJobTrigger`-s,
started spread over one poll interval, without `log_targets` (off) or following each job's `worker/0` (on),
while the same lines are written in both cases. A third mode (reporting progress) follows the same replica,
writing progress reports as `t9k_provider.progress.report(step, 100000, loss=...)` prints them (about 70
bytes; the step counts the seconds), and gives each trigger that replica as its `leader` and
`progress_timeout=3600` s, so every look also computes the stall deadline, which never passes. After a
warm-up the triggerer's user+system CPU time (/proc/PID/stat) and peak RSS are taken over a 20 s window,
and the API server counts the triggerer's requests: log streams opened, and requests of any kind during the
window. Then every job is set Succeeded and its container's exit file written, so the streams end and every
trigger fires; the run fails unless, with progress reports, every trigger's event carries the progress it
read (a step above 0) and no report reached the task log as a plain line. The trigger's log lines go where
Airflow's default logging sends them in that process (formatted, to its standard streams): a real triggerer
also formats each line once and hands it to the task-log handler."""

ANALYSIS = """\
Following costs one `follow=true` stream per replica on the triggerer's one shared client (connections are not
capped, so the 200 streams never queue behind each other or behind the watch), opened when the job's watch
event says the replica started (the 602 requests before the window: 200 job reads, the shared watch's LIST and
watch, 200 pod lists and 200 log streams), and no request after that: the window shows no request in any mode,
and every line written reached the triggers' log (lines in flight at the window's edges make the ratio move by
a few percent). The CPU added is the triggerer reading, parsing and logging the lines as they arrive (a few %
of a core for 200 lines a second here; the table gives it per 1,000), so it scales with the log volume, not
with the number of waiting tasks or with time; a replica printing one line per epoch costs next to nothing.
The memory added, about 300 KiB per followed replica, is each stream's connection (TLS state and read
buffers); a task following several replicas (`log_replicas="all"`) pays it per replica, at most 8 per task.
Reading progress costs no request: the reports come on the leader's stream the task follows anyway, so the
requests with progress reports equal those of live logs on, before and during the window, and the stall
deadline is computed from the state the trigger already holds. Each report is parsed (one small JSON object)
instead of being logged, and the task log gets one progress line (step, rate, ETA, metrics) every 5-6 s
per trigger (at most one per 5 s) instead of one line per report, so following reports costs about the CPU of
following as many plain lines (the two CPU rows per 1,000 lines)."""


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
        # as the controller writes it: Running, and the replica with its container started
        replica = {"name": f"{name}-worker-0", "phase": "Running",
                   "containers": [{"name": CONTAINER, "state": "running"}]}  # fmt: skip
        job_status = {
            "phase": "Running", "tasks": [{"type": "worker", "status": [replica]}],
            "conditions": [{"type": "Running", "status": "True", "lastTransitionTime": now}],
        }  # fmt: skip
        client.merge_patch(f"{jobs}/{name}/status", {"status": job_status})
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


def progress_line(step: int) -> str:
    """The line ``t9k_provider.progress.report(step, TOTAL_STEPS, loss=...)`` writes (built here as it builds
    it, not by redirecting the process's stdout from a thread; tests/benchmarks compares the two)."""
    body = {"step": step, "total": TOTAL_STEPS, "metrics": {"loss": round(1.0 / (step + 1), 6)}}
    return f"{MARKER} {json.dumps(body, separators=(',', ':'), allow_nan=False)}\n"


class LogWriters(threading.Thread):
    """Appends one line to every pod's log every ``interval`` s until ``stop()``; ``finish()`` ends them.
    ``progress``: the lines are progress reports (``progress_line``), their step the line's number."""

    def __init__(
        self,
        cluster: LocalCluster,
        pods: list[dict[str, Any]],
        interval: float = LINE_INTERVAL,
        *,
        progress: bool = False,
    ) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.progress = progress
        self.last_step = -1  # the step of the latest line written
        self.attempts = [PodDir.of(cluster.state_dir, p).container(CONTAINER).attempt(0) for p in pods]
        for attempt in self.attempts:
            attempt.directory.mkdir(parents=True, exist_ok=True)
        self.writers = [CriLogWriter(a.log) for a in self.attempts]
        self.lines = 0
        self._stopping = threading.Event()

    def run(self) -> None:
        step = 0
        while not self._stopping.wait(self.interval):
            if self.progress:
                line = progress_line(step)
            else:
                line = f"epoch {step} loss=0.{step % 1000:06d} rank=0 world_size=1\n"
            for writer in self.writers:
                writer.write("stdout", line.encode())
            self.lines += len(self.writers)
            self.last_step = step
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
    """The stand-in triggerer, also counting the replica lines and the progress lines its triggers logged (to
    its stdout)."""

    def __init__(self, spec_file: Path, log: Path) -> None:
        self.replica_lines = self.progress_lines = self.raw_reports = 0
        super().__init__("t9k", spec_file, log)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))
            elif f"/{CONTAINER}] epoch " in line:
                self.replica_lines += 1
            elif "progress: step " in line:
                self.progress_lines += 1
            elif f"/{CONTAINER}] {MARKER} " in line:  # a report shown as a plain line: not parsed
                self.raw_reports += 1


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
        reporting = mode == "progress"
        spec = {
            "kubeconfig": yaml.safe_load(cluster.kubeconfig.read_text()), "kind": "GenericJob",
            "plural": PLURAL, "namespace": NAMESPACE, "names": self.names, "poll_interval": poll,
            "max_seconds": window + poll * 6 + 120, "log_targets": [["worker", 0]] if mode != "off" else None,
            "leader": ["worker", 0] if reporting else None,
            "limits": {"progress_timeout": PROGRESS_TIMEOUT} if reporting else None,
        }  # fmt: skip
        spec_file = work / f"livelogs-{mode}-{run}.json"
        spec_file.write_text(json.dumps(spec))
        self.waiters = LoggingWaiters(spec_file, work / f"livelogs-{mode}-{run}.log")

    def measure(self) -> dict[str, float]:
        waiters, client = self.waiters, Client(self.cluster)
        pods = [self.pods[n] for n in self.names]
        writers = LogWriters(self.cluster, pods, progress=self.mode == "progress")
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
            progress_logged = waiters.progress_lines
            while time.monotonic() - began < self.window:
                seen.append(waiters.next(10))
            elapsed = time.monotonic() - began
            cpu = cpu_seconds(waiters.proc.pid) - cpu_before
            after = request_counts(client)
            rss = max(line["rss"] for line in seen[mark:] if "rss" in line)
            lines_per_second = (writers.lines - written) / elapsed
            delivered = (waiters.replica_lines - logged) / max(1, writers.lines - written)
            progress_lines = (waiters.progress_lines - progress_logged) / len(self.names) / (elapsed / 60)
            steps = self.finish(client, writers, seen)
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
            "progress_lines": progress_lines,
            "saw_progress": sum(1 for s in steps if s is not None and s > 0),
            "saw_last": sum(1 for s in steps if s == writers.last_step),
        }

    def finish(self, client: Client, writers: LogWriters, seen: list[dict[str, Any]]) -> list[Any]:
        """Ends the logs and the jobs, so every trigger fires; the step each trigger's event carried (None:
        no progress). Fails unless all fired, and, in mode progress, unless all read reports and none showed
        a report as a plain line."""
        writers.stop()
        writers.finish()
        for name in self.names:
            client.merge_patch(f"{JOBS}/{name}/status", {"status": {"phase": "Succeeded"}})
        done = self.waiters.until("done", self.poll * 3 + 60, seen)
        if done["done"] != len(self.names):
            raise RuntimeError(f"live logs {self.mode}: {done['done']} of {len(self.names)} triggers fired")
        steps = [line.get("step") for line in seen if "event" in line]
        saw = sum(1 for s in steps if s is not None and s > 0)
        if self.mode == "progress" and (saw != len(self.names) or self.waiters.raw_reports):
            raise RuntimeError(
                f"live logs progress: {saw} of {len(self.names)} events carried a report with step > 0, "
                f"{self.waiters.raw_reports} report lines were logged as plain lines"
            )
        if self.mode != "progress" and saw:
            raise RuntimeError(f"live logs {self.mode}: {saw} events carried progress (no leader was given)")
        return steps


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
    return figures(results, tasks, window)


def figures(results: dict[str, list[dict[str, float]]], tasks: int, window: float) -> list[Figure]:
    """The section's figures from each mode's runs."""
    out: list[Figure] = []
    for mode, label in MODES.items():
        r = results[mode]
        out += [
            Figure(SECTION, f"{label}: triggerer CPU with {tasks} deferred tasks", "% of a core",
                   [x["cpu"] for x in r], digits=1, zero_ok=True),  # a tiny run may not last a clock tick
            Figure(SECTION, f"{label}: triggerer RSS with {tasks} deferred tasks", "MiB",
                   [x["rss"] / 2**20 for x in r], digits=0),
            Figure(SECTION, f"{label}: triggerer requests during the {window:g} s window", "requests",
                   [x["window_requests"] for x in r], digits=0, zero_ok=True),
        ]  # fmt: skip
    for mode in ("on", "progress"):
        before = f"{MODES[mode]}: requests before the window (reads, watch, pod lists, log streams)"
        out.append(Figure(SECTION, before, "requests", [x["streams"] for x in results[mode]], digits=0))
    on, off, progress = results["on"], results["off"], results["progress"]

    def total(run: dict[str, float]) -> float:  # every request of the triggerer until the window's end
        return run["streams"] + run["window_requests"]

    out += [
        Figure(SECTION, "reporting progress: triggerer requests over live logs on's, to the window's end",
               "requests", [total(p) - total(a) for p, a in zip(progress, on, strict=True)],
               target=("<=", 0.0), digits=0, zero_ok=True),
        Figure(SECTION, "log lines written (all replicas)", "lines/s", [x["lines"] for x in on], digits=0),
        Figure(SECTION, "live logs on: lines logged by the triggers / lines written, in the window", "x",
               [x["delivered"] for x in on], digits=2),
        Figure(SECTION, f"reporting progress: triggers whose event carried a report (step > 0), of {tasks}",
               "triggers", [x["saw_progress"] for x in progress], digits=0),
        Figure(SECTION, f"reporting progress: triggers whose event carried the last report, of {tasks}",
               "triggers", [x["saw_last"] for x in progress], digits=0, zero_ok=True),
        Figure(SECTION, "reporting progress: progress lines in the task log per trigger per minute, in the "
               "window", "lines", [x["progress_lines"] for x in progress], digits=1, zero_ok=True),
        Figure(SECTION, "CPU added by following, per 1,000 log lines a second", "% of a core",
               [(a["cpu"] - b["cpu"]) / (a["lines"] / 1000) for a, b in zip(on, off, strict=True)],
               digits=1, zero_ok=True),
        Figure(SECTION, "CPU added by following progress reports, per 1,000 report lines a second",
               "% of a core",
               [(a["cpu"] - b["cpu"]) / (a["lines"] / 1000) for a, b in zip(progress, off, strict=True)],
               digits=1, zero_ok=True),
        Figure(SECTION, "RSS added by following, per followed replica", "KiB",
               [(a["rss"] - b["rss"]) / tasks / 1024 for a, b in zip(on, off, strict=True)], digits=0,
               zero_ok=True),
    ]  # fmt: skip
    return out
