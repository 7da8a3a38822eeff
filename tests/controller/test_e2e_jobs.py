"""End to end on the local cluster with real processes, one job per behaviour: success/failure rules,
training with torch.distributed, TF_CONFIG and XGBoost env, ExitCode restarts up to backoffLimit, pause and
resume, debug mode, activeDeadlineSeconds, each cleanUpPolicy and the T9k scheduler objects.

One cluster (process kubelet) and one controller process serve the whole module; every test uses its own job
names, so tests stay independent.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.testing import LocalCluster, none_left, require_limits, wait_for
from tests.controller.e2e_support import NS, TERMINAL, Jobs, PodRecorder
from tests.support.builders import make_container, make_job, make_template
from tests.support.clusters import cluster_fixture, controller_fixture
from tests.support.gates import sh_gate

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "dags_examples" / "workloads"
PY = sys.executable


cluster = cluster_fixture()
controller = controller_fixture()


def wait_phase(jobs: Jobs, kind: str, name: str, phases: tuple[str, ...], timeout: float = 60) -> dict:
    def check() -> dict | None:
        obj = jobs.get(kind, name)
        return obj if (obj.get("status") or {}).get("phase") in phases else None

    try:
        return wait_for(f"{kind} {name} phase in {phases}", check, timeout)
    except AssertionError as exc:
        status = json.dumps(jobs.get(kind, name).get("status"), indent=1)
        raise AssertionError(f"{exc}\nstatus: {status}") from None


def cond(obj: dict, ctype: str) -> dict:
    found = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)
    assert found is not None, f"no {ctype} condition in {obj.get('status')}"
    return found


def replica_phase(jobs: Jobs, job: str, replica_type: str, index: int = 0) -> str | None:
    """The phase the controller recorded for a replica (``status.tasks[].status[]``)."""
    for task in (jobs.get("GenericJob", job).get("status") or {}).get("tasks") or []:
        if task.get("type") == replica_type:
            for replica in task.get("status") or []:
                if replica.get("name") == f"{job}-{replica_type}-{index}":
                    return replica.get("phase")
    return None


def pod_phase(jobs: Jobs, name: str) -> str | None:
    try:
        return jobs.core.read_namespaced_pod(name, NS).status.phase
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_genericjob_success_rule_over_two_types(jobs: Jobs) -> None:
    """Success needs master-0 and worker-0; worker-1 is still running and is cleaned up as unfinished."""
    jobs.create(make_job("GenericJob", "gj-success", {
        "successRules": [{"master": [0], "worker": [0]}],
        "failureRules": [{"master": [0]}],
        "cleanUpPolicy": "Unfinished",
        "replicaSpecs": [
            {"type": "master", "template": make_template(make_container("main", sh="sleep 0.5"))},
            {"type": "worker", "replicas": 2,
             "template": make_template(make_container("main", sh="sleep 1; test $(rank) = 0 || sleep 300"))},
        ],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "GenericJob", "gj-success", TERMINAL)
    assert obj["status"]["phase"] == "Succeeded"
    assert cond(obj, "Completed")["status"] == "True"
    assert cond(obj, "Running")["status"] == "False"
    wait_for("unfinished worker-1 cleaned up", lambda: pod_phase(jobs, "gj-success-worker-1") is None, 30)
    assert pod_phase(jobs, "gj-success-master-0") == "Succeeded"


def test_genericjob_failure_rule_needs_every_listed_replica(jobs: Jobs, tmp_path: Path) -> None:
    fail = tmp_path / "fail-worker-1"  # worker-1 fails once the test saw the master's failure alone
    worker = f"test $(rank) = 1 && {{ {sh_gate(fail)}; exit 1; }}; sleep 300"
    jobs.create(make_job("GenericJob", "gj-failure", {
        "successRules": [{"worker": [0]}],
        "failureRules": [{"master": [0], "worker": [1]}],
        "replicaSpecs": [
            {"type": "master", "restartPolicy": {"policy": "Never"}, "template":
                make_template(make_container("main", sh="exit 2"))},
            {
                "type": "worker", "replicas": 2, "restartPolicy": {"policy": "Never"},
                "template": make_template(
                    make_container("main", sh=worker)
                ),
            },
        ],
    }, namespace=NS))  # fmt: skip
    wait_for(
        "the controller to see the master fail",
        lambda: replica_phase(jobs, "gj-failure", "master") == "Failed",
        30,
    )
    assert jobs.phase("GenericJob", "gj-failure") not in TERMINAL, (
        "one failed replica of the rule is not enough"
    )
    fail.touch()
    obj = wait_phase(jobs, "GenericJob", "gj-failure", TERMINAL)
    assert obj["status"]["phase"] == "Failed"
    failed = cond(obj, "Failed")
    assert failed["status"] == "True" and "master" in failed["message"] and "worker" in failed["message"]


def test_pytorch_two_workers_train_with_gloo(jobs: Jobs, tmp_path: Path) -> None:
    subprocess.run(
        [PY, str(WORKLOADS / "prepare_data.py"), "--out", str(tmp_path), "--samples", "512"],
        check=True, timeout=60, capture_output=True,
    )  # fmt: skip
    script = f"{PY} {WORKLOADS / 'train_ddp.py'} --data {tmp_path} --epochs 3 --out {tmp_path}"
    jobs.create(make_job("PyTorchTrainingJob", "pj-ddp", {
        "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": "Never",
                          "template": make_template(make_container("pytorch", sh=script))}],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "PyTorchTrainingJob", "pj-ddp", TERMINAL, timeout=150)
    logs = {p: jobs.log(p) for p in ("pj-ddp-worker-0", "pj-ddp-worker-1")}
    assert obj["status"]["phase"] == "Succeeded", logs
    for rank, name in enumerate(sorted(logs)):
        lines = [line for line in logs[name].splitlines() if line.startswith("epoch ")]
        assert len(lines) == 3 and all(f"rank={rank} world_size=2" in line for line in lines), logs[name]
    assert (tmp_path / "model.pt").exists()


ENV_DUMP = (
    f"{PY} -c 'import json, os; print(json.dumps({{k: os.environ.get(k) for k in "
    '["TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"]}))\''
)


# The chief/master holds on after dumping: its success ends the job, and replicas not yet created by then
# are (rightly) never created, which would leave nothing to read for them.
LEADER_ENV_DUMP = f"{ENV_DUMP}; sleep 3"


def dumped_env(jobs: Jobs, pod: str) -> dict[str, Any]:
    # The job may succeed on its chief/master alone; the other replicas finish on their own.
    wait_for(f"{pod} Succeeded", lambda: pod_phase(jobs, pod) == "Succeeded", 60)
    lines = [line for line in jobs.log(pod).splitlines() if line.startswith("{")]
    assert lines, jobs.log(pod)
    return json.loads(lines[-1])


def test_tensorflow_replicas_read_a_correct_tf_config(jobs: Jobs) -> None:
    jobs.create(make_job("TensorFlowTrainingJob", "tj-env", {
        "replicaSpecs": [
            {"type": "chief", "template": make_template(make_container("tensorflow", sh=LEADER_ENV_DUMP))},
            {"type": "worker", "replicas": 2, "template":
                make_template(make_container("tensorflow", sh=ENV_DUMP))},
        ],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "TensorFlowTrainingJob", "tj-env", TERMINAL, timeout=90)
    assert obj["status"]["phase"] == "Succeeded"
    for pod, task in (("tj-env-chief-0", ("chief", 0)), ("tj-env-worker-0", ("worker", 0)),
                      ("tj-env-worker-1", ("worker", 1))):  # fmt: skip
        config = json.loads(dumped_env(jobs, pod)["TF_CONFIG"])
        assert config["task"] == {"type": task[0], "index": task[1]}
        cluster = config["cluster"]
        assert sorted(cluster) == ["chief", "worker"]
        assert [h.split(":")[0].split(".")[0] for h in cluster["chief"]] == ["tj-env-chief-0"]
        assert [h.split(":")[0].split(".")[0] for h in cluster["worker"]] == [
            "tj-env-worker-0",
            "tj-env-worker-1",
        ]
        assert all(h.rsplit(":", 1)[1].isdigit() for h in cluster["chief"] + cluster["worker"])


def test_xgboost_replicas_read_master_addr_rank_and_world_size(jobs: Jobs) -> None:
    jobs.create(make_job("XGBoostTrainingJob", "xj-env", {
        "replicaSpecs": [
            {"type": "master", "template": make_template(make_container("xgboost", sh=LEADER_ENV_DUMP))},
            {"type": "worker", "replicas": 2, "template":
                make_template(make_container("xgboost", sh=ENV_DUMP))},
        ],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "XGBoostTrainingJob", "xj-env", TERMINAL, timeout=90)
    assert obj["status"]["phase"] == "Succeeded"
    ranks = {}
    for pod in ("xj-env-master-0", "xj-env-worker-0", "xj-env-worker-1"):
        env = dumped_env(jobs, pod)
        assert env["MASTER_ADDR"].split(".")[0] == "xj-env-master-0"
        assert env["MASTER_PORT"] and env["MASTER_PORT"].isdigit()
        assert env["WORLD_SIZE"] == "3"
        ranks[pod] = env["RANK"]
    assert ranks == {"xj-env-master-0": "0", "xj-env-worker-0": "1", "xj-env-worker-1": "2"}


def test_exitcode_137_restarts_until_backoff_limit_then_fails(cluster: LocalCluster, jobs: Jobs) -> None:
    recorder = PodRecorder(cluster.api_client())
    recorder.start()
    assert recorder.started_watching.wait(10)
    jobs.create(make_job("PyTorchTrainingJob", "pj-137", {
        "runPolicy": {"backoffLimit": 2},
        "replicaSpecs": [{"type": "master", "restartPolicy": "ExitCode",
                          "template": make_template(make_container("pytorch", sh="sleep 0.3; exit 137"))}],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "PyTorchTrainingJob", "pj-137", TERMINAL)
    time.sleep(1)
    seen = recorder.stop()
    assert obj["status"]["phase"] == "Failed"
    assert obj["status"]["backoffCount"] == 2
    assert len(seen["pj-137-master-0"]) == 3, "1 run + backoffLimit restarts"
    assert cond(obj, "Failed")["status"] == "True"


def test_exitcode_retries_an_oom_killed_replica_and_names_it(cluster: LocalCluster, jobs: Jobs) -> None:
    """Past limits.memory the OOM killer ends the replica (137, OOMKilled): ExitCode retries it up to
    backoffLimit, and the Failed condition says what killed it. Skips without cgroups, fails so on CI."""
    require_limits(cluster.limits_verdict())
    allocate = f"{PY} -c 'b = bytearray(200 * 1024 * 1024); print(len(b))'"
    limits = {"limits": {"memory": "64Mi"}}
    jobs.create(make_job("PyTorchTrainingJob", "pj-oom", {
        "runPolicy": {"backoffLimit": 1},
        "replicaSpecs": [{"type": "master", "restartPolicy": "ExitCode",
                          "template":
                              make_template(make_container("pytorch", sh=allocate, resources=limits))}],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "PyTorchTrainingJob", "pj-oom", TERMINAL)
    assert obj["status"]["phase"] == "Failed"
    assert obj["status"]["backoffCount"] == 1
    pod = jobs.core.read_namespaced_pod("pj-oom-master-0", NS)
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)
    assert "Pod pj-oom-master-0: OOMKilled (exit code 137)." in cond(obj, "Failed")["message"]
    assert "OOMKilled" in cond(obj, "ReplicaFailure")["message"]


def test_exitcode_permanent_code_is_not_restarted(jobs: Jobs) -> None:
    jobs.create(make_job("PyTorchTrainingJob", "pj-exit1", {
        "runPolicy": {"backoffLimit": 5},
        "replicaSpecs": [{"type": "master", "restartPolicy": "ExitCode",
                          "template": make_template(make_container("pytorch", sh="exit 1"))}],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "PyTorchTrainingJob", "pj-exit1", TERMINAL)
    assert obj["status"]["phase"] == "Failed"
    assert obj["status"].get("backoffCount", 0) == 0


def test_pause_then_resume(jobs: Jobs) -> None:
    jobs.create(make_job("GenericJob", "gj-pause", {
        "replicaSpecs": [{"type": "worker", "replicas": 2, "template":
            make_template(make_container("main", sh="sleep 300"))}],
    }, namespace=NS))  # fmt: skip
    wait_phase(jobs, "GenericJob", "gj-pause", ("Running",))
    before = {p.metadata.name: p.metadata.uid for p in jobs.pods("gj-pause")}
    assert sorted(before) == ["gj-pause-worker-0", "gj-pause-worker-1"]
    jobs.patch("GenericJob", "gj-pause", {"spec": {"runMode": {"pause": {"enabled": True}}}})
    obj = wait_phase(jobs, "GenericJob", "gj-pause", ("Paused",))
    assert cond(obj, "Paused")["status"] == "True"
    wait_for("paused pods deleted", none_left(lambda: jobs.pod_names("gj-pause")), 30)
    jobs.patch("GenericJob", "gj-pause", {"spec": {"runMode": {"pause": {"enabled": False}}}})
    wait_phase(jobs, "GenericJob", "gj-pause", ("Running",))
    after = {p.metadata.name: p.metadata.uid for p in jobs.pods("gj-pause")}
    assert sorted(after) == sorted(before) and not set(after.values()) & set(before.values())
    assert cond(jobs.get("GenericJob", "gj-pause"), "Paused")["status"] == "False"


def test_debug_mode_replaces_the_command_and_does_not_finish(jobs: Jobs) -> None:
    jobs.create(make_job("GenericJob", "gj-debug", {
        "runMode": {"debug": {"enabled": True}},
        "replicaSpecs": [{"type": "worker", "template": make_template(make_container("main", sh="exit 1"))}],
    }, namespace=NS))  # fmt: skip
    wait_phase(jobs, "GenericJob", "gj-debug", ("Running",))
    (pod,) = jobs.pods("gj-debug")
    assert pod.spec.containers[0].command == ["sleep", "inf"]
    wait_for("debug pod running", lambda: pod_phase(jobs, "gj-debug-worker-0") == "Running", 30)
    time.sleep(2)
    assert jobs.phase("GenericJob", "gj-debug") == "Running"


def test_active_deadline_fails_a_job_that_gets_no_further_events(jobs: Jobs) -> None:
    jobs.create(make_job("PyTorchTrainingJob", "pj-deadline", {
        "runPolicy": {"activeDeadlineSeconds": 3},
        "replicaSpecs": [{"type": "master", "template":
            make_template(make_container("pytorch", sh="sleep 300"))}],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "PyTorchTrainingJob", "pj-deadline", TERMINAL, timeout=30)
    assert obj["status"]["phase"] == "Failed"
    assert cond(obj, "Failed")["reason"] == "DeadlineExceeded"
    wait_for("unfinished pods deleted at the deadline", none_left(lambda: jobs.pod_names("pj-deadline")), 30)


@pytest.mark.parametrize(
    ("policy", "master_kept", "worker_kept"),
    [("None", True, True), ("Unfinished", True, False), ("All", False, False)],
)
def test_cleanup_policy(jobs: Jobs, policy: str, master_kept: bool, worker_kept: bool) -> None:
    name = f"gj-clean-{policy.lower()}"
    jobs.create(make_job("GenericJob", name, {
        "cleanUpPolicy": policy,
        "successRules": [{"master": [0]}],
        "replicaSpecs": [
            {"type": "master", "template": make_template(make_container("main", sh="sleep 1"))},
            {"type": "worker", "template": make_template(make_container("main", sh="sleep 300"))},
        ],
    }, namespace=NS))  # fmt: skip
    obj = wait_phase(jobs, "GenericJob", name, TERMINAL)
    assert obj["status"]["phase"] == "Succeeded"
    expected = sorted([f"{name}-master-0"] * master_kept + [f"{name}-worker-0"] * worker_kept)
    wait_for(f"pods {expected} after cleanup {policy}", lambda: jobs.pod_names(name) == expected, 30)
    time.sleep(1.5)
    assert jobs.pod_names(name) == expected, "cleanup is applied once and stays applied"


def test_t9k_scheduler_objects(jobs: Jobs) -> None:
    # T9k admits a job only into a Queue that exists (docs/local-cluster.md#queues)
    sched = "scheduler.tensorstack.dev"
    queue = {"apiVersion": f"{sched}/v1beta1", "kind": "Queue", "metadata": {"name": "team-a"}}
    jobs.custom.create_cluster_custom_object(sched, "v1beta1", "queues", queue)
    jobs.create(make_job("GenericJob", "gj-sched", {
        "scheduler": {"t9kScheduler": {"queue": "team-a", "priority": 50}},
        "replicaSpecs": [{"type": "worker", "replicas": 2, "template":
            make_template(make_container("main", sh="sleep 300"))}],
    }, namespace=NS))  # fmt: skip
    custom = jobs.custom
    group = wait_for("PodGroup gj-sched", lambda: _get_or_none(lambda: custom.get_namespaced_custom_object(
            "scheduler.tensorstack.dev", "v1beta1", NS, "podgroups", "gj-sched")), 30)  # fmt: skip
    assert group["spec"]["queue"] == "team-a"
    assert group["spec"]["priority"] == 50
    assert group["spec"]["minMember"] == 2
    (owner,) = group["metadata"]["ownerReferences"]
    assert owner["kind"] == "GenericJob" and owner["name"] == "gj-sched" and owner["controller"] is True
    pods = wait_for("two pods", lambda: len(jobs.pods("gj-sched")) == 2 and jobs.pods("gj-sched"), 30)
    for pod in pods:
        assert pod.spec.scheduler_name == "t9k-scheduler"
        labels = pod.metadata.labels
        assert labels["scheduler.tensorstack.dev/group-name"] == "gj-sched"
        assert labels["scheduler.tensorstack.dev/queue"] == "team-a"
        assert labels["scheduler.tensorstack.dev/role"] == "worker"


def _get_or_none(read: Any) -> Any:
    try:
        return read()
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
