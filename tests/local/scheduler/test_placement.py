"""Where pods go and whom they preempt, pure: the filters' reasons, spreading, gangs across nodes, and the
victims preemption chooses (fewest, lowest priority, whole gangs, never for `preemptionPolicy: Never`)."""

from __future__ import annotations

from typing import Any

from t9k_provider.jobs.contract import LABEL_GROUP_NAME
from t9k_provider.local.scheduler import filters, placement


def node(name: str, cpu: str = "2", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def pod(
    name: str, cpu: str = "1", *, group: str | None = None, priority: int = 0, on: str = "", **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"u-{name}",
        "creationTimestamp": f"2026-01-01T00:00:{len(name):02d}Z",
    }
    if group:
        meta["labels"] = {LABEL_GROUP_NAME: group}
    containers = [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
    return {
        "metadata": meta,
        "spec": {"containers": containers, "priority": priority, **({"nodeName": on} if on else {}), **spec},
    }


def by_priority(p: dict[str, Any]) -> int:
    return int(p["spec"].get("priority") or 0)


def test_filters_say_why_in_kube_schedulers_words() -> None:
    assert filters.rejection(pod("p"), node("n", unschedulable=True)) == filters.UNSCHEDULABLE
    tainted = node("n", taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}])
    assert filters.rejection(pod("p"), tainted) == "node(s) had untolerated taint {gpu: a100}"
    tolerant = pod("p", tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert filters.rejection(tolerant, tainted) is None
    assert (
        filters.rejection(pod("p", nodeSelector={"zone": "a"}), node("n", labels={"zone": "b"}))
        == filters.AFFINITY
    )
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["m"]}]}
    ]}}}  # fmt: skip
    assert filters.rejection(pod("p", affinity=pinned), node("n")) == filters.AFFINITY
    assert filters.rejection(pod("p", affinity=pinned), node("m")) is None


def test_pods_spread_to_the_least_allocated_node_and_a_gang_spans_nodes() -> None:
    nodes = [node("a"), node("b")]
    spread = placement.place([pod("x"), pod("y")], nodes, {})
    assert sorted(spread.nodes.values()) == ["a", "b"]
    gang = placement.place([pod("g0", "2", group="g"), pod("g1", "2", group="g")], nodes, {})
    assert sorted(gang.nodes.values()) == ["a", "b"]
    full = placement.place([pod("big", "3")], nodes, {})
    assert not full.nodes and full.reasons == ["Insufficient cpu", "Insufficient cpu"]


def test_preemption_takes_the_fewest_lowest_priority_victims_and_whole_gangs() -> None:
    nodes = [node("a"), node("b")]
    low = [pod(f"low{i}", "2", group="low", priority=10, on=n) for i, n in enumerate("ab")]
    occupying = {"a": [low[0]], "b": [low[1]]}
    # 2 CPUs on one node would do, but a gang goes whole: both of its pods are victims.
    chosen = placement.preempt([pod("urgent", "2", priority=80)], 1, nodes, occupying, by_priority)
    assert chosen is not None and sorted(p["metadata"]["name"] for p in chosen.victims) == ["low0", "low1"]
    assert list(chosen.placement.nodes) == ["u-urgent"]
    # Lone pods: only as many as needed go, the lowest priority first.
    lone = {"a": [pod("p1", "2", priority=5, on="a")], "b": [pod("p2", "2", priority=1, on="b")]}
    chosen = placement.preempt([pod("urgent", "2", priority=80)], 1, nodes, lone, by_priority)
    assert chosen is not None and [p["metadata"]["name"] for p in chosen.victims] == ["p2"]
    assert chosen.placement.nodes == {"u-urgent": "b"}


def test_no_preemption_of_equal_priority_nor_by_a_pod_that_may_not_preempt() -> None:
    nodes = [node("a")]
    occupying = {"a": [pod("peer", "2", priority=50, on="a")]}
    assert placement.preempt([pod("p", "2", priority=50)], 1, nodes, occupying, by_priority) is None
    never = pod("p", "2", priority=90, preemptionPolicy="Never")
    assert placement.preempt([never], 1, nodes, occupying, by_priority) is None
    assert placement.preempt([pod("huge", "3", priority=90)], 1, nodes, occupying, by_priority) is None
