"""Random worlds: pods fail, succeed, get evicted, disrupted (DisruptionTarget, then a graceful deletion, the
taint manager's among them) or deleted, the controller crashes mid-decision (after any subset of a run of
concurrent actions).

Whatever happens, the engine must keep its invariants: no duplicate creates, budgets never exceeded and
charged only for the program's failures, a finished replica never re-run but by a whole restart, no pod
created while one of an earlier whole restart is left, terminal phases sticky, conditions consistent
(docs/controller.md#r1, #r2, #r3, #r11, #disruptions).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from t9k_provider.controller.engine.disruptions import job_restart_of
from t9k_provider.jobs.contract import task_replicas
from tests.controller.engine_sim import Sim, job
from tests.support.builders import make_container, make_template

WORLD_EVENTS = (
    "start", "succeed", "fail1", "fail137", "evict", "disrupt", "taint", "gone", "delete", "crash", "tick",
    "pause",
)  # fmt: skip


def manifest(kind: str, policy: str) -> dict:
    if kind == "GenericJob":
        generic_policy = "OnFailure" if policy == "ExitCode" else policy
        return job(
            kind,
            {
                "replicaSpecs": [
                    {
                        "type": "master",
                        "replicas": 1,
                        "restartPolicy": {"policy": generic_policy, "limit": 2},
                        "template": make_template(),
                    },
                    {
                        "type": "worker",
                        "replicas": 2,
                        "restartPolicy": {"policy": generic_policy, "limit": 1},
                        "template": make_template(),
                    },
                ],
                "successRules": [{"master": [0]}],
                "failureRules": [{"worker": [0, 1]}],
                "cleanUpPolicy": "Unfinished",
            },
        )
    return job(
        kind,
        {
            "runPolicy": {"backoffLimit": 2, "cleanUpPolicy": "All"},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 3,
                    "restartPolicy": policy,
                    "template": make_template(make_container("pytorch")),
                }
            ],
        },
    )


def limit_of(kind: str, replica: str) -> int:
    return (2 if replica.endswith("master-0") else 1) if kind == "GenericJob" else 2


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["GenericJob", "PyTorchTrainingJob"]),
    policy=st.sampled_from(["Never", "OnFailure", "Always", "ExitCode"]),
    script=st.lists(
        st.tuples(st.sampled_from(WORLD_EVENTS), st.integers(0, 2), st.integers(0, 6), st.integers(0, 7)),
        min_size=5,
        max_size=40,
    ),
)
def test_invariants_hold_in_random_worlds(kind, policy, script):
    if kind == "GenericJob" and policy == "ExitCode":
        policy = "OnFailure"
    sim = Sim(manifest(kind, policy))
    sim.graceful = True  # a disrupted pod stays terminating until "gone" (or a force delete)
    sim.step()
    sim.finish_deletes()
    succeeded: dict[str, tuple[str, int]] = {}  # replica -> (uid, the job's restart) when it succeeded
    program_ends = 0  # fail1, fail137 and succeed events: what may be charged to a budget
    terminal: str | None = None
    for event, which, prefix, subset in script:
        pods = sorted(sim.pods())
        name = pods[which % len(pods)] if pods else None
        phase = sim.pod(name)["status"]["phase"] if name else None
        live = phase in ("Pending", "Running") and not sim.pod(name)["metadata"].get("deletionTimestamp")
        # Half the failures carry the kubelet's finishedAt, so they wait out the attribution window.
        finished_at = sim.now if subset % 2 else None
        if event == "start" and phase == "Pending":
            sim.set_pod(name, "Running")
        elif event == "succeed" and live:
            sim.finish(name)
            program_ends += 1
        elif event == "fail1" and live:
            sim.finish(name, exit_code=1, finished_at=finished_at)
            program_ends += 1
        elif event == "fail137" and live:
            sim.finish(name, exit_code=137, finished_at=finished_at)
            program_ends += 1
        elif event == "evict" and live:
            sim.set_pod(name, "Failed", reason="Evicted")
        elif event == "disrupt" and live:
            sim.disrupt(name, "PreemptionByScheduler", delete=subset % 2 == 0)
        elif event == "taint" and live:
            sim.disrupt(name, "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
        elif event == "gone":
            sim.finish_deletes()
        elif event == "delete" and name:
            sim.delete_object("Pod", name)
        elif event == "tick":
            sim.advance(5)
        elif event == "pause":
            pause = sim.job["spec"].setdefault("runMode", {}).setdefault("pause", {"enabled": False})
            pause["enabled"] = not pause["enabled"]
        crash = event == "crash"
        sim.step(write_status=not crash or prefix % 2 == 0, prefix=prefix if crash else None, subset=subset)

        status = sim.status
        # The engine never asks to create what already exists (docs/controller.md#r2).
        assert sim.already_exists == []
        # Budgets are enforced on controller recreations (docs/controller.md#r3), and charged only for what
        # the program did: disruptions and the failures they cause are free (docs/controller.md#disruptions).
        charged = sum(rec["restartCount"] for task in status["tasks"] for rec in task_replicas(task))
        assert charged <= program_ends
        if kind == "GenericJob":
            for task in status["tasks"]:
                for rec in task_replicas(task):
                    assert rec["restartCount"] <= limit_of(kind, rec["name"])
        else:
            assert status["backoffCount"] <= min(2, program_ends)
        # A replica recorded Succeeded (not restarted by Always) is never run again (docs/controller.md#r1),
        # but by a whole restart, which re-forms the collective from its checkpoint.
        for task in status["tasks"]:
            for rec in task_replicas(task):
                if rec["phase"] == "Succeeded" and rec["uid"]:
                    succeeded.setdefault(rec["name"], (rec["uid"], status.get("restarts", 0)))
        if policy != "Always":
            for rec_name, (uid, restart) in succeeded.items():
                pod = sim.pods().get(rec_name)
                assert pod is None or pod["metadata"]["uid"] == uid or job_restart_of(pod) > restart
        # No pod is created while a pod of an earlier whole restart is left.
        assert len({job_restart_of(pod) for pod in sim.pods().values()}) <= 1
        assert all(job_restart_of(pod) <= status.get("restarts", 0) for pod in sim.pods().values())
        # Terminal phases are sticky.
        if terminal is not None:
            assert status["phase"] == terminal
        elif status["phase"] in ("Succeeded", "Failed"):
            terminal = status["phase"]
        # One condition per type; Running never True together with a terminal condition
        # (docs/controller.md#r11).
        types = [c["type"] for c in status["conditions"]]
        assert len(types) == len(set(types))
        if sim.cond("Completed") is not None and sim.cond("Completed")["status"] == "True":
            assert sim.cond("Running")["status"] == "False"
        if sim.cond("Failed") is not None and sim.cond("Failed")["status"] == "True":
            assert sim.cond("Running") is None or sim.cond("Running")["status"] == "False"
        assert sum(status["aggregate"].values()) == sum(len(task_replicas(t)) for t in status["tasks"])
        # Pause: once a full round ran while paused, no pod is left running and the phase says so.
        paused = ((sim.job["spec"].get("runMode") or {}).get("pause") or {}).get("enabled")
        if paused and not crash and terminal is None:
            assert status["phase"] == "Paused"
            assert all(
                p["status"]["phase"] in ("Succeeded", "Failed") or p["metadata"].get("deletionTimestamp")
                for p in sim.pods().values()
            )
