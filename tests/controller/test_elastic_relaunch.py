"""An elastic DeepSpeedJob's resize reaches its launcher: worker-0, whose `deepspeed` read the hostfile when
it started, is relaunched once the resized group runs (docs/controller.md#elastic-relaunch).

The decision is the engine's (`ReplicaGroup.relaunch_on_resize`, set by the DeepSpeed compiler) and is taken
from observed state only: the size the launcher's pod was built for (its `launched-workers` annotation)
against the size the spec asks for now. Played in the engine simulator.
"""

from __future__ import annotations

import copy

import pytest

from t9k_provider.controller.engine import Create, Delete
from tests.controller.engine_sim import Sim, job
from tests.support.builders import make_container, make_template

W0 = "demo-worker-0"
#: On worker-0's pod, the number of workers its deepspeed was started on (`ANNOTATION_LAUNCHED_WORKERS`).
LAUNCHED = "batch.tensorstack.dev/launched-workers"


def elastic_job(expected: int, **spec: object) -> dict:
    return job(
        "DeepSpeedJob",
        {
            "worker": {"replicas": 2, "template": make_template(make_container("worker"))},
            "config": {"run": {"python": ["train.py"]}, "slotsPerWorker": 1},
            "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": expected},
            **spec,
        },
    )


def running(manifest: dict) -> Sim:
    sim = Sim(manifest)
    for _ in range(4):
        sim.step()
        sim.run_all()
    sim.settle()
    assert sim.status["phase"] == "Running"
    return sim


def launched(sim: Sim) -> str | None:
    return (sim.pod(W0)["metadata"].get("annotations") or {}).get(LAUNCHED)


def creations(sim: Sim, name: str = W0) -> int:
    return sum(1 for kind, created, _ in sim.created if (kind, created) == ("Pod", name))


def deletes(decision, name: str = W0) -> list[Delete]:
    return [a for a in decision.actions if isinstance(a, Delete) and a.kind == "Pod" and a.name == name]


def resize(sim: Sim, expected: int) -> None:
    sim.job["spec"]["elastic"]["expectedReplicas"] = expected
    sim.job["metadata"]["generation"] += 1


def hostfile(sim: Sim) -> str:
    return sim.objects[("ConfigMap", "demo-hostfile")]["data"]["hostfile"]


def assert_nothing_charged(sim: Sim) -> None:
    assert sim.status["backoffCount"] == 0
    assert all(task["restartCount"] == 0 for task in sim.status["tasks"])
    assert sim.replica(W0)["restartCount"] == 0


def test_scale_up_relaunches_worker_0_once_the_new_worker_runs():
    sim = running(elastic_job(2))
    old_uid = sim.pod(W0)["metadata"]["uid"]
    resize(sim, 3)
    decision = sim.step()
    assert hostfile(sim).splitlines() == [f"demo-worker-{i} slots=1" for i in range(3)]
    created = [a.obj["metadata"]["name"] for a in decision.actions if isinstance(a, Create)]
    assert created == ["demo-worker-2", "demo-worker-2"]  # its Service, then its pod
    assert deletes(decision) == []
    # The new worker is not running yet: the launcher keeps running on 2.
    decision = sim.step()
    assert deletes(decision) == [] and sim.pod(W0)["metadata"]["uid"] == old_uid
    sim.run_all(["demo-worker-2"])
    decision = sim.step()
    assert [(d.name, d.uid) for d in deletes(decision)] == [(W0, old_uid)]
    why = "Pod demo-worker-0 is relaunching on 3 worker replicas: the job was resized from 2."
    assert [(e.type, e.reason, e.message) for e in decision.events] == [("Normal", "Relaunching", why)]
    assert sim.cond("ReplicaFailure")["message"] == why
    assert sim.replica(W0)["replacedUid"] == old_uid and sim.replica(W0)["phase"] == "Creating"
    assert_nothing_charged(sim)
    sim.step()
    assert sim.pod(W0)["metadata"]["uid"] != old_uid
    assert launched(sim) == "3"  # it was "2" on the pod replaced
    command = sim.pod(W0)["spec"]["containers"][0]["command"]
    assert command[3:5] == ["deepspeed", "--hostfile=/t9k/hostfile"]  # the new launcher reads the hostfile
    sim.run_all()
    sim.settle()
    assert sim.status["phase"] == "Running" and sim.cond("ReplicaFailure")["status"] == "False"
    assert creations(sim) == 2 and creations(sim, "demo-worker-1") == 1
    assert_nothing_charged(sim)


def test_a_relaunch_is_decided_from_observed_state_only():
    """The same observation gives the same decision, to a controller that remembers nothing; once the
    relaunched pod exists, reconciling again never replaces it again."""
    sim = running(elastic_job(2))
    resize(sim, 3)
    sim.step()
    sim.run_all()
    first, again = sim.decide(), sim.decide()
    assert first == again and len(deletes(first)) == 1
    sim.step()
    sim.step()
    assert creations(sim) == 2
    for _ in range(3):
        assert deletes(sim.step()) == []
    sim.run_all()
    for _ in range(3):
        assert deletes(sim.step()) == []
    assert creations(sim) == 2 and sim.status["phase"] == "Running"


@pytest.mark.parametrize("write_status", [True, False], ids=["delete-lost", "status-lost"])
def test_a_crash_during_the_relaunch_replaces_worker_0_exactly_once(write_status):
    """A crash after the status write but before the delete (delete-lost), or after the delete but before
    the status write (status-lost): either way worker-0 is replaced once, and nothing is charged."""
    sim = running(elastic_job(2))
    resize(sim, 3)
    sim.step()
    sim.run_all()
    sim.step(write_status=write_status, prefix=0 if write_status else None)
    assert (("Pod", W0) in sim.objects) == write_status
    sim.step()
    sim.step()
    sim.run_all()
    sim.settle()
    assert creations(sim) == 2 and launched(sim) == "3"
    assert sim.status["phase"] == "Running"
    assert_nothing_charged(sim)


def test_a_graceful_relaunch_waits_for_the_old_launcher_to_go():
    """The old launcher is terminating (its deepspeed kills its ranks) before the new one is created; its
    exit is not the job's outcome."""
    sim = running(elastic_job(2))
    sim.graceful = True
    resize(sim, 3)
    sim.step()
    sim.run_all()
    sim.step()
    old = sim.pod(W0)
    assert old["metadata"].get("deletionTimestamp")
    sim.finish(W0, exit_code=1)  # deepspeed exits 1 on SIGTERM
    for _ in range(2):
        decision = sim.step()
        assert not [a for a in decision.actions if isinstance(a, Create)]
        assert sim.status["phase"] == "Running"
        assert "relaunching on 3" in sim.cond("ReplicaFailure")["message"]
    sim.finish_deletes()
    sim.step()
    assert launched(sim) == "3" and creations(sim) == 2
    assert_nothing_charged(sim)


def test_scale_down_relaunches_worker_0_on_the_workers_left():
    sim = running(elastic_job(3))
    resize(sim, 2)
    decision = sim.step()
    deleted = sorted(a.name for a in decision.actions if isinstance(a, Delete) and a.kind == "Pod")
    assert deleted == ["demo-worker-0", "demo-worker-2"]  # worker-2 out of range; worker-0 relaunched
    assert hostfile(sim).count("\n") == 2
    assert "resized from 3" in sim.cond("ReplicaFailure")["message"]
    sim.step()
    assert launched(sim) == "2"
    sim.run_all()
    sim.settle()
    assert sorted(sim.pods()) == ["demo-worker-0", "demo-worker-1"]
    assert creations(sim) == 2 and sim.status["phase"] == "Running"
    assert_nothing_charged(sim)


def test_expected_replicas_are_clamped_before_they_are_compared():
    """expectedReplicas beyond maxReplicas runs on maxReplicas: a change the clamp undoes is no resize."""
    sim = running(elastic_job(4))
    assert launched(sim) == "4"
    resize(sim, 9)
    sim.run_all()
    assert deletes(sim.settle()) == [] and creations(sim) == 1


def test_a_non_elastic_job_never_relaunches():
    manifest = elastic_job(2)
    del manifest["spec"]["elastic"]
    sim = running(manifest)
    assert launched(sim) is None
    sim.job["spec"]["worker"]["replicas"] = 3
    for _ in range(3):
        assert deletes(sim.step()) == []
        sim.run_all()
    assert len(sim.pods()) == 3 and creations(sim) == 1


def test_a_launcher_without_the_annotation_or_in_debug_mode_is_not_relaunched():
    """A pod an older controller built says nothing of its size: it is left alone. Debug mode starts no
    training, so there is nothing to relaunch."""
    sim = running(elastic_job(2))
    sim.pod(W0)["metadata"]["annotations"].pop(LAUNCHED, None)
    resize(sim, 3)
    for _ in range(3):
        assert deletes(sim.step()) == []
        sim.run_all()
    debug = running(elastic_job(2, runMode={"debug": {"enabled": True}}))
    resize(debug, 3)
    for _ in range(3):
        assert deletes(debug.step()) == []
        debug.run_all()
    assert creations(debug) == 1


def test_a_finished_launcher_is_decided_not_relaunched():
    """worker-0 finishing decides the job (its success rule), resized or not."""
    sim = running(elastic_job(2))
    resize(sim, 3)
    sim.step()
    sim.run_all()
    sim.finish(W0)
    decision = sim.step()
    assert deletes(decision) == [] and sim.status["phase"] == "Succeeded"


def test_the_relaunched_pod_is_the_compiled_worker_0():
    """The replacement is worker-0 as the compiler builds it for the new size."""
    sim = running(elastic_job(2))
    resize(sim, 3)
    sim.step()
    sim.run_all()
    sim.step()
    sim.step()
    fresh = Sim(copy.deepcopy(sim.job))
    fresh.job.pop("status")
    fresh.objects = {k: v for k, v in copy.deepcopy(sim.objects).items() if k != ("Pod", W0)}
    built = next(
        a.obj for a in fresh.decide().actions if isinstance(a, Create) and a.obj["metadata"]["name"] == W0
    )
    assert sim.pod(W0)["spec"] == built["spec"]
