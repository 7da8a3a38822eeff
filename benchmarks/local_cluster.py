"""Benchmark the embedded local cluster's API server on this machine.

Measures creates per second (one client, and several in parallel), LIST latency with 10,000 objects, and
watch delivery latency (commit acknowledged -> event received). Runs against a fresh API-only cluster in a
temporary directory, over HTTPS with keep-alive, and prints a small table.

    .venv/bin/python benchmarks/local_cluster.py [--objects 10000] [--watch-events 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from t9k_provider.local.testing import LocalCluster


class Client:
    """One keep-alive HTTPS connection with the cluster's token."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.conn = cluster.connection(30)
        self.headers = {"Authorization": f"Bearer {cluster.token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: object = None) -> tuple[int, bytes]:
        self.conn.request(method, path, body=None if body is None else json.dumps(body), headers=self.headers)
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def close(self) -> None:
        self.conn.close()


def configmap(name: str, i: int) -> dict:
    return {
        "metadata": {"name": name, "labels": {"bench": "yes", "shard": str(i % 10)}},
        "data": {"payload": "x" * 200, "index": str(i)},
    }


def create_many(cluster: LocalCluster, namespace: str, prefix: str, count: int, workers: int) -> float:
    """Create ``count`` configmaps with ``workers`` parallel clients; returns creates per second."""
    per_worker = count // workers

    def work(w: int) -> None:
        client = Client(cluster)
        for i in range(per_worker):
            status, body = client.call(
                "POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap(f"{prefix}-{w}-{i}", i)
            )
            if status != 201:
                raise RuntimeError(f"create failed: {status} {body[:200]!r}")
        client.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per_worker * workers / (time.perf_counter() - started)


def timed(action: Callable[[], object], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def watch_latency(cluster: LocalCluster, namespace: str, events: int) -> list[float]:
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
        name = f"w-{i}"
        status, _ = client.call("POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap(name, i))
        if status != 201:
            raise RuntimeError(f"create failed: {status}")
        acked[name] = time.perf_counter()
        time.sleep(0.002)
    thread.join(30)
    client.close()
    return [max(received[n] - acked[n], 0.0) for n in acked if n in received]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000, help="objects present for the LIST benchmark")
    parser.add_argument("--creates", type=int, default=2_000, help="creates timed per client mode")
    parser.add_argument("--watch-events", type=int, default=300)
    args = parser.parse_args()

    rows: list[tuple[str, str]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalCluster(Path(tmp) / "bench", node_agents=False) as cluster,
    ):
        client = Client(cluster)
        for ns in ("bench", "watch"):
            client.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        single = create_many(cluster, "bench", "one", args.creates, 1)
        rows.append(("creates/s, 1 client", f"{single:,.0f}"))
        parallel = create_many(cluster, "bench", "four", args.creates, 4)
        rows.append(("creates/s, 4 clients", f"{parallel:,.0f}"))
        remaining = args.objects - 2 * args.creates
        if remaining > 0:
            create_many(cluster, "bench", "fill", remaining, 4)
        count = len(json.loads(client.call("GET", "/api/v1/namespaces/bench/configmaps")[1])["items"])
        full = timed(lambda: client.call("GET", "/api/v1/namespaces/bench/configmaps"), 5)
        rows.append((f"LIST all {count:,} objects, p50", f"{percentile(full, 50) * 1000:,.0f} ms"))
        selected = timed(
            lambda: client.call("GET", "/api/v1/namespaces/bench/configmaps?labelSelector=shard%3D3"), 5
        )
        rows.append(
            (f"LIST labelSelector (1/10 of {count:,}), p50", f"{percentile(selected, 50) * 1000:,.0f} ms")
        )
        page = timed(lambda: client.call("GET", "/api/v1/namespaces/bench/configmaps?limit=500"), 5)
        rows.append(("LIST limit=500 page, p50", f"{percentile(page, 50) * 1000:,.0f} ms"))
        latencies = watch_latency(cluster, "watch", args.watch_events)
        rows.append(
            (f"watch delivery p50 ({len(latencies)} events)", f"{percentile(latencies, 50) * 1000:.1f} ms")
        )
        rows.append(("watch delivery p99", f"{percentile(latencies, 99) * 1000:.1f} ms"))
        rows.append(("watch delivery mean", f"{statistics.mean(latencies) * 1000:.1f} ms"))
        client.close()
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 10}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
