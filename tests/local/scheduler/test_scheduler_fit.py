"""The scheduler's fit rule, as pure functions: effective requests, room left, kube-scheduler's message."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from t9k_provider.local.scheduler import fit


def pod(*containers: dict[str, Any], inits: tuple[dict[str, Any], ...] = (), **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": list(containers), "initContainers": list(inits), **spec},
    }


def c(cpu: str | None = None, memory: str | None = None, *, limits: bool = False, **extra: Any) -> dict:
    named = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": "c", "resources": {"limits" if limits else "requests": named}, **extra}


def node(**allocatable: str) -> dict[str, Any]:
    return {"status": {"allocatable": allocatable}}


def test_requests_sum_containers_and_default_to_limits() -> None:
    got = fit.pod_requests(pod(c("500m", "1Gi"), c("1", limits=True)))
    assert got["cpu"] == Decimal("1.5")
    assert got["memory"] == 1 << 30
    assert got["pods"] == 1


def test_init_containers_count_by_their_peak_and_sidecars_add() -> None:
    plain_init = pod(c("1"), inits=(c("3"),))
    assert fit.pod_requests(plain_init)["cpu"] == 3  # the init container alone is the larger
    sidecar = pod(c("1"), inits=(c("2", restartPolicy="Always"), c("500m")))
    assert fit.pod_requests(sidecar)["cpu"] == 3  # the sidecar keeps running next to the main container


def test_overhead_is_added() -> None:
    assert fit.pod_requests(pod(c("1"), overhead={"cpu": "250m"}))["cpu"] == Decimal("1.25")


def test_room_counts_only_pods_that_occupy_the_node() -> None:
    running = {**pod(c("1")), "status": {"phase": "Running"}}
    running["spec"]["nodeName"] = "n"
    done = {**pod(c("1")), "status": {"phase": "Succeeded"}}
    done["spec"]["nodeName"] = "n"
    unbound = pod(c("1"))
    pods = [p for p in (running, done, unbound) if fit.occupies_node(p)]
    room = fit.free_room(node(cpu="2", pods="110"), fit.requested(pods))
    assert room["cpu"] == 1 and room["pods"] == 109


def test_insufficient_names_each_resource_and_the_message_has_kube_schedulers_shape() -> None:
    room = fit.free_room(node(cpu="2", memory="1Gi", pods="110"), fit.requested([]))
    assert fit.insufficient(fit.pod_requests(pod(c("2", "1Gi"))), room) == []
    why = fit.insufficient(fit.pod_requests(pod(c("3", "2Gi"))), room)
    assert fit.unschedulable_message(why) == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    )
    gpu = {"name": "g", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    assert fit.unschedulable_message(fit.insufficient(fit.pod_requests(pod(gpu)), room)) == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )
    full = fit.free_room(node(cpu="2", pods="0"), fit.requested([]))
    assert fit.insufficient(fit.pod_requests(pod(c())), full) == ["Too many pods"]
