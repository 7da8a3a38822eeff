"""The scheduler's running totals of what each node's pods request (`usage.NodeUsage`): they follow a pod
from its binding to its end or deletion, and after any sequence of pod events they equal a recount of the
pods that occupy each node."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from t9k_provider.local.scheduler import fit
from t9k_provider.local.scheduler.usage import NodeUsage


def pod(uid: str, cpu: str = "1", node: str = "", phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_a_pod_counts_from_its_binding_to_its_end() -> None:
    usage = NodeUsage()
    pending = pod("a", "2")
    usage.on_pod(None, pending)
    assert usage.used("n")["cpu"] == 0 and not usage.counts(pending)
    bound = pod("a", "2", node="n")
    usage.on_pod(pending, bound)
    running = pod("a", "2", node="n", phase="Running")
    usage.on_pod(bound, running)
    usage.on_pod(running, running)  # a status write that changed nothing the totals hold
    assert usage.used("n")["cpu"] == 2 and usage.used("n")[fit.PODS] == 1 and usage.counts(running)
    done = pod("a", "2", node="n", phase="Succeeded")
    usage.on_pod(running, done)
    assert usage.used("n")["cpu"] == 0 and usage.used("n")[fit.PODS] == 0
    usage.on_pod(done, None)
    assert not usage.counts(done)


def test_a_deleted_pod_stops_counting_and_a_copy_is_not_the_total() -> None:
    usage = NodeUsage()
    running = pod("a", "500m", node="n", phase="Running")
    usage.on_pod(None, running)
    usage.used("n")["cpu"] += 10  # callers get a copy to spend
    assert usage.used("n")["cpu"] == Decimal("0.5")
    usage.on_pod(running, None)
    assert usage.used("n")["cpu"] == 0


def test_the_totals_equal_a_recount_after_any_sequence_of_events() -> None:
    rng = random.Random(7)
    usage = NodeUsage()
    pods: dict[str, dict[str, Any]] = {}
    for step in range(3000):
        uid = f"u{rng.randrange(60)}"
        old = pods.get(uid)
        choice = rng.random()
        if old is None:
            new: dict[str, Any] | None = pod(uid, rng.choice(["1", "250m", "2"]))
        elif choice < 0.15:
            new = None  # deleted
        elif not old["spec"].get("nodeName"):
            new = {**old, "spec": {**old["spec"], "nodeName": rng.choice(["a", "b", "c"])}}
        else:
            phase = rng.choice(["Pending", "Running", "Running", "Succeeded", "Failed"])
            new = {**old, "status": {"phase": phase}}
        if new is None:
            pods.pop(uid)
        else:
            pods[uid] = new
        usage.on_pod(old, new)
        for node in ("a", "b", "c"):
            occupying = [p for p in pods.values() if fit.occupies_node(p) and p["spec"]["nodeName"] == node]
            recount = fit.requested(occupying)
            assert {k: v for k, v in usage.used(node).items() if v} == {
                k: v for k, v in recount.items() if v
            }, step
