"""Which pending pods no node can ever take (``waiting.placement``), and the wait failing on them after
``pod_error_timeout`` instead of ``startup_timeout``."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_provider.kube.resources import GPU
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.placement import largest_allocatable, unplaceable
from t9k_provider.waiting.step import WaitMemory, step
from tests.support.builders import generic_manifest, replica_pod, unschedulable, with_status

pytestmark = pytest.mark.airflow_independent

SCHEDULER = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def node(**allocatable: str) -> dict[str, Any]:
    return {"status": {"allocatable": {"cpu": "16", "memory": "64Gi", **allocatable}}}


def pending(gpus: str, *, said: bool = True, init: str | None = None) -> dict[str, Any]:
    """A pending replica whose container is limited to ``gpus`` (``init``: an init container requests so
    many); ``said``: the scheduler called it Unschedulable."""
    pod = replica_pod("j-worker-0", "worker", 0, "j")
    pod["spec"]["containers"][0]["resources"] = {"limits": {GPU: gpus}}
    if init is not None:
        pod["spec"]["initContainers"] = [{"name": "prep", "resources": {"requests": {GPU: init}}}]
    return unschedulable(pod, SCHEDULER) if said else {**pod, "status": {"phase": "Pending"}}


def test_the_largest_node_is_per_extended_resource() -> None:
    nodes = [
        node(**{"nvidia.com/gpu": "2"}),
        node(**{"nvidia.com/gpu": "8", "example.com/fpga": "1"}),
        node(),
    ]
    assert largest_allocatable(nodes) == {"nvidia.com/gpu": 8, "example.com/fpga": 1}  # no cpu or memory


@pytest.mark.parametrize(
    ("pod", "largest", "never"),
    [
        (pending("4"), {"nvidia.com/gpu": 2}, True),
        (pending("1"), {}, True),  # no node has any
        (pending("2"), {"nvidia.com/gpu": 2}, False),  # fits once the GPUs are free
        (pending("4", said=False), {"nvidia.com/gpu": 2}, False),  # the scheduler has not spoken
        (pending("1", init="3"), {"nvidia.com/gpu": 2}, True),  # the init container asks for more
    ],
)
def test_a_pod_no_node_can_take(pod: dict[str, Any], largest: dict[str, int], never: bool) -> None:
    found = unplaceable(pod, largest)
    assert (found is not None) is never
    if never:
        assert found is not None and found.startswith("pod j-worker-0 can never be scheduled: it asks for")
        assert found.endswith(f"({SCHEDULER})")


def test_the_wait_fails_on_it_after_pod_error_timeout_and_not_before() -> None:
    job = with_status(generic_manifest("j"), "Pending")
    job["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    limits = WaitLimits(startup_timeout=None, pod_error_timeout=30, execution_deadline=None)
    now = 1_800_000_000.0
    pods, largest = [pending("4")], {"nvidia.com/gpu": 2}
    first = step(job, limits, now, WaitMemory(0.0), pods=pods, largest=largest)
    assert first.action == "wait"
    late = step(job, limits, now + 31, first.memory, pods=pods, largest=largest)
    assert late.action == "end" and late.status == "timeout"
    assert "can never be scheduled" in late.message and "pod_error_timeout=30s" in late.message
    # Where the connection may not list nodes, nothing is known: only startup_timeout applies.
    blind = step(job, limits, now, WaitMemory(0.0), pods=pods, largest=None)
    assert blind.action == "wait"
    assert step(job, limits, now + 31, blind.memory, pods=pods, largest=None).action == "wait"
