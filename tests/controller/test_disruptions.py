"""Disruptions (docs/controller.md#disruptions), played in the Sim: per kind, the whole restart of a
collective or the recreation of one replica; the attribution window; the taint manager's pods force-deleted;
status, conditions and events; restart safety, idempotence, and a second disruption during a restart."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from t9k_provider.controller.engine import Create, Delete
from t9k_provider.controller.engine.disruptions import ATTRIBUTION_WINDOW_SECONDS
from t9k_provider.controller.kinds.context import JobContext
from t9k_provider.controller.kinds.registry import REGISTRY
from t9k_provider.jobs import KINDS, load
from t9k_provider.jobs.contract import ANNOTATION_JOB_RESTARTS, DISRUPTIONS_KEPT, task_replicas
from t9k_provider.jobs.crds import crd
from tests.controller.engine_sim import Sim, job
from tests.controller.test_kinds import (
    COLOSSAL_DOCUMENTED,
    EVERY_KIND,
    MPI_DOCUMENTED,
    _pruned,
    deepspeed,
    pytorch,
    tensorflow,
)
from tests.support.builders import make_container, make_template

EVICTED = (
    "worker-1 (pod demo-worker-1) on node node-1 was evicted (EvictionByEvictionAPI: Eviction API: evicting)"
)

#: Kinds whose replicas form one collective: a disruption restarts every replica. Each has a `worker-1`.
WHOLE = {
    "PyTorchTrainingJob": pytorch(runPolicy={"backoffLimit": 0})["spec"],
    "TensorFlowTrainingJob": tensorflow(runPolicy={"backoffLimit": 0})["spec"],
    "XGBoostTrainingJob": {
        "runPolicy": {"backoffLimit": 0},
        "replicaSpecs": [
            {"type": "master", "template": make_template(make_container("xgboost"))},
            {"type": "worker", "replicas": 2, "template": make_template(make_container("xgboost"))},
        ],
    },
    "DeepSpeedJob": deepspeed({"run": {"python": ["t.py"]}})["spec"],
    "MPIJob": MPI_DOCUMENTED,
    "ColossalAIJob": COLOSSAL_DOCUMENTED,
}
ELASTIC_PYTORCH = pytorch(
    torchrunConfig={"enabled": True}, elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 3}
)["spec"]
#: Kinds whose replicas recover alone: only the disrupted replica is recreated.
ALONE = {
    "GenericJob": {
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 2,
                "restartPolicy": {"policy": "Never"},
                "template": make_template(),
            }
        ]
    },
    "PyTorchTrainingJob": ELASTIC_PYTORCH,
}


def two_workers(**spec: object) -> dict:
    """A PyTorch job of two workers; a program failure fails it at once (no restart budget)."""
    body = {
        "runPolicy": {"backoffLimit": 0},
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 2,
                "restartPolicy": "OnFailure",
                "template": make_template(make_container("pytorch", command=["python", "train.py"])),
            }
        ],
        **spec,
    }
    return job("PyTorchTrainingJob", body)


def running(manifest: dict, graceful: bool = True) -> Sim:
    """Every replica (launchers too) Running on node-1; deletes leave the pod terminating when `graceful`."""
    sim = Sim(manifest)
    for _ in range(5):
        sim.step()
        for name, pod in sim.pods().items():
            pod["spec"]["nodeName"] = "node-1"
            sim.run_all([name])
    sim.step()
    assert sim.status["phase"] == "Running", sim.status
    sim.graceful = graceful
    return sim


def records(sim: Sim) -> dict[str, dict]:
    return {r["name"]: r for task in sim.status["tasks"] for r in task_replicas(task)}


def deletes(decision) -> dict[str, Delete]:
    return {a.name: a for a in decision.actions if isinstance(a, Delete) and a.kind == "Pod"}


def creates(decision) -> list[str]:
    return sorted(a.obj["metadata"]["name"] for a in decision.actions if isinstance(a, Create))


def charged(sim: Sim) -> tuple[int, int]:
    """(backoffCount, the replicas' restartCounts summed): what restart budgets were charged."""
    return sim.status.get("backoffCount", 0), sum(r["restartCount"] for r in records(sim).values())


def events(sim: Sim, reason: str) -> list[str]:
    return [e.message for e in sim.events if e.reason == reason]


# -- the decision per kind ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "spec", "whole"),
    [
        *((k, s, True) for k, s in WHOLE.items()),
        ("PyTorchTrainingJob", ELASTIC_PYTORCH, False),
        ("GenericJob", ALONE["GenericJob"], False),
    ],
    ids=[*WHOLE, "PyTorchTrainingJob-elastic", "GenericJob"],
)
def test_which_kinds_restart_as_a_whole(kind, spec, whole):
    typed = load(job(kind, spec))
    plan = REGISTRY[type(typed)].compile(typed, JobContext(job(kind, spec)))
    assert plan.whole_restart is whole


@pytest.mark.parametrize("kind", sorted(WHOLE))
def test_a_disruption_restarts_every_replica_of_a_collective_charging_nothing(kind):
    sim = running(job(kind, WHOLE[kind]))
    before = {name: pod["metadata"]["uid"] for name, pod in sim.pods().items()}
    sim.disrupt("demo-worker-1")
    decision = sim.step()

    # Every other pod is deleted (uid precondition); the evicted one is terminating already.
    assert {n: d.uid for n, d in deletes(decision).items()} == {
        n: uid for n, uid in before.items() if n != "demo-worker-1"
    }
    assert all(d.grace_period_seconds is None for d in deletes(decision).values())
    assert creates(decision) == []
    status = sim.status
    assert status["phase"] == "Running" and status["restarts"] == 1
    assert {r["phase"] for r in records(sim).values()} == {"Creating"}
    running_cond = sim.cond("Running")
    assert (running_cond["status"], running_cond["reason"]) == ("True", "Restarting")
    assert "restarting as a whole after a disruption (restart 1" in running_cond["message"]
    assert EVICTED in sim.cond("ReplicaFailure")["message"]
    assert events(sim, "Disrupted") == [f"{EVICTED}: restarting the job as a whole"]
    assert [e.type for e in sim.events if e.reason in ("Disrupted", "RestartingJob")] == ["Warning", "Normal"]
    (entry,) = status["disruptions"]
    assert entry == {
        "replicaType": "worker",
        "replicaIndex": 1,
        "pod": "demo-worker-1",
        "uid": before["demo-worker-1"],
        "node": "node-1",
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
        "time": "2026-01-01T12:00:00Z",
        "action": "RestartJob",
        "restart": 1,
    }

    # The peers' collective breaks: they fail while they terminate. Nothing is charged, nothing created
    # while a pod of the old restart is left.
    for name in before:
        if name != "demo-worker-1":
            sim.finish(name, exit_code=1, finished_at=sim.now)
    sim.advance(1)
    assert creates(sim.step()) == [] and charged(sim) == (0, 0)
    sim.finish_deletes()
    sim.advance(1)
    created = creates(sim.step())
    assert created and set(created) <= set(before)
    for name in created:
        assert sim.pod(name)["metadata"]["annotations"][ANNOTATION_JOB_RESTARTS] == "1"
    for _ in range(4):  # launchers follow their workers
        for name in sim.pods():
            sim.run_all([name])
        sim.step()
    assert sorted(sim.pods()) == sorted(before)
    assert sim.status["phase"] == "Running" and charged(sim) == (0, 0)
    assert sim.cond("Running")["reason"] == "-"
    assert sim.cond("ReplicaFailure")["status"] == "False"
    assert sim.status["restarts"] == 1 and len(sim.status["disruptions"]) == 1


@pytest.mark.parametrize("kind", sorted(ALONE))
def test_a_replica_that_recovers_alone_is_recreated_alone(kind):
    sim = running(job(kind, ALONE[kind]))
    others = {n: p["metadata"]["uid"] for n, p in sim.pods().items() if n != "demo-worker-1"}
    sim.disrupt("demo-worker-1")
    decision = sim.step()
    assert deletes(decision) == {} and creates(decision) == []
    assert events(sim, "Disrupted") == [f"{EVICTED}: recreating this replica, charged to no budget"]
    assert sim.status["disruptions"][0]["action"] == "RecreateReplica"
    assert "restart" not in sim.status["disruptions"][0] and "restarts" not in sim.status
    sim.step()
    assert len(events(sim, "Disrupted")) == 1, "reported once"
    sim.finish_deletes()
    assert creates(sim.step()) == ["demo-worker-1"]
    assert {n: p["metadata"]["uid"] for n, p in sim.pods().items() if n != "demo-worker-1"} == others
    assert ANNOTATION_JOB_RESTARTS not in sim.pod("demo-worker-1")["metadata"]["annotations"]
    assert charged(sim) == (0, 0) and sim.status["phase"] == "Running"
    assert len(sim.status["disruptions"]) == 1 and events(sim, "PodDeleted") == []


def test_a_generic_jobs_peers_failing_after_a_disruption_are_its_own_failures():
    """GenericJob replicas may be independent: a peer's failure is the peer's, charged as ever."""
    sim = running(job("GenericJob", {"replicaSpecs": [
        {"type": "worker", "replicas": 2, "restartPolicy": {"policy": "OnFailure", "limit": 1},
         "template": make_template()}]}))  # fmt: skip
    sim.disrupt("demo-worker-1")
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    assert records(sim)["demo-worker-0"]["restartCount"] == 1
    assert records(sim)["demo-worker-1"]["restartCount"] == 0


@pytest.mark.parametrize(
    ("signal", "reason", "words"),
    [
        ("preempted", "PreemptionByScheduler", "was preempted"),
        ("kubelet", "TerminationByKubelet", "was terminated by its node's kubelet"),
        ("evicted", "Evicted", "was evicted by its node's kubelet"),
        ("no exit code", "NoExitCode", "failed without an exit code"),
        ("deleted", "DeletedFromOutside", "was deleted from outside the controller"),
        ("gone", "DeletedFromOutside", "was deleted from outside the controller"),
    ],
)
def test_every_pod_signal_of_a_disruption_restarts_the_job(signal, reason, words):
    sim = running(two_workers())
    pod = sim.pod("demo-worker-1")
    if signal == "preempted":
        sim.disrupt("demo-worker-1", reason, "preempted by ns/urgent", delete=True)
    elif signal == "kubelet":
        sim.disrupt("demo-worker-1", reason, "node shutdown", delete=False)
        pod["status"]["phase"] = "Failed"
    elif signal == "evicted":
        sim.set_pod("demo-worker-1", "Failed", reason="Evicted")
    elif signal == "no exit code":
        sim.set_pod("demo-worker-1", "Failed")
    elif signal == "deleted":
        pod["metadata"].update(deletionTimestamp="2026-01-01T12:00:30Z", deletionGracePeriodSeconds=30)
    else:
        sim.delete_object("Pod", "demo-worker-1")
    sim.step()
    assert sim.status["restarts"] == 1 and sim.status["phase"] == "Running"
    (entry,) = sim.status["disruptions"]
    assert entry["reason"] == reason and entry["node"] == "node-1"  # a gone pod's node: its record's
    assert entry["time"] == "2026-01-01T12:00:00Z"  # a deletion's: its deadline minus its grace
    (event,) = events(sim, "Disrupted")
    assert event.startswith(f"worker-1 (pod demo-worker-1) on node node-1 {words} ({reason}")


def test_a_program_failure_is_no_disruption():
    sim = running(two_workers())
    sim.finish("demo-worker-1", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Failed" and "restarts" not in sim.status
    assert "disruptions" not in sim.status


def test_a_failed_init_container_is_the_programs_failure_not_a_disruption():
    """The training never started, but the job's own init container exited 1: not "no exit code"."""
    sim = running(two_workers())
    pod = sim.pod("demo-worker-1")
    pod["status"] = {
        "phase": "Failed",
        "initContainerStatuses": [{"name": "setup", "state": {"terminated": {"exitCode": 1}}}],
        "containerStatuses": [{"name": "pytorch", "state": {"waiting": {"reason": "PodInitializing"}}}],
    }
    sim.step()
    assert sim.status["phase"] == "Failed" and "restarts" not in sim.status
    assert "demo-worker-1 failed with exit code 1" in sim.cond("ReplicaFailure")["message"]


def test_debug_mode_recreates_a_lost_pod_but_restarts_nothing():
    sim = running(two_workers(runMode={"debug": {"enabled": True}}))
    sim.delete_object("Pod", "demo-worker-1")
    decision = sim.step()
    assert creates(decision) == ["demo-worker-1"] and deletes(decision) == {}
    assert "restarts" not in sim.status and len(events(sim, "PodDeleted")) == 1


def test_a_disruption_after_the_master_succeeded_changes_nothing():
    sim = running(job("PyTorchTrainingJob", {"replicaSpecs": [
        {"type": "master", "template": make_template(make_container("pytorch"))},
        {"type": "worker", "template": make_template(make_container("pytorch"))}]}))  # fmt: skip
    sim.finish("demo-master-0")
    sim.disrupt("demo-worker-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded" and "restarts" not in sim.status


# -- the attribution window ---------------------------------------------------------------------------


def test_a_peer_failure_seen_with_the_disruption_is_the_disruptions():
    sim = running(two_workers())
    sim.finish("demo-worker-0", exit_code=1)  # no finishedAt: judged at once, unless the round is disrupted
    sim.disrupt("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Running" and sim.status["restarts"] == 1 and charged(sim) == (0, 0)


def test_a_peer_failure_just_before_the_disruption_waits_for_it_and_is_not_charged():
    """The kubelet killed worker-1 before its status said why: worker-0's collective failed first."""
    sim = running(two_workers())
    failed_at = sim.now
    sim.finish("demo-worker-0", exit_code=1, finished_at=failed_at)
    sim.advance(1)
    decision = sim.step()
    assert sim.status["phase"] == "Running" and charged(sim) == (0, 0)
    assert deletes(decision) == {} and decision.requeue_after == ATTRIBUTION_WINDOW_SECONDS - 1
    assert records(sim)["demo-worker-0"]["phase"] == "Running"  # not judged yet
    assert (
        "judging it at 2026-01-01T12:00:05Z unless a disruption explains it"
        in (sim.cond("ReplicaFailure")["message"])
    )
    sim.advance(ATTRIBUTION_WINDOW_SECONDS - 2)
    sim.disrupt("demo-worker-1", "TerminationByKubelet", "node shutdown", delete=False)
    sim.pod("demo-worker-1")["status"]["phase"] = "Failed"
    sim.step()
    assert sim.status["phase"] == "Running" and sim.status["restarts"] == 1 and charged(sim) == (0, 0)


def test_a_failure_is_judged_once_the_window_passed_without_a_disruption():
    sim = running(two_workers())
    sim.finish("demo-worker-0", exit_code=1, finished_at=sim.now)
    sim.advance(ATTRIBUTION_WINDOW_SECONDS - 1)
    sim.step()
    assert sim.status["phase"] == "Running"
    sim.advance(1)
    sim.step()
    assert sim.status["phase"] == "Failed" and "restarts" not in sim.status
    assert "demo-worker-0 failed with exit code 1" in sim.cond("ReplicaFailure")["message"]
    # A disruption after the window changes nothing: the job has ended.
    sim.disrupt("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Failed" and "restarts" not in sim.status


def test_a_held_failure_charges_the_budget_once_and_reports_an_exhausted_one_once():
    manifest = job("TensorFlowTrainingJob", {"runPolicy": {"backoffLimit": 1}, "replicaSpecs": [
        {"type": "chief", "template": make_template(make_container("tensorflow"))},
        {"type": "worker", "replicas": 2, "restartPolicy": "OnFailure",
         "template": make_template(make_container("tensorflow"))}]})  # fmt: skip
    sim = running(manifest, graceful=False)
    sim.finish("demo-worker-0", exit_code=1, finished_at=sim.now)
    sim.step()
    sim.advance(ATTRIBUTION_WINDOW_SECONDS)
    sim.step()
    sim.step()
    assert sim.status["backoffCount"] == 1 and records(sim)["demo-worker-0"]["restartCount"] == 1
    sim.run_all()
    sim.step()
    sim.finish("demo-worker-0", exit_code=1, finished_at=sim.now)
    sim.step()
    sim.advance(ATTRIBUTION_WINDOW_SECONDS)
    for _ in range(3):
        sim.step()
    # A TF worker that failed for good leaves the job running (its chief decides): reported once.
    assert sim.status["phase"] == "Running" and sim.status["backoffCount"] == 1
    assert len(events(sim, "BackoffLimitExceeded")) == 1


# -- pods stuck terminating ---------------------------------------------------------------------------

TAINTED = ("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")


@pytest.mark.parametrize(
    "manifest", [two_workers(), job("GenericJob", ALONE["GenericJob"])], ids=["whole", "alone"]
)
def test_a_pod_the_taint_manager_deleted_is_force_deleted_at_once(manifest):
    sim = running(manifest)
    uid = sim.pod("demo-worker-1")["metadata"]["uid"]
    sim.disrupt("demo-worker-1", *TAINTED, grace=30)
    decision = sim.step()
    force = deletes(decision)["demo-worker-1"]
    assert (force.uid, force.grace_period_seconds) == (uid, 0)
    (event,) = events(sim, "ForceDelete")
    assert "node.kubernetes.io/out-of-service" in event
    assert (
        "was deleted by the taint manager (its node is unreachable or not ready)"
        in events(sim, "Disrupted")[0]
    )
    sim.finish_deletes()  # the pods deleted gracefully go too
    assert "demo-worker-1" in creates(sim.step())


def test_an_evicted_pod_still_terminating_waits_for_its_kubelet_then_r8():
    sim = running(two_workers())
    sim.disrupt("demo-worker-1", grace=30)
    decision = sim.step()
    assert "demo-worker-1" not in deletes(decision)
    sim.delete_object("Pod", "demo-worker-0")  # worker-0 goes; worker-1's kubelet never confirms
    decision = sim.step()
    assert decision.requeue_after == pytest.approx(330) and creates(decision) == []
    sim.advance(330)
    force = deletes(sim.step())["demo-worker-1"]
    assert force.grace_period_seconds == 0


# -- a second disruption during a restart -------------------------------------------------------------


def test_a_disruption_of_a_pod_being_replaced_is_part_of_the_same_restart():
    sim = running(two_workers())
    sim.disrupt("demo-worker-1")
    sim.step()
    sim.disrupt("demo-worker-0", *TAINTED)  # our graceful delete of worker-0 meets its node's loss
    decision = sim.step()
    assert deletes(decision)["demo-worker-0"].grace_period_seconds == 0
    assert sim.status["restarts"] == 1 and len(sim.status["disruptions"]) == 1


def test_a_disruption_of_the_restarted_job_restarts_it_again():
    sim = running(two_workers())
    sim.disrupt("demo-worker-1")
    sim.step()
    sim.finish_deletes()
    sim.step()
    sim.run_all(["demo-worker-0"])
    sim.step()
    sim.advance(10)
    sim.disrupt("demo-worker-0", "PreemptionByScheduler", "preempted", node="node-2")
    decision = sim.step()
    assert sim.status["restarts"] == 2
    assert [e["restart"] for e in sim.status["disruptions"]] == [1, 2]
    assert sorted(deletes(decision)) == ["demo-worker-1"]
    sim.finish_deletes()
    sim.step()
    assert {p["metadata"]["annotations"][ANNOTATION_JOB_RESTARTS] for p in sim.pods().values()} == {"2"}
    assert charged(sim) == (0, 0) and sim.status["phase"] == "Running"


def test_status_keeps_the_latest_disruptions():
    sim = running(job("GenericJob", ALONE["GenericJob"]), graceful=False)
    for _ in range(DISRUPTIONS_KEPT + 5):
        sim.advance(60)
        sim.set_pod("demo-worker-0", "Failed", reason="Evicted")
        sim.step()
        sim.step()
        sim.run_all()
        sim.step()
    kept = sim.status["disruptions"]
    assert len(kept) == DISRUPTIONS_KEPT and kept[-1]["time"] == "2026-01-01T12:25:00Z"
    assert charged(sim) == (0, 0)


# -- restart safety and idempotence -------------------------------------------------------------------


def test_the_same_observation_decides_the_same_and_counts_the_restart_once():
    sim = running(two_workers())
    sim.disrupt("demo-worker-1")
    first = sim.decide()
    assert sim.decide() == first
    sim.step()
    again = sim.decide()
    assert again.status["restarts"] == 1 and len(again.status["disruptions"]) == 1
    assert sim.decide() == again


@pytest.mark.parametrize("kind", ["PyTorchTrainingJob", "MPIJob", "DeepSpeedJob"])
def test_a_crash_anywhere_in_a_restart_converges_to_the_same_restart(kind):
    """A crash after any prefix (and any subset of a concurrent run) of the decisions of a restart, status
    written first as the runtime does, or a crash before the status write (then nothing ran): the next
    reconciles continue from what they observe and the status, and end where an uncrashed restart ends."""
    base = running(job(kind, WHOLE[kind]), graceful=False)
    base.disrupt("demo-worker-1")

    def play(crash: tuple[int, int, int, bool] | None) -> Sim:
        sim = copy.deepcopy(base)
        for step in range(6):
            if crash is not None and crash[0] == step:
                sim.step(write_status=crash[3], prefix=crash[1] if crash[3] else 0, subset=crash[2])
            else:
                sim.step()
            sim.finish_deletes()
            sim.run_all()
        sim.settle()
        return sim

    clean = play(None)
    assert clean.status["restarts"] == 1 and clean.status["phase"] == "Running"
    reference = copy.deepcopy(base)
    points = []
    for step in range(6):
        decision = reference.step()
        points += [(step, k, s, True) for k in range(len(decision.actions)) for s in (0, 1, 3)]
        points.append((step, 0, 0, False))
        reference.finish_deletes()
        reference.run_all()
    for point in points:
        crashed = play(point)
        assert crashed.already_exists == [], point
        assert sorted(crashed.objects) == sorted(clean.objects), point
        assert crashed.status["restarts"] == 1, point
        if point[3]:
            assert crashed.status["disruptions"] == clean.status["disruptions"], point
        else:
            # A controller down until the evicted pod was gone never saw why: it was deleted from outside.
            (entry,) = crashed.status["disruptions"]
            assert entry["reason"] in ("EvictionByEvictionAPI", "DeletedFromOutside"), point
            same = ("replicaType", "replicaIndex", "pod", "uid", "node", "action", "restart")
            assert {k: entry[k] for k in same} == {k: clean.status["disruptions"][0][k] for k in same}
        assert charged(crashed) == (0, 0), point
        pods = crashed.pods().values()
        assert {p["metadata"]["annotations"][ANNOTATION_JOB_RESTARTS] for p in pods} == {"1"}, point


def test_a_lost_status_write_never_undoes_a_restart():
    """Pods of a later restart than the status says (a status that went back) are kept, not re-restarted."""
    sim = running(two_workers(), graceful=False)
    sim.disrupt("demo-worker-1")
    sim.settle()
    sim.run_all()
    sim.settle()
    uids = {n: p["metadata"]["uid"] for n, p in sim.pods().items()}
    sim.job["status"].pop("restarts")
    decision = sim.step()
    assert deletes(decision) == {} and sim.status["restarts"] == 1
    assert {n: p["metadata"]["uid"] for n, p in sim.pods().items()} == uids


def test_a_pause_during_a_restart_then_a_resume_runs_the_job_once_more():
    sim = running(two_workers(), graceful=False)
    sim.disrupt("demo-worker-1")
    sim.step()
    sim.job["spec"]["runMode"] = {"pause": {"enabled": True}}
    sim.step()
    sim.finish_deletes()
    sim.step()
    assert sim.status["phase"] == "Paused" and sim.pods() == {}
    sim.job["spec"]["runMode"]["pause"]["enabled"] = False
    sim.step()
    assert sorted(sim.pods()) == ["demo-worker-0", "demo-worker-1"]
    sim.run_all()
    sim.step()
    assert sim.status["phase"] == "Running" and charged(sim) == (0, 0) and sim.status["restarts"] == 1


# -- status shape -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(WHOLE))
def test_the_disruption_status_is_kept_by_the_crd_schema(kind):
    schema = crd(KINDS[kind])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    sim = running(job(kind, WHOLE[kind]))
    sim.disrupt("demo-worker-1")
    sim.step()
    assert _pruned(sim.status, schema, "status") == []
    assert KINDS[kind].model_validate({**job(kind, WHOLE[kind]), "status": sim.status}).status.restarts == 1


def test_a_running_replica_records_its_node():
    sim = running(job("GenericJob", EVERY_KIND["GenericJob"]))
    assert {r["nodeName"] for r in records(sim).values()} == {"node-1"}


def test_an_invalid_spec_keeps_the_disruptions_it_had():
    sim = running(two_workers())
    sim.disrupt("demo-worker-1")
    sim.step()
    sim.job["spec"]["replicaSpecs"][0]["replicas"] = -1
    sim.step()
    assert sim.status["phase"] == "Failed" and sim.status["restarts"] == 1
    assert len(sim.status["disruptions"]) == 1


def test_the_window_is_counted_from_the_containers_end():
    sim = running(two_workers())
    sim.finish(
        "demo-worker-0", exit_code=1, finished_at=sim.now - timedelta(seconds=ATTRIBUTION_WINDOW_SECONDS)
    )
    sim.step()
    assert sim.status["phase"] == "Failed"
