"""The embedded local cluster's API server on this machine (docs/benchmarks.md#4-local-cluster).

Its figures also fill the table of docs/local-cluster.md#performance-on-the-build-machine.

Creates per second (one client, and four in parallel), LIST latency with 10,000 objects, watch delivery
latency (commit acknowledged -> event received), then the same after 100,000 more writes to the event log,
which compaction must keep bounded. Runs against a fresh API-only cluster in a temporary directory, over
HTTPS with keep-alive.

The 100,000 writes go through the server's storage layer (``Store.update``, the same commit and compaction
path every API write takes) while the server is stopped: through HTTP they would take several minutes of the
benchmark's budget and measure the create rate again.

    .venv/bin/python -m benchmarks.local_cluster [--objects 10000] [--log-writes 100000]
"""

from __future__ import annotations

import argparse
import copy
import json
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.api import Client, ensure_namespace
from benchmarks.stats import Figure, percentile
from t9k_provider.local.storage.store import Store
from t9k_provider.testing import LocalCluster

SECTION = "4. Local cluster"
NAMESPACE = "bench"


def configmap(name: str, i: int) -> dict:
    return {
        "metadata": {"name": name, "labels": {"bench": "yes", "shard": str(i % 10)}},
        "data": {"payload": "x" * 200, "index": str(i)},
    }


def create_many(cluster: LocalCluster, namespace: str, prefix: str, count: int, workers: int) -> float:
    """Create ``count`` configmaps with ``workers`` parallel clients; returns creates per second."""
    per_worker = count // workers
    failures: list[str] = []

    def work(w: int) -> None:
        client = Client(cluster)
        for i in range(per_worker):
            status, body = client.call(
                "POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap(f"{prefix}-{w}-{i}", i)
            )
            if status != 201:
                failures.append(f"create failed: {status} {body[:200]!r}")
                break
        client.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError(failures[0])
    return per_worker * workers / (time.perf_counter() - started)


def timed(action: Callable[[], object], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def watch_latency(cluster: LocalCluster, namespace: str, prefix: str, events: int) -> list[float]:
    """Create objects one by one while a watch is open; latency = event received - create acknowledged."""
    acked: dict[str, float] = {}
    received: dict[str, float] = {}
    ready = threading.Event()
    client = Client(cluster)
    _, body = client.call("GET", f"/api/v1/namespaces/{namespace}/configmaps?limit=1")
    rv = json.loads(body)["metadata"]["resourceVersion"]

    def watcher() -> None:
        conn = cluster.connection(60)
        conn.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=60",
            headers={"Authorization": f"Bearer {cluster.token}"},
        )
        resp = conn.getresponse()
        ready.set()
        while len(received) < events:
            line = resp.readline()
            if not line:
                break
            event = json.loads(line)
            received[event["object"]["metadata"]["name"]] = time.perf_counter()
        conn.close()

    thread = threading.Thread(target=watcher)
    thread.start()
    ready.wait(10)
    for i in range(events):
        name = f"{prefix}-{i}"
        status, _ = client.call("POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap(name, i))
        if status != 201:
            raise RuntimeError(f"create failed: {status}")
        acked[name] = time.perf_counter()
        time.sleep(0.002)
    thread.join(30)
    client.close()
    if len(received) < events:
        raise RuntimeError(f"the watch delivered {len(received)} of {events} events")
    return [max(received[n] - acked[n], 0.0) for n in acked]


def write_event_log(store_path: Path, writes: int) -> int:
    """``writes`` updates of the benchmark's configmaps through the storage layer (server stopped).

    Returns the number of events the store keeps (its compaction history).
    """
    store = Store(store_path)
    try:
        names = [obj["metadata"]["name"] for obj in store.list("", "configmaps", NAMESPACE)][:1000]
        for i in range(writes):
            obj = copy.deepcopy(store.get(("", "configmaps", NAMESPACE, names[i % len(names)])))
            assert obj is not None
            obj["data"]["index"] = str(i)
            store.update("", "configmaps", obj)
        return store.history
    finally:
        store.close()


def event_log(store_path: Path) -> tuple[int, int]:
    """(events retained, newest revision), read from the live database (WAL readers do not block)."""
    db = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
    try:
        count = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        revision = db.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()[0]
        return int(count), int(revision)
    finally:
        db.close()


class Samples:
    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def add(self, key: str, value: float) -> None:
        self.values.setdefault(key, []).append(value)


def measure_round(
    cluster: LocalCluster, samples: Samples, tag: str, runs: int, creates: int, events: int
) -> None:
    client = Client(cluster)
    for run in range(runs):
        samples.add(f"{tag}creates1", create_many(cluster, NAMESPACE, f"{tag}one{run}", creates, 1))
        samples.add(f"{tag}creates4", create_many(cluster, NAMESPACE, f"{tag}four{run}", creates, 4))
        full = timed(lambda: client.call("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps"), 3)
        samples.add(f"{tag}list", percentile(full, 50))
        selected = timed(
            lambda: client.call("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps?labelSelector=shard%3D3"),
            3,
        )
        samples.add(f"{tag}select", percentile(selected, 50))
        page = timed(lambda: client.call("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps?limit=500"), 3)
        samples.add(f"{tag}page", percentile(page, 50))
        latencies = watch_latency(cluster, "watch", f"{tag}w{run}", events)
        samples.add(f"{tag}watch50", percentile(latencies, 50))
        samples.add(f"{tag}watch99", percentile(latencies, 99))
    client.close()


def measure(
    runs: int, objects: int = 10_000, creates: int = 500, watch_events: int = 200, log_writes: int = 100_000
) -> list[Figure]:
    samples = Samples()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp) / "bench", node_agents=False)
        with cluster:
            client = Client(cluster)
            for ns in (NAMESPACE, "watch"):
                ensure_namespace(client, ns)
            create_many(cluster, NAMESPACE, "fill", objects, 4)
            count = len(client.json("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps")["items"])
            client.close()
            measure_round(cluster, samples, "", runs, creates, watch_events)
        store = cluster.state_dir / "store.db"
        history = write_event_log(store, log_writes)
        with cluster:
            retained, revision = event_log(store)
            measure_round(cluster, samples, "after.", runs, creates, watch_events)
        size_mb = sum(p.stat().st_size for p in cluster.state_dir.glob("store.db*")) / 2**20

    v = samples.values
    figures: list[Figure] = []
    for tag, label in (("", ""), ("after.", f"after {log_writes:,} writes: ")):
        rows = (
            ("creates1", "creates/s, 1 client", "creates/s", 1, 0),
            ("creates4", "creates/s, 4 clients", "creates/s", 1, 0),
            ("list", f"LIST all {count:,} objects (p50 of 3)", "ms", 1000, 0),
            ("select", "LIST labelSelector matching 1/10 of them", "ms", 1000, 0),
            ("page", "LIST limit=500 page", "ms", 1000, 0),
            ("watch50", f"watch delivery p50 ({watch_events} events)", "ms", 1000, 2),
            ("watch99", f"watch delivery p99 ({watch_events} events)", "ms", 1000, 2),
        )
        for key, name, unit, scale, digits in rows:
            # A watch event may reach its reader before the create's response reaches the creator (the
            # server sends both at once): that latency counts as 0, and on a busy machine the p50 of a
            # quick run's few events can be 0 too.
            samples = [x * scale for x in v[tag + key]]
            figures.append(
                Figure(SECTION, label + name, unit, samples, digits=digits, zero_ok=key.startswith("watch"))
            )
    bound = history + 1000  # compaction keeps `history` events and runs every 1,000 writes
    figures += [
        Figure(SECTION, f"event log rows after {revision:,} revisions (bound {bound:,})", "rows",
               [float(retained)] * runs, target=("<=", float(bound)), digits=0,
               note="one fill; the same count in every run"),
        Figure(SECTION, "store.db + WAL on disk after the writes", "MiB", [size_mb] * runs, digits=0,
               note="one fill; the same size in every run"),
    ]  # fmt: skip
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--objects", type=int, default=10_000, help="objects present for the LIST benchmark")
    parser.add_argument("--creates", type=int, default=500, help="creates timed per client mode and run")
    parser.add_argument("--watch-events", type=int, default=200)
    parser.add_argument("--log-writes", type=int, default=100_000)
    args = parser.parse_args()
    figures = measure(args.runs, args.objects, args.creates, args.watch_events, args.log_writes)
    for f in figures:
        print(f"{f.name:<60} {f.fmt(f.median):>10} {f.unit}  ({f.fmt(f.low)}-{f.fmt(f.high)})")


if __name__ == "__main__":
    main()
