"""The engine's shared rules, played on GenericJobs through the in-memory Sim (engine_sim.py)."""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import time

import pytest

from t9k_provider.controller.engine import Create, Delete, Observed
from t9k_provider.controller.engine.initwait import wait_container
from t9k_provider.controller.reconcile import reconcile
from t9k_provider.jobs.contract import (
    ANNOTATION_RESTART_COUNT,
    LABEL_JOB_UID,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)
from tests.controller.engine_sim import Sim, job
from tests.support.builders import make_container, make_template


def generic(replicas: int = 2, policy: str = "OnFailure", limit: int = 0, **spec: object) -> dict:
    body = {
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": replicas,
                "restartPolicy": {"policy": policy, "limit": limit},
                "template": make_template(make_container("main", command=["python", "train.py"])),
            }
        ],
        **spec,
    }
    return job("GenericJob", body)


def two_types(**spec: object) -> dict:
    return job(
        "GenericJob",
        {
            "replicaSpecs": [
                {"type": "master", "replicas": 1, "template": make_template()},
                {"type": "worker", "replicas": 2, "template": make_template()},
            ],
            **spec,
        },
    )


def started(manifest: dict) -> Sim:
    sim = Sim(manifest)
    sim.step()
    sim.run_all()
    sim.step()
    return sim


# -- names, labels, owner references ----------------------------------------------------------------


def test_pods_have_deterministic_names_labels_and_owner():
    sim = Sim(generic())
    sim.step()
    assert sim.kinds("Pod") == ["demo-worker-0", "demo-worker-1"]
    pod = sim.pod("demo-worker-1")
    labels = pod["metadata"]["labels"]
    assert labels["tensorstack.dev/owner-name"] == "demo"
    assert labels["tensorstack.dev/component"] == "genericjob"
    assert labels["tensorstack.dev/component-type"] == "user"
    assert labels["genericjob"] == "demo" and labels["genericjob-replica"] == "demo-worker-1"
    assert labels[LABEL_REPLICA_TYPE] == "worker" and labels[LABEL_REPLICA_INDEX] == "1"
    assert labels[LABEL_JOB_UID] == "uid-demo"
    assert pod["metadata"]["annotations"][ANNOTATION_RESTART_COUNT] == "0"
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "GenericJob",
            "name": "demo",
            "uid": "uid-demo",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["spec"]["restartPolicy"] == "Never"


def test_template_restart_policy_is_forced_to_never():
    manifest = generic()
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["restartPolicy"] = "OnFailure"
    sim = Sim(manifest)
    sim.step()
    assert sim.pod("demo-worker-0")["spec"]["restartPolicy"] == "Never"


def test_template_labels_kept_but_controller_labels_win():
    manifest = generic(replicas=1)
    manifest["spec"]["replicaSpecs"][0]["template"]["metadata"] = {
        "labels": {"app": "x", LABEL_REPLICA_INDEX: "7"},
        "annotations": {"note": "y"},
    }
    sim = Sim(manifest)
    sim.step()
    meta = sim.pod("demo-worker-0")["metadata"]
    assert meta["labels"]["app"] == "x" and meta["labels"][LABEL_REPLICA_INDEX] == "0"
    assert meta["annotations"]["note"] == "y"


def test_same_observation_gives_same_decision():
    manifest = generic()
    sim = Sim(manifest)
    assert sim.decide() == sim.decide()


def test_job_being_deleted_gets_no_actions():
    manifest = generic()
    manifest["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    decision = Sim(manifest).decide()
    assert decision.actions == [] and decision.requeue_after is None


# -- GenericJob services and substitution -----------------------------------------------------------


def test_no_service_without_ports():
    sim = Sim(generic())
    sim.step()
    assert sim.kinds("Service") == []


def test_services_are_headless_and_created_before_pods():
    sim = Sim(generic(service={"ports": [{"name": "http", "port": 2222}]}))
    decision = sim.step()
    kinds = [a.obj["kind"] for a in decision.actions if isinstance(a, Create)]
    assert kinds == ["Service", "Service", "Pod", "Pod"]
    svc = sim.objects[("Service", "demo-worker-0")]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["ports"] == [{"name": "http", "port": 2222, "protocol": "TCP", "targetPort": 2222}]
    assert svc["spec"]["selector"] == {
        LABEL_JOB_UID: "uid-demo",
        LABEL_REPLICA_TYPE: "worker",
        LABEL_REPLICA_INDEX: "0",
    }
    assert svc["metadata"]["ownerReferences"][0]["uid"] == "uid-demo"


def test_variable_substitution_in_command_args_and_env():
    tf_config = (
        '{"task":{"type":"$(type)","index":$(rank)},"cluster":{"worker":'
        '["$(service.worker[0].host):$(service.port[http])","$(service.worker[1].host):$(service.port[http])"]}}'
    )
    c = make_container(
        "main",
        command=["run", "$(type)-$(rank)", "$(replicas[worker])"],
        args=["$(MASTER_ADDR)"],
        env=[
            {"name": "TF_CONFIG", "value": tf_config},
            {"name": "REF", "valueFrom": {"fieldRef": {"fieldPath": "$(rank)"}}},
        ],
    )
    manifest = job(
        "GenericJob",
        {
            "service": {"ports": [{"name": "http", "port": 2222}]},
            "replicaSpecs": [{"type": "worker", "replicas": 2, "template": make_template(c)}],
        },
    )
    sim = Sim(manifest)
    sim.step()
    spec = sim.pod("demo-worker-1")["spec"]["containers"][0]
    assert spec["command"] == ["run", "worker-1", "2"]
    assert spec["args"] == ["$(MASTER_ADDR)"]  # not GenericJob grammar: left for Kubernetes
    assert spec["env"][0]["value"] == (
        '{"task":{"type":"worker","index":1},"cluster":{"worker":'
        '["demo-worker-0:2222","demo-worker-1:2222"]}}'
    )
    assert spec["env"][1]["valueFrom"] == {"fieldRef": {"fieldPath": "$(rank)"}}


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (["$(replicas[ps])"], "unknown replica type 'ps'"),
        (["$(service.worker[5].host)"], "out of range"),
        (["$(service.port[grpc])"], "unknown port 'grpc'"),
    ],
)
def test_bad_substitution_fails_the_job_with_the_field_path(command, words):
    manifest = job(
        "GenericJob",
        {
            "service": {"ports": [{"name": "http", "port": 1}]},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 2,
                    "template": make_template(make_container("main", command=command)),
                }
            ],
        },
    )
    decision = Sim(manifest).decide()
    failed = next(c for c in decision.status["conditions"] if c["type"] == "Failed")
    assert decision.status["phase"] == "Failed"
    assert "spec.replicaSpecs[0].template.spec.containers[0].command[0]" in failed["message"]
    assert words in failed["message"]
    assert decision.actions == [] and decision.requeue_after is None


def test_service_variables_need_spec_service():
    manifest = generic()
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"] = [
        "$(service.worker[0].host)"
    ]
    decision = Sim(manifest).decide()
    assert decision.status["phase"] == "Failed"
    assert "needs spec.service.ports" in decision.status["conditions"][-1]["message"]


# -- invalid and unsatisfiable specs ----------------------------------------------------------------


def test_invalid_spec_fails_with_field_path_without_requeue():
    manifest = generic()
    manifest["spec"]["replicaSpecs"][0]["replicas"] = 0
    decision = Sim(manifest).decide()
    assert decision.status["phase"] == "Failed"
    failed = next(c for c in decision.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec" and "spec.replicaSpecs[0].replicas" in failed["message"]
    assert decision.actions == [] and decision.requeue_after is None
    assert decision.events[0].reason == "InvalidSpec"


def test_invalid_spec_decision_is_stable():
    manifest = generic()
    manifest["spec"]["replicaSpecs"][0]["replicas"] = "many"
    sim = Sim(manifest)
    first = sim.step()
    sim.advance(60)
    second = sim.step()
    assert first.status == second.status and second.events == []


def test_name_too_long_is_reported_not_retried():
    manifest = generic()
    manifest["metadata"]["name"] = "a" * 60
    decision = Sim(manifest).decide()
    assert decision.status["phase"] == "Failed"
    assert "metadata.name" in decision.status["conditions"][-1]["message"]
    assert decision.actions == []


def test_unknown_type_in_rules_is_reported():
    manifest = generic(successRules=[{"ps": [0]}])
    decision = Sim(manifest).decide()
    assert decision.status["phase"] == "Failed"
    assert "spec.successRules[0].ps" in decision.status["conditions"][-1]["message"]


def test_status_from_the_controller_never_invalidates_the_spec():
    manifest = generic()
    manifest["status"] = {"phase": "Pending", "weird": {"x": 1}, "tasks": "garbage"}
    decision = Sim(manifest).decide()
    assert decision.status["phase"] == "Pending"


# -- phases and conditions --------------------------------------------------------------------------


def test_phase_pending_then_running_with_conditions():
    sim = Sim(generic())
    sim.step()
    assert sim.status["phase"] == "Pending"
    assert sim.cond("Initialized")["status"] == "False"
    sim.step()  # pods observed (Pending)
    assert sim.cond("Initialized")["status"] == "True"
    assert sim.status["phase"] == "Pending"
    sim.run_all()
    sim.step()
    assert sim.status["phase"] == "Running"
    assert sim.cond("Running") == {
        "type": "Running",
        "status": "True",
        "reason": "-",
        "message": "All pods are running normally.",
        "lastTransitionTime": "2026-01-01T12:00:00Z",
    }
    assert sim.cond("ReplicaFailure")["status"] == "False"
    assert sim.status["aggregate"] == {
        "creating": 0,
        "pending": 0,
        "running": 2,
        "succeeded": 0,
        "failed": 0,
        "unknown": 0,
        "deleted": 0,
    }
    assert sim.status["tasks"][0]["status"][0]["containers"] == [{"name": "main", "state": "running"}]


def test_last_transition_time_changes_only_on_flip():
    sim = started(generic())
    first = copy.deepcopy(sim.cond("Running"))
    sim.advance(30)
    sim.step()
    assert sim.cond("Running") == first
    sim.finish("demo-worker-0")
    sim.finish("demo-worker-1")
    sim.step()
    running = sim.cond("Running")
    assert running["status"] == "False" and running["lastTransitionTime"] == "2026-01-01T12:00:30Z"


def test_default_rules_success_when_all_succeeded():
    sim = started(generic())
    sim.finish("demo-worker-0")
    sim.step()
    assert sim.status["phase"] == "Running"
    sim.finish("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Succeeded"
    assert sim.cond("Completed")["status"] == "True"
    assert sim.cond("Running")["status"] == "False"
    assert sim.cond("Failed") is None
    assert sim.status["completionTime"] == "2026-01-01T12:00:00Z"
    types = [c["type"] for c in sim.status["conditions"]]
    assert len(types) == len(set(types))


def test_default_rules_failure_on_any_permanent_failure():
    sim = started(generic(policy="Never"))
    sim.finish("demo-worker-1", exit_code=2)
    sim.step()
    assert sim.status["phase"] == "Failed"
    assert sim.cond("Failed")["message"] == 'The job is failed with rule: { "worker": [1] }'
    assert sim.cond("Completed") == {**sim.cond("Completed"), "status": "False", "reason": "Failed"}
    assert sim.cond("Running")["status"] == "False"
    assert sim.cond("ReplicaFailure")["status"] == "True"


def test_explicit_rules_over_two_types():
    manifest = two_types(successRules=[{"master": [0]}], failureRules=[{"worker": [0, 1]}])
    sim = started(manifest)
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Running"  # one failed worker does not meet the rule
    sim.finish("demo-master-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"
    assert sim.cond("Completed")["message"] == 'The job succeeded with rule: { "master": [0] }'


def test_failure_wins_when_both_rules_hold_in_one_observation():
    manifest = two_types(successRules=[{"master": [0]}], failureRules=[{"worker": [1]}])
    sim = started(manifest)
    sim.finish("demo-master-0")
    sim.finish("demo-worker-1", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Failed"


def test_terminal_phase_is_sticky():
    sim = started(generic(policy="Never"))
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    sim.finish("demo-worker-1")
    sim.advance(10)
    sim.step()
    assert sim.status["phase"] == "Failed"
    assert sim.cond("Completed")["status"] == "False"


# -- restarts ---------------------------------------------------------------------------------------


def test_on_failure_restarts_up_to_the_per_replica_limit():
    sim = started(generic(policy="OnFailure", limit=2))
    for attempt in (1, 2):
        sim.finish("demo-worker-0", exit_code=1)
        decision = sim.step()
        assert next(a for a in decision.actions if isinstance(a, Delete)).name == "demo-worker-0"
        assert sim.replica("demo-worker-0")["restartCount"] == attempt
        assert sim.replica("demo-worker-0")["phase"] == "Creating"
        assert sim.cond("ReplicaFailure")["status"] == "True"
        sim.step()  # recreate
        assert sim.pod("demo-worker-0")["metadata"]["annotations"][ANNOTATION_RESTART_COUNT] == str(attempt)
        sim.run_all()
        sim.step()
    assert sim.status["tasks"][0]["restartCount"] == 2
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Failed"  # limit exhausted: counts as failed for the rules
    assert "backoffCount" not in sim.status


def test_limit_is_per_replica_not_per_type():
    sim = started(generic(policy="OnFailure", limit=1))
    sim.finish("demo-worker-0", exit_code=1)
    sim.finish("demo-worker-1", exit_code=1)
    sim.step()
    assert sim.replica("demo-worker-0")["restartCount"] == 1
    assert sim.replica("demo-worker-1")["restartCount"] == 1
    assert sim.status["phase"] == "Running"


def test_never_policy_does_not_restart():
    sim = started(generic(policy="Never", limit=5))
    sim.finish("demo-worker-0", exit_code=1)
    decision = sim.step()
    assert not [a for a in decision.actions if isinstance(a, Delete)]
    assert sim.replica("demo-worker-0")["phase"] == "Failed"


def test_always_restarts_succeeded_replicas_until_the_limit():
    sim = started(generic(replicas=1, policy="Always", limit=1))
    sim.finish("demo-worker-0")
    sim.step()
    assert sim.replica("demo-worker-0")["restartCount"] == 1
    sim.step()
    sim.run_all()
    sim.step()
    sim.finish("demo-worker-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"


def test_restart_is_counted_once_per_failed_pod():
    sim = started(generic(policy="OnFailure", limit=3))
    sim.finish("demo-worker-0", exit_code=1)
    first = sim.step(prefix=0)  # status written, crash before the delete
    again = sim.step()
    assert first.status["tasks"] == again.status["tasks"]
    assert sim.replica("demo-worker-0")["restartCount"] == 1


def test_eviction_is_recreated_without_using_the_budget():
    sim = started(generic(policy="Never"))
    sim.set_pod("demo-worker-0", "Failed", reason="Evicted")
    sim.step()
    assert sim.replica("demo-worker-0")["restartCount"] == 0
    assert sim.replica("demo-worker-0")["phase"] == "Creating"
    sim.step()
    assert sim.pod("demo-worker-0")["status"]["phase"] == "Pending"
    assert sim.status["phase"] == "Running"
    (event,) = [e for e in sim.events if e.reason == "Disrupted"]
    assert event.type == "Warning"
    assert event.message.startswith(
        "worker-0 (pod demo-worker-0) on an unknown node was evicted by its node's"
    )
    assert event.message.endswith("(Evicted): recreating this replica, charged to no budget")


def test_failure_without_exit_code_is_retryable():
    sim = started(generic(policy="Never"))
    sim.set_pod("demo-worker-0", "Failed")
    sim.step()
    sim.step()
    assert ("Pod", "demo-worker-0") in sim.objects and sim.replica("demo-worker-0")["restartCount"] == 0


def test_pod_deleted_from_outside_is_recreated_without_using_the_budget():
    sim = started(generic(policy="Never"))
    sim.delete_object("Pod", "demo-worker-1")
    sim.step()
    assert ("Pod", "demo-worker-1") in sim.objects
    assert sim.replica("demo-worker-1")["restartCount"] == 0
    assert "deleted from outside" in sim.cond("ReplicaFailure")["message"]
    (event,) = [e for e in sim.events if e.reason == "Disrupted"]
    assert "worker-1 (pod demo-worker-1)" in event.message and "deleted from outside" in event.message


def test_finished_replica_is_never_rerun_when_its_pod_disappears():
    sim = started(generic())
    sim.finish("demo-worker-0")
    sim.step()
    sim.delete_object("Pod", "demo-worker-0")
    sim.step()
    sim.step()
    assert ("Pod", "demo-worker-0") not in sim.objects
    assert sim.replica("demo-worker-0")["phase"] == "Succeeded"
    sim.finish("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Succeeded"


def test_waits_for_terminating_pod_then_force_deletes_when_stuck():
    sim = started(generic(policy="OnFailure", limit=1))
    sim.graceful = True
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    assert sim.pod("demo-worker-0")["metadata"].get("deletionTimestamp")
    decision = sim.step()
    assert not any(isinstance(a, Create) for a in decision.actions)
    assert decision.requeue_after == pytest.approx(300)
    sim.advance(301)
    decision = sim.step()
    force = [a for a in decision.actions if isinstance(a, Delete)]
    assert force and force[0].grace_period_seconds == 0
    sim.step()
    assert sim.pod("demo-worker-0")["status"]["phase"] == "Pending"
    assert sim.replica("demo-worker-0")["restartCount"] == 1


def test_stray_and_duplicate_pods_are_deleted():
    sim = started(generic())
    stray = copy.deepcopy(sim.pod("demo-worker-1"))
    stray["metadata"].update(name="demo-worker-9", uid="x1")
    stray["metadata"]["labels"][LABEL_REPLICA_INDEX] = "9"
    dup = copy.deepcopy(sim.pod("demo-worker-0"))
    dup["metadata"].update(name="demo-worker-0-copy", uid="x2")
    sim.objects[("Pod", "demo-worker-9")] = stray
    sim.objects[("Pod", "demo-worker-0-copy")] = dup
    decision = sim.step()
    deleted = {(a.name, a.uid) for a in decision.actions if isinstance(a, Delete)}
    assert deleted == {("demo-worker-9", "x1"), ("demo-worker-0-copy", "x2")}


# -- cleanup ----------------------------------------------------------------------------------------


def _ended_with_one_running(policy: str) -> Sim:
    sim = started(
        two_types(successRules=[{"master": [0]}], failureRules=[{"master": [0]}], cleanUpPolicy=policy)
    )
    sim.finish("demo-master-0")
    sim.finish("demo-worker-0", exit_code=1)
    first = sim.step()
    assert sim.status["phase"] == "Succeeded"
    assert first.actions == [] and first.requeue_after is not None  # status first, cleanup afterwards
    return sim


@pytest.mark.parametrize(
    ("policy", "left"),
    [
        ("None", ["demo-master-0", "demo-worker-0", "demo-worker-1"]),
        ("Unfinished", ["demo-master-0", "demo-worker-0"]),
        ("All", []),
    ],
)
def test_cleanup_policy_after_terminal_status(policy, left):
    sim = _ended_with_one_running(policy)
    sim.step()
    assert sorted(sim.pods()) == left
    sim.step()
    assert sorted(sim.pods()) == left
    if policy == "Unfinished":
        assert sim.replica("demo-worker-1")["phase"] == "Deleted"
        assert sim.status["aggregate"]["deleted"] == 1


def test_cleanup_deletes_services_with_their_pods():
    sim = started(generic(policy="Never", cleanUpPolicy="All", service={"ports": [{"name": "p", "port": 1}]}))
    sim.finish("demo-worker-0")
    sim.finish("demo-worker-1")
    sim.step()
    sim.step()
    assert sim.kinds("Pod") == [] and sim.kinds("Service") == []


# -- deadline ---------------------------------------------------------------------------------------


def test_active_deadline_uses_a_timer_and_stops_unfinished_pods():
    manifest = job(
        "PyTorchTrainingJob",
        {
            "runPolicy": {"activeDeadlineSeconds": 100},
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": make_template(make_container("pytorch"))}
            ],
        },
    )
    sim = Sim(manifest)
    first = sim.step()
    assert first.requeue_after == pytest.approx(100)
    sim.run_all()
    sim.advance(40)
    assert sim.step().requeue_after == pytest.approx(60)
    sim.advance(60)
    decision = sim.step()
    assert sim.status["phase"] == "Failed"
    assert sim.cond("Failed")["reason"] == "DeadlineExceeded"
    assert decision.actions == []
    sim.step()
    assert sim.kinds("Pod") == []  # cleanUpPolicy None, but a deadline stops unfinished replicas


# -- pause and resume -------------------------------------------------------------------------------


def test_pause_deletes_pods_and_resume_recreates_with_resume_specs():
    """01-genericjob.md, 暂停模式: pausing deletes the replicas, finished ones too
    ("所有副本都已删除或正在删除"); a replica that succeeded keeps its outcome in the status and is not run
    again on resume."""
    manifest = generic(
        runMode={
            "pause": {
                "enabled": False,
                "resumeSpecs": [
                    {"type": "worker", "command": ["python", "resume.py"], "args": ["--from-checkpoint"]}
                ],
            }
        }
    )
    sim = started(manifest)
    sim.finish("demo-worker-1")
    sim.step()
    sim.job["spec"]["runMode"]["pause"]["enabled"] = True
    decision = sim.step()
    assert sorted(a.name for a in decision.actions if isinstance(a, Delete)) == [
        "demo-worker-0",
        "demo-worker-1",
    ]
    assert sim.status["phase"] == "Paused"
    assert sim.cond("Paused")["status"] == "True"
    assert sim.cond("Running")["status"] == "False"
    assert sim.replica("demo-worker-0")["phase"] == "Deleted"
    sim.step()
    assert sim.kinds("Pod") == []
    assert sim.replica("demo-worker-1")["phase"] == "Succeeded"
    sim.advance(50)
    sim.job["spec"]["runMode"]["pause"]["enabled"] = False
    sim.step()
    assert sim.status["phase"] == "Resuming"
    assert sim.status["startTime"] == "2026-01-01T12:00:50Z"
    assert sim.cond("Paused")["status"] == "False"
    container0 = sim.pod("demo-worker-0")["spec"]["containers"][0]
    assert container0["command"] == ["python", "resume.py"] and container0["args"] == ["--from-checkpoint"]
    assert ("Pod", "demo-worker-1") not in sim.objects  # the succeeded replica is not run again
    assert sim.replica("demo-worker-1")["phase"] == "Succeeded"
    sim.run_all()
    sim.step()
    assert sim.status["phase"] == "Running"
    assert sim.replica("demo-worker-0")["restartCount"] == 0


def test_resume_skip_init_container_drops_the_init_containers_of_that_type_only():
    """01-genericjob.md, 暂停模式: resumeSpecs.skipInitContainer makes the replica's init containers
    ineffective when it resumes; a type without it keeps them."""
    manifest = two_types(
        runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "worker", "skipInitContainer": True}]}}
    )
    for rs in manifest["spec"]["replicaSpecs"]:
        rs["template"]["spec"]["initContainers"] = [make_container("init")]
    sim = Sim(manifest)
    sim.step()
    assert sim.kinds("Pod") == []
    sim.job["spec"]["runMode"]["pause"]["enabled"] = False
    sim.step()
    assert "initContainers" not in sim.pod("demo-worker-0")["spec"]
    assert [c["name"] for c in sim.pod("demo-master-0")["spec"]["initContainers"]] == ["init"]


def test_paused_at_creation_creates_nothing():
    sim = Sim(generic(runMode={"pause": {"enabled": True}}))
    decision = sim.step()
    assert decision.actions == []
    assert sim.status["phase"] == "Paused"


# -- debug mode -------------------------------------------------------------------------------------


def test_debug_mode_replaces_commands_and_never_decides():
    manifest = two_types(
        runMode={
            "debug": {
                "enabled": True,
                "replicaSpecs": [{"type": "worker", "skipInitContainer": True, "command": ["/usr/bin/sshd"]}],
            }
        }
    )
    manifest["spec"]["replicaSpecs"][1]["template"]["spec"]["initContainers"] = [make_container("init")]
    sim = Sim(manifest)
    sim.step()
    worker = sim.pod("demo-worker-0")["spec"]
    assert worker["containers"][0]["command"] == ["/usr/bin/sshd"]
    assert "initContainers" not in worker
    # Not listed: the default debug command, not its training command (debug mode never starts training).
    assert sim.pod("demo-master-0")["spec"]["containers"][0]["command"] == ["sleep", "inf"]
    sim.run_all()
    sim.step()
    assert sim.status["phase"] == "Running"
    sim.finish("demo-worker-0", exit_code=1)
    sim.finish("demo-master-0")
    decision = sim.step()
    assert sim.status["phase"] == "Running" and decision.actions == []


def test_debug_mode_default_command_is_sleep_inf():
    sim = Sim(generic(runMode={"debug": {"enable": True}}))
    sim.step()
    main = sim.pod("demo-worker-0")["spec"]["containers"][0]
    assert main["command"] == ["sleep", "inf"] and "args" not in main


# -- T9k scheduler ----------------------------------------------------------------------------------


def test_podgroup_first_then_pods_with_scheduler_labels():
    sim = Sim(two_types(scheduler={"t9kScheduler": {"queue": "gpu", "priority": 50}}))
    decision = sim.step()
    assert [a.obj["kind"] for a in decision.actions] == ["PodGroup"]
    pg = sim.objects[("PodGroup", "demo")]
    assert pg["apiVersion"] == "scheduler.tensorstack.dev/v1beta1"
    assert pg["spec"] == {"minMember": 3, "queue": "gpu", "priority": 50}
    sim.step()
    pod = sim.pod("demo-worker-1")
    assert pod["spec"]["schedulerName"] == "t9k-scheduler"
    labels = pod["metadata"]["labels"]
    assert labels["scheduler.tensorstack.dev/group-name"] == "demo"
    assert labels["scheduler.tensorstack.dev/queue"] == "gpu"
    assert labels["scheduler.tensorstack.dev/role"] == "worker"


def test_podgroup_deleted_at_terminal_and_pause():
    sim = started(two_types(scheduler={"t9kScheduler": {"queue": "q"}}))
    sim.step()
    sim.run_all()
    sim.step()
    sim.job["spec"]["runMode"] = {"pause": {"enabled": True}}
    sim.step()
    assert sim.kinds("PodGroup") == []
    sim.job["spec"]["runMode"] = {"pause": {"enabled": False}}
    sim.step()
    assert sim.kinds("PodGroup") == ["demo"] and sim.kinds("Pod") == []
    sim.step()
    for name in sim.pods():
        sim.finish(name)
    sim.step()
    sim.step()
    assert sim.status["phase"] == "Succeeded" and sim.kinds("PodGroup") == []


# -- restart safety: a crash after any prefix of any decision converges to the same end -------------


def _world(sim: Sim, failed_uids: set[str]) -> None:
    """Between reconciles: pending pods start; worker-0's first two pods fail; every other pod succeeds."""
    for name, pod in sim.pods().items():
        phase = pod["status"]["phase"]
        if phase == "Pending":
            sim.set_pod(name, "Running")
        elif phase == "Running":
            uid = pod["metadata"]["uid"]
            if name == "demo-worker-0" and len(failed_uids) < 2:
                failed_uids.add(uid)
                sim.finish(name, exit_code=1)
            else:
                sim.finish(name)


def _crash_job() -> dict:
    return generic(
        policy="OnFailure", limit=3, service={"ports": [{"name": "p", "port": 1}]}, cleanUpPolicy="All"
    )


STEPS = 16


def _play(crash_at: tuple[int, int, bool] | None) -> Sim:
    sim = Sim(_crash_job())
    failed: set[str] = set()
    for step in range(STEPS):
        if crash_at is not None and crash_at[0] == step:
            sim.step(write_status=crash_at[2], prefix=crash_at[1])
        else:
            sim.step()
        _world(sim, failed)
    return sim


def _crash_points() -> list[tuple[int, int, bool]]:
    reference = Sim(_crash_job())
    failed: set[str] = set()
    points = []
    for step in range(STEPS):
        decision = reference.step()
        points += [(step, k, w) for k in range(len(decision.actions)) for w in (True, False)]
        _world(reference, failed)
    return points


@pytest.mark.parametrize("crash_at", _crash_points())
def test_crash_after_any_prefix_converges(crash_at):
    clean = _play(None)
    crashed = _play(crash_at)
    assert crashed.already_exists == []
    assert crashed.status["phase"] == clean.status["phase"] == "Succeeded"
    assert (
        crashed.replica("demo-worker-0")["restartCount"]
        == clean.replica("demo-worker-0")["restartCount"]
        == 2
    )
    assert sorted(crashed.objects) == sorted(clean.objects)
    names = [(k, n) for k, n, _ in crashed.created]
    assert names.count(("Pod", "demo-worker-1")) == 1  # never re-run


def test_observed_is_not_mutated():
    manifest = generic()
    observed = Observed(job=manifest, children=[], now=Sim(manifest).now)
    snapshot = copy.deepcopy(manifest)
    reconcile(observed)
    assert manifest == snapshot


# -- the peer wait init container, run for real (loopback only) ------------------------------------------


def _run_wait(targets: list[str], timeout: int) -> subprocess.CompletedProcess[str]:
    spec = wait_container("ignored-image", targets, timeout=timeout)
    env = {**os.environ, **{e["name"]: e["value"] for e in spec["env"]}}
    return subprocess.run(spec["command"], env=env, capture_output=True, text=True, timeout=30, check=False)


def test_wait_container_returns_once_peers_are_reachable():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        started = time.monotonic()
        done = _run_wait(["localhost", f"127.0.0.1:{port}"], timeout=20)
    assert done.returncode == 0 and time.monotonic() - started < 10
    assert f"127.0.0.1:{port} is reachable" in done.stdout


def test_wait_container_gives_up_after_its_timeout_without_failing_the_pod():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    started = time.monotonic()
    done = _run_wait([f"127.0.0.1:{port}"], timeout=2)  # nothing listens any more
    assert done.returncode == 0 and 2 <= time.monotonic() - started < 15
    assert "giving up" in done.stderr


def test_podgroup_follows_replica_changes_and_out_of_range_replicas_go():
    sim = started(generic(replicas=3, scheduler={"t9kScheduler": {"queue": "q", "priority": 5}}))
    sim.step()
    sim.run_all()
    sim.step()
    assert sim.objects[("PodGroup", "demo")]["spec"]["minMember"] == 3
    sim.job["spec"]["replicaSpecs"][0]["replicas"] = 2
    sim.job["spec"]["scheduler"]["t9kScheduler"]["priority"] = 9
    decision = sim.step()
    assert sim.objects[("PodGroup", "demo")]["spec"] == {"minMember": 2, "queue": "q", "priority": 9}
    assert [(a.kind, a.name) for a in decision.actions if isinstance(a, Delete)] == [("Pod", "demo-worker-2")]
    assert [r["name"] for r in sim.status["tasks"][0]["status"]] == ["demo-worker-0", "demo-worker-1"]


def test_unfinished_cleanup_removes_a_pod_that_was_being_replaced():
    manifest = two_types(successRules=[{"master": [0]}], cleanUpPolicy="Unfinished")
    manifest["spec"]["replicaSpecs"][1]["restartPolicy"] = {"policy": "OnFailure", "limit": 3}
    sim = started(manifest)
    sim.finish("demo-worker-0", exit_code=1)
    sim.step(prefix=0)  # restart decided and counted, the delete never ran
    sim.finish("demo-master-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"
    sim.step()
    assert sorted(sim.pods()) == ["demo-master-0"]


# -- status shape ---------------------------------------------------------------------------------------


def test_tasks_list_their_replicas_under_status_as_the_guides_write():
    """01-genericjob.md, 副本的状态: `status.tasks[].status[]` (name, uid, phase, containers)."""
    sim = started(generic())
    (task,) = sim.status["tasks"]
    assert sorted(task) == ["restartCount", "status", "type"]
    assert [r["name"] for r in task["status"]] == ["demo-worker-0", "demo-worker-1"]
    assert {"name", "uid", "phase", "containers"} <= set(task["status"][0])


def test_a_status_an_older_controller_wrote_under_replicas_is_read_and_rewritten():
    """Upgrades: the restart bookkeeping of `tasks[].replicas[]` (controllers before 0.2) carries over."""
    sim = started(generic(limit=2))
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    sim.run_all()
    sim.step()
    assert sim.replica("demo-worker-0")["restartCount"] == 1
    for task in sim.job["status"]["tasks"]:
        task["replicas"] = task.pop("status")  # as the older controller wrote it
    sim.step()
    (task,) = sim.status["tasks"]
    assert "replicas" not in task and sim.replica("demo-worker-0")["restartCount"] == 1
    assert [a for a in sim.decide().actions if a.obj.get("kind") == "Pod"] == []  # nothing re-run
