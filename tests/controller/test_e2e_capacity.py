"""Gang scheduling within node capacity (docs/local-cluster.md#node-capacity-and-scheduling) with the real
controller: T9k jobs on a node with 2 CPUs (simulated kubelet). A 3-replica gang job of 1 CPU each waits whole
with the scheduler's message and runs once the node grows; two 2-replica gang jobs that do not both fit never
interleave partially."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.jobs import GROUP, VERSION
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.testing import none_left, wait_for
from tests.controller.e2e_support import NS, Jobs
from tests.support.builders import make_job
from tests.support.clusters import cluster_fixture, controller_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NO_CPU = "0/1 nodes are available: 1 Insufficient cpu."


cluster = cluster_fixture(kubelet="simulated", flink_operator=False, capacity={"cpus": "2"})
controller = controller_fixture()


def gang_job(name: str, replicas: int) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox:1", "resources": {"requests": {"cpu": "1"}}}
    replicas_spec = {
        "type": "worker",
        "replicas": replicas,
        "template": {"spec": {"containers": [container]}},
    }
    spec = {"scheduler": {"t9kScheduler": {"queue": "default"}}, "replicaSpecs": [replicas_spec]}
    return make_job("GenericJob", name, spec, namespace=NS)


def bound(jobs: Jobs, name: str) -> int:
    return sum(1 for p in jobs.pods(name) if p.spec.node_name)


def set_node_cpus(jobs: Jobs, cpus: str) -> None:
    jobs.core.patch_node_status(
        FIRST_NODE, {"status": {"capacity": {"cpu": cpus}, "allocatable": {"cpu": cpus}}}
    )


def unscheduled_message(pod: client.V1Pod) -> str | None:
    cond = next((c for c in pod.status.conditions or () if c.type == "PodScheduled"), None)
    return cond.message if cond is not None and cond.status == "False" else None


def delete_job(jobs: Jobs, name: str) -> None:
    jobs.custom.delete_namespaced_custom_object(GROUP, VERSION, NS, "genericjobs", name)
    wait_for(f"pods of {name} gone", none_left(lambda: jobs.pod_names(name)), 60)


def test_three_cpu_job_waits_on_two_cpus_and_runs_when_capacity_is_raised(jobs: Jobs) -> None:
    jobs.create(gang_job("big", 3))
    pods = wait_for(
        "three pods told why they wait",
        lambda: (ps := jobs.pods("big")) and len(ps) == 3 and all(unscheduled_message(p) for p in ps) and ps,
        60,
    )
    for pod in pods:
        assert unscheduled_message(pod) == f"{NO_CPU} PodGroup big: 2 of 3 pods fit together."
    time.sleep(1)
    assert bound(jobs, "big") == 0, "no part of the gang may start"
    assert jobs.phase("GenericJob", "big") in (None, "Pending")
    set_node_cpus(jobs, "3")
    try:
        wait_for("all three pods bound", lambda: bound(jobs, "big") == 3, 60)
        wait_for("job Running", lambda: jobs.phase("GenericJob", "big") == "Running", 60)
    finally:
        set_node_cpus(jobs, "2")
        delete_job(jobs, "big")


def test_two_gang_jobs_that_do_not_both_fit_never_interleave(jobs: Jobs) -> None:
    jobs.create(gang_job("left", 2))
    jobs.create(gang_job("right", 2))
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 8  # watched for 8 s, and until one gang is bound whole
    while time.monotonic() < deadline or not any(2 in pair for pair in seen):
        assert time.monotonic() < deadline + 60, f"neither gang was bound whole: {seen}"
        seen.add((bound(jobs, "left"), bound(jobs, "right")))
        time.sleep(0.1)
    # a gang's pods are bound one binding at a time, so (1, 0) may be seen on the way to (2, 0); what must
    # never happen is pods of both jobs on the node
    assert not [(left, right) for left, right in seen if left and right], seen
    winner, loser = ("left", "right") if bound(jobs, "left") == 2 else ("right", "left")
    assert (bound(jobs, winner), bound(jobs, loser)) == (2, 0)
    delete_job(jobs, winner)
    wait_for(f"{loser} bound whole once {winner} is gone", lambda: bound(jobs, loser) == 2, 60)
    delete_job(jobs, loser)
