"""The node lifecycle controller's decisions, pure: when a node stopped reporting, the taints its state asks
for, and when the taint manager evicts a pod."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.controllers import nodelifecycle as nl

NOW = 1_000_000.0


def stamp(epoch: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(ready: str = "True", heartbeat: float = NOW, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "creationTimestamp": stamp(NOW - 3600)},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": stamp(heartbeat)}]},
    }


def lease(renewed: float) -> dict[str, Any]:
    return {"spec": {"renewTime": stamp(renewed).replace("Z", ".000000Z")}}


def test_a_node_stopped_reporting_once_neither_lease_nor_status_changed_within_the_grace() -> None:
    """Silence is counted by the controller's clock from when it last saw the Lease or the heartbeat change,
    as kube-controller-manager's probeTimestamp."""
    silent = node(heartbeat=NOW - 120)
    seen = nl.probed(None, silent, lease(NOW - 10), NOW - 10)
    assert nl.probed(seen, silent, lease(NOW - 10), NOW) is seen  # nothing new: the probe stays
    assert nl.stopped_reporting(silent, lease(NOW - 10), seen, NOW + 41, 50)
    assert not nl.stopped_reporting(silent, lease(NOW - 10), seen, NOW + 39, 50)
    renewed = nl.probed(seen, silent, lease(NOW + 30), NOW + 30)  # the Lease is what the kubelet renews
    assert renewed.at == NOW + 30 and not nl.stopped_reporting(silent, lease(NOW + 30), renewed, NOW + 41, 50)
    posted = nl.probed(seen, node(heartbeat=NOW + 30), lease(NOW - 10), NOW + 30)  # or its status
    assert not nl.stopped_reporting(node(heartbeat=NOW + 30), lease(NOW - 10), posted, NOW + 41, 50)
    unknown = node("Unknown", NOW - 120)
    assert not nl.stopped_reporting(unknown, lease(NOW - 10), seen, NOW + 600, 50)  # already said


def test_a_node_first_seen_gets_a_whole_grace_whatever_its_timestamps_say() -> None:
    """A controller that starts, or a cluster started again an hour after it stopped: the Lease and the
    heartbeat are an hour old, and the kubelet gets its grace from now (they used to mark it Unknown at
    once, its pods not Ready, until the kubelet renewed)."""
    old = node(heartbeat=NOW - 3600)
    first = nl.probed(None, old, lease(NOW - 3600), NOW)
    assert not nl.stopped_reporting(old, lease(NOW - 3600), first, NOW + 3, 3)
    assert nl.stopped_reporting(old, lease(NOW - 3600), first, NOW + 4, 3)


def test_a_kubelet_that_never_renewed_the_lease_gets_the_startup_grace() -> None:
    """The server registers the Nodes as it starts; their kubelets start after it (seconds under load), so
    until a kubelet has renewed its Lease once its node gets --node-startup-grace-period (60 s), not a node
    grace of 3 s that tests set (a node of a fresh cluster went Unknown before its kubelet first spoke)."""
    registered = node(heartbeat=NOW)
    first = nl.probed(None, registered, None, NOW)
    assert not nl.stopped_reporting(registered, None, first, NOW + 59, 3)
    assert nl.stopped_reporting(registered, None, first, NOW + 61, 3)
    assert nl.stopped_reporting(registered, None, first, NOW + 121, 120)  # a longer grace still holds


def test_unknown_conditions_keep_the_last_heartbeat_and_move_the_transition_once() -> None:
    conditions = nl.unknown_conditions(node(heartbeat=NOW - 120), "T")
    ready = next(c for c in conditions if c["type"] == "Ready")
    assert ready["status"] == "Unknown" and ready["message"] == "Kubelet stopped posting node status."
    assert ready["lastHeartbeatTime"] == stamp(NOW - 120) and ready["lastTransitionTime"] == "T"
    assert {c["type"] for c in conditions} >= set(nl.NODE_CONDITIONS)


def test_taints_follow_the_ready_condition_and_cordon_and_keep_their_time() -> None:
    unreachable = nl.wanted_taints(node("Unknown"), "T1")
    assert {(t["key"], t["effect"]) for t in unreachable} == {
        (nl.UNREACHABLE, "NoSchedule"),
        (nl.UNREACHABLE, "NoExecute"),
    }
    assert next(t for t in unreachable if t["effect"] == "NoExecute")["timeAdded"] == "T1"
    again = node("Unknown", taints=unreachable)
    assert nl.wanted_taints(again, "T2") == unreachable  # kept with its first time
    back = nl.wanted_taints(
        node("True", taints=[*unreachable, {"key": "user", "effect": "NoSchedule"}]), "T3"
    )
    assert back == [{"key": "user", "effect": "NoSchedule"}]  # only the managed taints go
    cordoned = nl.wanted_taints(node("True", unschedulable=True), "T")
    assert cordoned == [{"key": nl.UNSCHEDULABLE, "effect": "NoSchedule"}]
    assert {t["key"] for t in nl.wanted_taints(node("False"), "T")} == {nl.NOT_READY}


def test_eviction_time_follows_the_tolerations() -> None:
    taint = {"key": nl.UNREACHABLE, "effect": "NoExecute", "timeAdded": stamp(NOW - 10)}

    def pod(*tolerations: dict[str, Any]) -> dict[str, Any]:
        return {"spec": {"tolerations": list(tolerations)}}

    assert nl.eviction_time(pod(), [taint], NOW) == NOW  # not tolerated: at once
    bounded = {"key": nl.UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    assert nl.eviction_time(pod(bounded), [taint], NOW) == NOW - 10 + 300
    assert (
        nl.eviction_time(pod({"operator": "Exists"}), [taint], NOW) is None
    )  # tolerates everything for ever
    assert nl.eviction_time(pod(), [{"key": nl.UNSCHEDULABLE, "effect": "NoSchedule"}], NOW) is None
    other = {"key": "other", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}
    assert nl.eviction_time(pod(other), [taint], NOW) == NOW
