"""Restart safety (docs/controller.md#restart-safety): SIGKILL the controller at 20+ random points across a
mixed batch of jobs.

Every pod creation is recorded by an independent watch. For each replica the number of pod objects ever
created under its name must be exactly what its restart policy allows: 1 for replicas that finish on the first
run (so no duplicate and no re-run of a finished replica), ``1 + limit`` for replicas that keep failing. Every
job must end in the documented terminal state with restart counters not double-counted across crashes.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.testing import ControllerProcess, wait_for
from tests.controller.e2e_support import NS, TERMINAL, Jobs, PodRecorder, fake_tools
from tests.support.builders import make_container, make_job, make_template

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

KILLS = 22
WAVES = 3


Expectation = tuple[dict[str, Any], str, dict[str, set[int]]]


def wave(w: int, tools: Path) -> list[Expectation]:
    """(manifest, expected phase, allowed creation counts per pod name) for one wave of jobs."""
    return [
        (
            make_job("GenericJob", f"gj-ok-{w}", {
                "replicaSpecs": [{"type": "worker", "replicas": 2, "template":
                    make_template(make_container("main", sh="sleep 1"))}],
            }, namespace=NS),
            "Succeeded",
            {f"gj-ok-{w}-worker-0": {1}, f"gj-ok-{w}-worker-1": {1}},
        ),
        (
            make_job("GenericJob", f"gj-rules-{w}", {
                "successRules": [{"worker": [0]}],
                "failureRules": [{"master": [0]}],
                "cleanUpPolicy": "Unfinished",
                "replicaSpecs": [
                    {
                        "type": "master",
                        "restartPolicy": {"policy": "Never"},
                        "template": make_template(make_container("main", sh="exit 3")),
                    },
                    {"type": "worker", "template": make_template(make_container("main", sh="sleep 60"))},
                ],
            }, namespace=NS),
            "Failed",
            # worker-0 may never be created: a kill right after master-0's create lets master fail first
            # (the same holds for the TF/XGBoost workers below: the chief/master alone decides success).
            {f"gj-rules-{w}-master-0": {1}, f"gj-rules-{w}-worker-0": {0, 1}},
        ),
        (
            make_job("GenericJob", f"gj-limit-{w}", {
                "replicaSpecs": [{
                    "type": "worker",
                    "restartPolicy": {"policy": "OnFailure", "limit": 1},
                    "template": make_template(make_container("main", sh="sleep 0.3; exit 1")),
                }],
            }, namespace=NS),
            "Failed",
            {f"gj-limit-{w}-worker-0": {2}},
        ),
        (
            make_job("PyTorchTrainingJob", f"pj-137-{w}", {
                "runPolicy": {"backoffLimit": 2},
                "replicaSpecs": [{
                    "type": "master", "restartPolicy": "ExitCode",
                    "template": make_template(make_container("pytorch", sh="sleep 0.3; exit 137")),
                }],
            }, namespace=NS),
            "Failed",
            {f"pj-137-{w}-master-0": {3}},
        ),
        (
            make_job("TensorFlowTrainingJob", f"tj-{w}", {
                "replicaSpecs": [
                    {"type": "chief", "template": make_template(make_container("tensorflow", sh="sleep 1"))},
                    {"type": "worker", "template": make_template(make_container("tensorflow", sh="sleep 1"))},
                ],
            }, namespace=NS),
            "Succeeded",
            {f"tj-{w}-chief-0": {1}, f"tj-{w}-worker-0": {0, 1}},
        ),
        (
            make_job("XGBoostTrainingJob", f"xj-{w}", {
                "replicaSpecs": [
                    {"type": "master", "template": make_template(make_container("xgboost", sh="sleep 1"))},
                    {"type": "worker", "template": make_template(make_container("xgboost", sh="sleep 1"))},
                ],
            }, namespace=NS),
            "Succeeded",
            {f"xj-{w}-master-0": {1}, f"xj-{w}-worker-0": {0, 1}},
        ),
        (
            make_job("MPIJob", f"mpi-{w}", {
                "worker": {
                    "replicas": 2, "cmd": ["./hello"],
                    "template": {"spec": {"containers": [{
                        "name": "mpi-worker", "image": "mpi:x",
                        "env": [{"name": "PATH", "value": f"{tools}:/usr/bin:/bin"},
                                {"name": "HOSTFILE", "value": "/etc/mpi/hostfile"}],
                    }]}},
                },
                "ssh": {"sshdPath": str(tools / "sshd")},
                "runPolicy": {"cleanUpWorkers": True},
            }, namespace=NS),
            "Succeeded",
            # The launcher starts once, after both workers run; workers are deleted (not re-run) at the end.
            {f"mpi-{w}-worker-0": {1}, f"mpi-{w}-worker-1": {1}, f"mpi-{w}-launcher": {1}},
        ),
    ]  # fmt: skip


@pytest.mark.timeout(300)
def test_sigkill_at_random_points_never_duplicates_or_reruns(cluster_factory: Any, tmp_path: Path) -> None:
    seed = int(os.environ.get("T9K_RESTART_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    tools = fake_tools(tmp_path)
    cluster = cluster_factory(kubelet="process")
    jobs = Jobs(cluster.api_client())
    recorder = PodRecorder(cluster.api_client())
    recorder.start()
    assert recorder.started_watching.wait(10)
    controller = ControllerProcess(cluster.kubeconfig, tmp_path / "controller.log", "--workers", "4")
    expected: list[Expectation] = []
    kill_points: list[float] = []
    started = time.monotonic()
    try:
        for kill in range(KILLS):
            if kill % (KILLS // WAVES) == 0 and kill // (KILLS // WAVES) < WAVES:
                for manifest, phase, creations in wave(kill // (KILLS // WAVES), tools):
                    jobs.create(manifest)
                    expected.append((manifest, phase, creations))
            controller.start()
            # Half the kills land anywhere in start-up (imports, list, first reconciles), half once ready.
            if rng.random() < 0.5:
                delay = rng.uniform(0.5, 4.0)
            else:
                controller.wait_ready(60)
                delay = rng.uniform(0.0, 1.5)
            time.sleep(delay)
            kill_points.append(round(time.monotonic() - started, 2))
            controller.kill()
        controller.start()

        def all_terminal() -> bool:
            return all(jobs.phase(m["kind"], m["metadata"]["name"]) in TERMINAL for m, _, _ in expected)

        wait_for("every job to reach a terminal phase", all_terminal, 150, interval=1.0)
        time.sleep(2)  # a late duplicate would show up in this window
    finally:
        controller.kill()
        seen = recorder.stop()
    context = f"seed={seed} kill points={kill_points}\n{controller.log_tail(30)}"

    assert len(kill_points) >= 20
    problems = []
    for manifest, phase, creations in expected:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        status = jobs.get(kind, name).get("status") or {}
        if status.get("phase") != phase:
            problems.append(f"{name}: phase {status.get('phase')}, expected {phase}")
        for pod, allowed in creations.items():
            if len(seen.get(pod, ())) not in allowed:
                problems.append(f"{pod}: created {len(seen.get(pod, ()))} times, allowed {sorted(allowed)}")
        if name.startswith("pj-137") and status.get("backoffCount") != 2:
            problems.append(f"{name}: backoffCount {status.get('backoffCount')} (restarts double-counted?)")
        if name.startswith("gj-limit") and [t.get("restartCount") for t in status.get("tasks", [])] != [1]:
            problems.append(f"{name}: tasks {status.get('tasks')}")
    owned = {pod for _, _, creations in expected for pod in creations}
    problems += [f"unexpected pod {pod}" for pod in sorted(set(seen) - owned)]
    assert not problems, "\n".join([*problems, context])
