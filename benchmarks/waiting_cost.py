"""What waiting costs on the Airflow side, T9k trigger vs the cncf-kubernetes polling pattern
(docs/benchmarks.md#3-waiting-cost-on-the-airflow-side).

For each approach, ``tasks`` deferred triggers run in one asyncio loop in a fresh process (``waiters``),
against the same local cluster (API only: no controller or kubelet, so every request the server counts
apart from the benchmark's own comes from that process). Both are given the same poll interval and their
detection latency (status write sent -> event in the triggerer) is measured; the ratio "at equal
detection latency" scales each request rate by its median latency, since a poller's rate is inversely
proportional to its latency. Requests are counted by the API server (``GET /_embedded/requests``) over
the whole wait, from before the first trigger starts until the last has fired (first reads, watch opens,
final reads), per task-minute of waiting; a quiet window in the middle shows the steady state apart.
Memory is the process's RSS.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from benchmarks.api import USER_AGENT, Client, ensure_namespace, request_counts
from benchmarks.stats import Figure, percentile
from t9k_provider.jobs import GROUP, KINDS, VERSION
from t9k_provider.testing import LocalCluster

SECTION = "3. Waiting cost on the Airflow side"
NAMESPACE = "waiting"
APPROACHES = {
    "t9k": "T9kJobTrigger",
    "t9k-queue": "T9kJobTrigger, job waiting in a T9k Queue",
    "cncf": "cncf polling (KubernetesJobTrigger pattern)",
}
#: The Queue of the t9k-queue jobs: full, so each waits in line (its PodGroup not admitted) until it ends.
QUEUE = "bench-queue"
SCHED = "/apis/scheduler.tensorstack.dev/v1beta1"
PLURAL = KINDS["GenericJob"].PLURAL
WARM_UP = 2.0
JOBS = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{PLURAL}"


class Waiters:
    """One ``benchmarks.waiters`` process and the JSON lines it prints."""

    def __init__(self, approach: str, spec_file: Path, log: Path) -> None:
        self.approach = approach
        self.idle_rss = 0  # RSS once imports are done, before any trigger exists
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._log = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.waiters", approach, str(spec_file)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def next(self, timeout: float) -> dict[str, Any]:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.approach} waiters said nothing for {timeout:.0f}s") from None

    def until(self, key: str, timeout: float, seen: list[dict[str, Any]]) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            line = self.next(max(0.1, deadline - time.monotonic()))
            seen.append(line)
            if key in line:
                return line

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._log.close()


def others(counts: dict[tuple[str, str], int], access: str = "") -> int:
    """Requests from every client but the benchmark itself (of one kind of ``access`` if given)."""
    return sum(n for (agent, a), n in counts.items() if agent != USER_AGENT and access in ("", a))


def create_jobs(cluster: LocalCluster, names: list[str], in_queue: bool = False) -> None:
    """Running GenericJobs that nothing advances (no controller): they wait until the benchmark ends them.
    ``in_queue``: Pending instead, each in line in ``QUEUE`` (its PodGroup not admitted, for want of quota),
    as the scheduler leaves a job its Queue holds back, so the wait reads where it stands."""

    def create(name: str) -> None:
        client = Client(cluster)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "GenericJob",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicaSpecs": [{"type": "worker", "template": {"spec": {"containers": [
                {"name": "main", "image": "bench:1"}]}}}]},
        }  # fmt: skip
        if in_queue:
            body["spec"]["scheduler"] = {"t9kScheduler": {"queue": QUEUE}}
            group = {
                "apiVersion": "scheduler.tensorstack.dev/v1beta1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"queue": QUEUE, "minMember": 1, "priority": 0},
            }  # fmt: skip
            client.json("POST", f"{SCHED}/namespaces/{NAMESPACE}/podgroups", group)
            waiting = {"type": "Admitted", "status": "False", "reason": "QuotaExceeded",
                       "message": f"queue {QUEUE}: quota exceeded"}  # fmt: skip
            client.merge_patch(
                f"{SCHED}/namespaces/{NAMESPACE}/podgroups/{name}/status",
                {"status": {"phase": "Pending", "queuePosition": 1, "conditions": [waiting]}},
            )
        client.json("POST", JOBS, body)
        client.merge_patch(
            f"{JOBS}/{name}/status", {"status": {"phase": "Pending" if in_queue else "Running"}}
        )
        client.close()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(create, names))


def finish_jobs(cluster: LocalCluster, names: list[str]) -> dict[str, float]:
    """Set every job Succeeded; returns when each write was sent (wall clock, as the events).

    Sent, not acknowledged: a watch can deliver the change before the writer has read the answer.
    """
    client = Client(cluster)
    sent = {}
    for name in names:
        sent[name] = time.time()
        client.merge_patch(f"{JOBS}/{name}/status", {"status": {"phase": "Succeeded"}})
    client.close()
    return sent


def one_run(
    cluster: LocalCluster, waiters: Waiters, names: list[str], poll: float, window: float
) -> dict[str, float]:
    client = Client(cluster)
    seen: list[dict[str, Any]] = []
    first = request_counts(client)
    waiters.go()
    started = waiters.until("started", poll + 60, seen)
    if started["started"] != len(names):
        raise RuntimeError(f"{waiters.approach}: started {started['started']} of {len(names)} triggers")
    time.sleep(WARM_UP)  # every trigger has made its first request
    before = request_counts(client)
    began = time.monotonic()
    mark = len(seen)
    while time.monotonic() - began < window:
        seen.append(waiters.next(10))
    after = request_counts(client)
    elapsed = time.monotonic() - began
    rss = max(line["rss"] for line in seen[mark:] if "rss" in line)
    if any("event" in line for line in seen):
        raise RuntimeError(f"{waiters.approach}: a trigger fired before its job finished: {seen}")
    sent = finish_jobs(cluster, names)
    done = waiters.until("done", poll * 3 + 60, seen)
    last = request_counts(client)
    client.close()
    fired = {line["event"]: line for line in seen if "event" in line}
    if done["done"] != len(names) or len(fired) != len(names):
        raise RuntimeError(f"{waiters.approach}: {len(fired)} of {len(names)} triggers fired")
    if any(line["status"] != "succeeded" for line in fired.values()):
        raise RuntimeError(f"{waiters.approach}: a trigger reported something other than success")
    latencies = [fired[n]["t"] - sent[n] for n in names]
    waited = sum(fired[n]["t"] - fired[n]["began"] for n in names) / 60  # task-minutes
    return {
        "per_task_minute": (others(last) - others(first)) / waited,
        "watches_per_task_minute": (others(last, "watch") - others(first, "watch")) / waited,
        "window_per_task_minute": (others(after) - others(before)) / len(names) / (elapsed / 60),
        "wait": waited * 60 / len(names),
        "rss": rss,
        "rss_idle": waiters.idle_rss,
        "latency50": percentile(latencies, 50),
        "latency99": percentile(latencies, 99),
    }


def measure(
    cluster: LocalCluster, log_dir: Path, runs: int, tasks: int = 200, poll: float = 5.0, window: float = 15.0
) -> list[Figure]:
    client = Client(cluster)
    ensure_namespace(client, NAMESPACE)
    full = {"apiVersion": "scheduler.tensorstack.dev/v1beta1", "kind": "Queue", "metadata": {"name": QUEUE},
            "spec": {"quota": {"requests": {"cpu": "0"}}}}  # fmt: skip
    client.json("POST", f"{SCHED}/queues", full)
    client.close()
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    plan: list[tuple[str, list[str], Waiters]] = []
    results: dict[str, list[dict[str, float]]] = {a: [] for a in APPROACHES}
    try:
        for run in range(runs):  # start every interpreter now: imports overlap, measurements do not
            for approach in APPROACHES:
                names = [f"{approach}-{run}-{i}" for i in range(tasks)]
                spec = {
                    "kubeconfig": kubeconfig, "kind": "GenericJob", "group": GROUP, "version": VERSION,
                    "plural": PLURAL, "namespace": NAMESPACE, "names": names, "poll_interval": poll,
                    "max_seconds": window + poll * 6 + 120,
                }  # fmt: skip
                spec_file = log_dir / f"waiters-{approach}-{run}.json"
                spec_file.write_text(json.dumps(spec))
                create_jobs(cluster, names, in_queue=approach == "t9k-queue")
                plan.append(
                    (approach, names, Waiters(approach, spec_file, log_dir / f"waiters-{approach}-{run}.log"))
                )
        for _, _, waiters in plan:  # no import may still run while another process is measured
            waiters.idle_rss = waiters.until("ready", 300, [])["rss"]
        for approach, names, waiters in plan:
            results[approach].append(one_run(cluster, waiters, names, poll, window))
            waiters.close()
    finally:
        for _, _, waiters in plan:
            waiters.close()

    figures: list[Figure] = []
    for approach, label in APPROACHES.items():
        r = results[approach]
        figures += [
            Figure(SECTION, f"{label}: API requests per waiting task per minute, whole wait", "requests",
                   [x["per_task_minute"] for x in r], digits=2),
            Figure(SECTION, f"{label}: ... of which watch requests", "requests",
                   [x["watches_per_task_minute"] for x in r], digits=2, zero_ok=True),
            Figure(SECTION, f"{label}: mean wait per task (start spread + warm-up + window + detection)",
                   "s", [x["wait"] for x in r], digits=1),
            Figure(SECTION, f"{label}: requests per task per minute in the quiet {window:g} s window",
                   "requests", [x["window_per_task_minute"] for x in r], digits=2, zero_ok=True),
            Figure(SECTION, f"{label}: triggerer RSS with {tasks} triggers", "MiB",
                   [x["rss"] / 2**20 for x in r], digits=0),
            Figure(SECTION, f"{label}: RSS added per trigger", "KiB",
                   [(x["rss"] - x["rss_idle"]) / tasks / 1024 for x in r], digits=0),
            Figure(SECTION, f"{label}: detection latency p50 (poll every {poll:g} s)", "s",
                   [x["latency50"] for x in r], digits=3),
            Figure(SECTION, f"{label}: detection latency p99", "s", [x["latency99"] for x in r], digits=3),
        ]  # fmt: skip
    pairs = list(zip(results["cncf"], results["t9k"], strict=True))
    raw = [c["per_task_minute"] / t["per_task_minute"] for c, t in pairs]
    # A poller's request rate is inversely proportional to its detection latency (both follow the
    # interval), so requests x latency compares the two at equal detection latency.
    normalized = [
        (c["per_task_minute"] * c["latency50"]) / (t["per_task_minute"] * t["latency50"]) for c, t in pairs
    ]
    queued = [
        q["per_task_minute"] / t["per_task_minute"]
        for t, q in zip(results["t9k"], results["t9k-queue"], strict=True)
    ]
    figures += [
        Figure(SECTION, "requests, T9kJobTrigger in a T9k Queue / not in one, whole wait", "x", queued,
               digits=2),
        Figure(SECTION, "requests, cncf polling / T9kJobTrigger, same poll interval, whole wait", "x", raw,
               digits=2),
        Figure(SECTION, "requests, cncf polling / T9kJobTrigger, at equal detection latency", "x", normalized,
               target=(">=", 10.0), digits=0),
    ]  # fmt: skip
    return figures
