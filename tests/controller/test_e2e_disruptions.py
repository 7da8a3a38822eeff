"""End to end on the local cluster: a distributed training whose replica is disrupted restarts as a whole and
succeeds, charging no restart budget (docs/controller.md#disruptions).

Two workers train with torch.distributed (gloo) and rank 0 checkpoints its step. Then worker-1's pod is
disrupted as the Eviction API does it, through the real client: the `DisruptionTarget` condition on the pod's
status subresource, then a graceful delete; or its node stops reporting, and the taint manager deletes its
pods, which stay terminating (no kubelet confirms) until the controller force-deletes them. A peer's broken
collective ("connection reset by peer", exit 1) must not be charged: with `backoffLimit: 0` a charged failure
would fail the job.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from t9k_provider.jobs.contract import task_replicas
from t9k_provider.testing import ControllerProcess, LocalCluster, wait_for
from tests.controller.e2e_support import NS, TERMINAL, Jobs, PodRecorder
from tests.support.builders import make_container, make_job, make_template
from tests.support.clusters import ClusterFactory, cluster_fixture, controller_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

cluster = cluster_fixture()
controller = controller_fixture()

#: Trains in steps of one all-reduce, rank 0 checkpointing the step (written whole, then renamed); resumes
#: from the checkpoint; ends once the test opens the gate (a file), at step 10 or later, or after 120 s. A
#: rank whose peer vanished fails in its all-reduce.
TRAIN = """
import os, pathlib, time
from datetime import timedelta
import torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
ckpt, gate = pathlib.Path({ckpt!r}), pathlib.Path({gate!r})
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
step = int(ckpt.read_text()) if ckpt.exists() else 0
print(f"rank {{rank}} starts at step {{step}}", flush=True)
until = time.time() + 120
while not (gate.exists() and step >= 10) and time.time() < until:
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == world
    step += 1
    if rank == 0:
        tmp = ckpt.with_suffix(".tmp")
        tmp.write_text(str(step))
        tmp.replace(ckpt)
    time.sleep(0.2)
dist.barrier()
dist.destroy_process_group()
print(f"rank {{rank}} done at step {{step}}", flush=True)
"""


def create_training(jobs: Jobs, name: str, ckpt: Path, gate: Path) -> None:
    script = TRAIN.format(ckpt=str(ckpt), gate=str(gate))
    jobs.create(make_job("PyTorchTrainingJob", name, {
        "runPolicy": {"backoffLimit": 0},
        "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": "OnFailure", "template":
            make_template(make_container("pytorch", command=[sys.executable, "-c", script]))}],
    }, namespace=NS))  # fmt: skip


def restarted_and_running(jobs: Jobs, name: str, first: dict[str, str]) -> bool:
    """The job restarted as a whole once, and both workers run again in new pods."""
    pods = jobs.pods(name)
    return (
        (jobs.get("PyTorchTrainingJob", name).get("status") or {}).get("restarts") == 1
        and len(pods) == 2
        and all(p.metadata.uid != first.get(p.metadata.name) for p in pods)
        and all(p.status.phase == "Running" and p.metadata.deletion_timestamp is None for p in pods)
    )


def test_an_evicted_worker_restarts_the_training_as_a_whole_without_charging_a_budget(
    cluster: LocalCluster, controller: ControllerProcess, tmp_path: Path
) -> None:
    jobs = Jobs(cluster.api_client())
    recorder = PodRecorder(cluster.api_client())
    recorder.start()
    assert recorder.started_watching.wait(10)
    ckpt, gate, name = tmp_path / "step", tmp_path / "gate", "pj-disrupted"
    create_training(jobs, name, ckpt, gate)

    def status() -> dict:
        return jobs.get("PyTorchTrainingJob", name).get("status") or {}

    try:
        wait_for(
            "the training to checkpoint a few steps", lambda: ckpt.exists() and int(ckpt.read_text()) >= 3, 90
        )
        first = {p.metadata.name: p for p in jobs.pods(name)}
        victim = first[f"{name}-worker-1"]
        node = victim.spec.node_name
        # What the Eviction API does: the condition through the status subresource, then a graceful delete.
        at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        jobs.core.patch_namespaced_pod_status(victim.metadata.name, NS, [{
            "op": "add", "path": "/status/conditions/-", "value": {
                "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting", "lastTransitionTime": at},
        }])  # fmt: skip
        try:
            jobs.core.delete_namespaced_pod(victim.metadata.name, NS)
        except ApiException as exc:  # the controller, restarting the job, may have deleted it first
            assert exc.status == 404, exc

        uids = {n: p.metadata.uid for n, p in first.items()}
        wait_for(
            "the job restarted as a whole, both workers running again",
            lambda: restarted_and_running(jobs, name, uids),
            90,
        )
        assert status()["phase"] == "Running"
        gate.touch()
        wait_for("the job to end", lambda: status().get("phase") in TERMINAL, 120)
    finally:
        created = recorder.stop()
    final = status()
    logs = {p: jobs.log(p) for p in (f"{name}-worker-0", f"{name}-worker-1")}
    context = f"status: {json.dumps(final, indent=1)}\nlogs: {logs}"
    assert final["phase"] == "Succeeded", context
    # The restart budget is untouched: neither the evicted worker nor its peer was charged.
    assert final.get("backoffCount", 0) == 0, context
    assert [r["restartCount"] for task in final["tasks"] for r in task_replicas(task)] == [0, 0], context
    assert final["restarts"] == 1, context
    (entry,) = final["disruptions"]
    assert {k: entry.get(k) for k in ("replicaType", "replicaIndex", "pod", "node", "reason", "action")} == {
        "replicaType": "worker",
        "replicaIndex": 1,
        "pod": f"{name}-worker-1",
        "node": node,
        "reason": "EvictionByEvictionAPI",
        "action": "RestartJob",
    }, context
    assert entry["uid"] == victim.metadata.uid
    # Each worker ran twice, and the second run resumed from the checkpoint.
    assert {p: len(uids) for p, uids in created.items() if p.startswith(name)} == {
        f"{name}-worker-0": 2,
        f"{name}-worker-1": 2,
    }
    resumed = [line for line in logs[f"{name}-worker-0"].splitlines() if "starts at step" in line]
    assert resumed and int(resumed[-1].rsplit(" ", 1)[1]) >= 3, context
    events = jobs.core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
    said = {(e.type, e.reason): e.message for e in events}
    assert said[("Warning", "Disrupted")] == (
        f"worker-1 (pod {name}-worker-1) on node {node} was evicted (EvictionByEvictionAPI: Eviction API: "
        "evicting): restarting the job as a whole"
    )
    assert ("Normal", "RestartingJob") in said


def test_a_worker_whose_node_stops_reporting_is_force_deleted_and_the_training_restarts(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    """Two nodes; worker-1's node's kubelet is SIGKILLed and held stopped. The node goes Unknown, is tainted
    unreachable, and once the pods' toleration (2 s here) runs out the taint manager deletes them: they stay
    terminating, which would block recreating `<job>-worker-1`. The controller force-deletes them and restarts
    the job on the node that is left."""
    cluster = cluster_factory(nodes=2, node_grace=3, toleration_seconds=2)
    jobs = Jobs(cluster.api_client())
    ckpt, gate, name = tmp_path / "step", tmp_path / "gate", "pj-node-lost"
    with ControllerProcess(cluster.kubeconfig, tmp_path / "controller.log") as controller:
        controller.wait_ready(60)
        create_training(jobs, name, ckpt, gate)
        wait_for(
            "the training to checkpoint a few steps", lambda: ckpt.exists() and int(ckpt.read_text()) >= 3, 90
        )
        first = {p.metadata.name: p for p in jobs.pods(name)}
        lost = first[f"{name}-worker-1"].spec.node_name
        cluster.stop_node(lost)
        wait_for(
            "the job restarted as a whole, both workers running again",
            lambda: restarted_and_running(jobs, name, {n: p.metadata.uid for n, p in first.items()}),
            120,
        )
        assert {p.spec.node_name for p in jobs.pods(name)} != {lost}
        gate.touch()
        wait_for("the job to end", lambda: jobs.phase("PyTorchTrainingJob", name) in TERMINAL, 120)
        final = jobs.get("PyTorchTrainingJob", name)["status"]
        context = f"status: {json.dumps(final, indent=1)}\n{controller.log_tail(40)}"
        assert final["phase"] == "Succeeded", context
        assert final.get("backoffCount", 0) == 0, context
        assert final["restarts"] == 1, context
        lost_entries = [e for e in final["disruptions"] if e["node"] == lost]
        assert lost_entries and {e["reason"] for e in lost_entries} == {"DeletionByTaintManager"}, context
        events = jobs.core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
        forced = [e.message for e in events if e.reason == "ForceDelete"]
        assert any("taint manager" in m and "out-of-service" in m for m in forced), context
