"""What the task log says of a disruption the controller recorded: the replica, what happened and where, the
preemptor and priorities, when, and what the job does about it; and which entries are new to a wait."""

from __future__ import annotations

import pytest

from t9k_provider.waiting import disruptions

pytestmark = pytest.mark.airflow_independent


def entry(reason: str, message: str = "", **fields: object) -> dict:
    return {"replicaType": "worker", "replicaIndex": 1, "pod": "j-worker-1", "uid": "u1", "node": "n1",
            "reason": reason, "message": message, "time": "2026-11-29T10:42:03Z", "action": "RestartJob",
            "restart": 1, **fields}  # fmt: skip


def test_each_kind_of_disruption_is_said_in_the_words_a_reader_expects() -> None:
    eviction = entry("EvictionByEvictionAPI", "Eviction API: evicting")
    assert disruptions.describe(eviction, cordoned=True) == (
        "worker-1 was evicted (drain of node n1) at 10:42:03 UTC; the job restarts as a whole (restart 1)"
    )
    assert "(eviction of node n1)" in disruptions.describe(eviction)
    preempted = entry(
        "PreemptionByScheduler",
        "default-scheduler: preempting to accommodate a higher priority pod (PodGroup default/urgent-train, "
        "priority 80 > 50)",
    )
    assert disruptions.describe(preempted).startswith(
        "worker-1 was preempted by default/urgent-train (priority 80 > 50) on node n1 at 10:42:03 UTC"
    )
    lost = entry("DeletionByTaintManager", action="RecreateReplica", restart=None)
    assert disruptions.describe(lost) == (
        "worker-1 was lost: node n1 stopped reporting at 10:42:03 UTC; the replica is created again"
    )
    assert "(Evicted: The node was low on resource: memory.)" in disruptions.describe(
        entry("Evicted", "The node was low on resource: memory.")
    )


def test_a_wait_sees_each_entry_once_by_its_cursor() -> None:
    first, second = (
        entry("EvictionByEvictionAPI"),
        entry("PreemptionByScheduler", time="2026-11-29T10:50:00Z"),
    )
    job = {"status": {"disruptions": [first, second]}}
    assert disruptions.since(job, None) == [first, second]
    assert disruptions.since(job, disruptions.cursor(first)) == [second]
    assert disruptions.since(job, disruptions.cursor(second)) == []
    assert disruptions.since({"status": {}}, None) == []
