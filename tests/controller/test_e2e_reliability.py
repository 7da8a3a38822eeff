"""Reliability requirements (docs/controller.md#reliability-requirements) on the local cluster: invalid specs
(#r13), status conflicts (#r15), pods deleted from outside (#r9), create failures surfaced without hot loops,
and leader election between two controller processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.jobs import GROUP, VERSION
from t9k_provider.jobs.contract import task_replicas
from t9k_provider.kube.api import KubeApi
from t9k_provider.testing import ControllerProcess, LocalCluster, wait_for
from tests.controller.e2e_support import NS, TERMINAL, Jobs, offline_caches, offline_reconciler
from tests.support.builders import make_container, make_job, make_template
from tests.support.clusters import cluster_fixture, controller_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


cluster = cluster_fixture()
#: One controller per test, so tests that run their own controllers never share the cluster with it.
controller = controller_fixture("function")


@pytest.fixture
def jobs(cluster: LocalCluster) -> Jobs:
    return Jobs(cluster.api_client())


def reconciles(controller: ControllerProcess, kind: str) -> float:
    return controller.metric_sum("t9k_controller_reconcile_total", kind=kind)


def events_for(jobs: Jobs, name: str) -> list[client.CoreV1Event]:
    return jobs.core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items


def test_invalid_spec_fails_with_the_field_named_and_no_hot_loop(
    jobs: Jobs, controller: ControllerProcess
) -> None:
    """Applied directly (no client-side validation): the rule names a replica type that does not exist."""
    jobs.create(make_job("GenericJob", "gj-invalid", {
        "successRules": [{"chief": [0]}],
        "replicaSpecs": [{"type": "worker", "template": make_template(make_container("main", sh="true"))}],
    }, namespace=NS))  # fmt: skip
    wait_for("invalid job Failed", lambda: jobs.phase("GenericJob", "gj-invalid") == "Failed", 30)
    failed = jobs.condition("GenericJob", "gj-invalid", "Failed")
    assert failed is not None and failed["status"] == "True"
    assert "spec.successRules" in failed["message"]
    assert jobs.pods("gj-invalid") == []
    settled = reconciles(controller, "GenericJob")
    time.sleep(3)
    assert reconciles(controller, "GenericJob") - settled <= 2, "no hot loop on an invalid job"


def test_create_rejected_by_the_server_is_surfaced_not_hot_looped(
    jobs: Jobs, controller: ControllerProcess
) -> None:
    """The pod template carries a label value the API server rejects (422) when the pod is created."""
    tpl = make_template(make_container("main", sh="true"))
    tpl["metadata"] = {"labels": {"note": "not a valid label value!"}}
    jobs.create(
        make_job(
            "GenericJob", "gj-rejected", {"replicaSpecs": [{"type": "worker", "template": tpl}]}, namespace=NS
        )
    )

    def surfaced() -> dict | None:
        found = jobs.condition("GenericJob", "gj-rejected", "ReplicaFailure")
        return found if found and found["status"] == "True" else None

    condition = wait_for("ReplicaFailure=True", surfaced, 30)
    assert condition["reason"] == "FailedCreate" and "gj-rejected-worker-0" in condition["message"]
    warnings = [e for e in events_for(jobs, "gj-rejected") if e.reason == "FailedCreate"]
    assert warnings and warnings[0].type == "Warning"
    assert warnings[0].reporting_component == "t9k-controller"
    before = controller.metric_sum("t9k_controller_actions_total", action="create", outcome="FailedCreate")
    time.sleep(3)
    after = controller.metric_sum("t9k_controller_actions_total", action="create", outcome="FailedCreate")
    assert after - before <= 6, "create retries back off exponentially"


def test_foreign_object_with_a_child_name_is_reported_not_adopted(
    jobs: Jobs, controller: ControllerProcess
) -> None:
    """AlreadyExists is success only when the existing object is ours (same controller owner uid;
    docs/controller.md#r2)."""
    squatter = {"metadata": {"name": "gj-squat-worker-0"}, "spec": {"containers": [
        {"name": "c", "image": "x", "command": ["sleep", "300"]}]}}  # fmt: skip
    jobs.core.create_namespaced_pod(NS, squatter)
    jobs.create(make_job("GenericJob", "gj-squat", {
        "replicaSpecs": [{"type": "worker", "template": make_template(make_container("main", sh="true"))}],
    }, namespace=NS))  # fmt: skip

    def surfaced() -> dict | None:
        found = jobs.condition("GenericJob", "gj-squat", "ReplicaFailure")
        return found if found and found["reason"] == "ResourceExists" else None

    condition = wait_for("ReplicaFailure=True reason ResourceExists", surfaced, 30)
    assert condition["status"] == "True" and "gj-squat-worker-0" in condition["message"]
    assert any(e.reason == "ResourceExists" for e in events_for(jobs, "gj-squat"))
    pod = jobs.core.read_namespaced_pod("gj-squat-worker-0", NS)
    assert not pod.metadata.owner_references, "the foreign pod is neither adopted nor deleted"
    assert jobs.phase("GenericJob", "gj-squat") not in ("Succeeded",)

    jobs.core.delete_namespaced_pod("gj-squat-worker-0", NS, grace_period_seconds=0)
    wait_for(
        "job runs once the name is free", lambda: jobs.phase("GenericJob", "gj-squat") == "Succeeded", 60
    )
    assert jobs.condition("GenericJob", "gj-squat", "ReplicaFailure")["reason"] != "ResourceExists"


def test_pod_deleted_from_outside_is_recreated_without_using_the_backoff_budget(
    jobs: Jobs, controller: ControllerProcess
) -> None:
    jobs.create(make_job("PyTorchTrainingJob", "pj-preempted", {
        "runPolicy": {"backoffLimit": 0},
        "replicaSpecs": [{"type": "master", "template":
            make_template(make_container("pytorch", sh="sleep 300"))}],
    }, namespace=NS))  # fmt: skip
    wait_for("Running", lambda: jobs.phase("PyTorchTrainingJob", "pj-preempted") == "Running", 30)
    (pod,) = jobs.pods("pj-preempted")
    jobs.core.delete_namespaced_pod(pod.metadata.name, NS, grace_period_seconds=0)

    def replaced() -> bool:
        pods = jobs.pods("pj-preempted")
        return len(pods) == 1 and pods[0].metadata.uid != pod.metadata.uid

    wait_for("the deleted pod recreated", replaced, 30)
    wait_for("Running again", lambda: jobs.phase("PyTorchTrainingJob", "pj-preempted") == "Running", 30)
    status = jobs.get("PyTorchTrainingJob", "pj-preempted")["status"]
    assert status.get("backoffCount", 0) == 0
    assert status["phase"] not in TERMINAL


def test_events_record_transitions(jobs: Jobs, controller: ControllerProcess) -> None:
    jobs.create(make_job("GenericJob", "gj-events", {
        "replicaSpecs": [{"type": "worker", "template":
            make_template(make_container("main", sh="sleep 0.5"))}],
    }, namespace=NS))  # fmt: skip
    wait_for("Succeeded", lambda: jobs.phase("GenericJob", "gj-events") == "Succeeded", 30)
    events = wait_for("events", lambda: events_for(jobs, "gj-events"), 10)
    for event in events:
        assert event.involved_object.kind == "GenericJob"
        assert event.involved_object.uid == jobs.get("GenericJob", "gj-events")["metadata"]["uid"]
        assert event.source.component == "t9k-controller"
    assert len({e.reason for e in events}) >= 2, [e.reason for e in events]


async def test_status_conflict_is_retried_from_fresh_state(cluster: LocalCluster, jobs: Jobs) -> None:
    """A status computed from a stale copy of the job hits 409; the reconciler re-reads and loses nothing."""
    created = jobs.create(make_job("GenericJob", "gj-conflict", {
        "runMode": {"pause": {"enabled": True}},
        "replicaSpecs": [{"type": "worker", "template": make_template(make_container("main", sh="true"))}],
    }, namespace=NS))  # fmt: skip
    jobs.patch("GenericJob", "gj-conflict", {"metadata": {"labels": {"touched": "by-user"}}})
    async with cluster.kube_session() as api_client:
        metrics = Metrics()
        # stale: the user's label change bumped the resourceVersion since
        api = KubeApi(api_client, metrics)
        reconciler = offline_reconciler(api, metrics, offline_caches(api, NS, [created]))
        outcome = await reconciler.reconcile(("GenericJob", NS, "gj-conflict"))
    assert not outcome.retry
    assert metrics.status_writes.labels(outcome="conflict")._value.get() == 1
    assert metrics.status_writes.labels(outcome="written")._value.get() == 1
    fresh = jobs.get("GenericJob", "gj-conflict")
    assert fresh["metadata"]["labels"]["touched"] == "by-user"
    assert fresh["status"]["phase"] == "Paused"


def test_two_leader_elected_controllers_never_act_together(
    cluster: LocalCluster, jobs: Jobs, tmp_path: Path
) -> None:
    timing = ["--leader-elect", "--lease-name", "e2e-le", "--lease-duration", "3", "--renew-deadline", "2",
              "--retry-period", "0.5"]  # fmt: skip
    a = ControllerProcess(cluster.kubeconfig, tmp_path / "a.log", *timing, "--identity", "a")
    b = ControllerProcess(cluster.kubeconfig, tmp_path / "b.log", *timing, "--identity", "b")
    try:
        a.start().wait_ready(60)
        wait_for("a leads", lambda: a.metric_sum("t9k_controller_leader") == 1, 30)
        b.start().wait_ready(60)
        jobs.create(make_job("GenericJob", "gj-le-1", {
            "replicaSpecs": [{"type": "worker", "template":
                make_template(make_container("main", sh="sleep 0.5"))}],
        }, namespace=NS))  # fmt: skip
        wait_for("job done by the leader", lambda: jobs.phase("GenericJob", "gj-le-1") == "Succeeded", 30)
        assert b.metric_sum("t9k_controller_leader") == 0
        assert b.metric_sum("t9k_controller_api_requests_total", access="write") == 0, "the standby wrote"
        assert b.metric_sum("t9k_controller_reconcile_total") == 0

        a.kill()  # crash without releasing: b waits for the lease to expire, then takes over
        killed = time.monotonic()
        wait_for("b takes over", lambda: b.metric_sum("t9k_controller_leader") == 1, 30)
        assert time.monotonic() - killed >= 2.0
        jobs.create(make_job("GenericJob", "gj-le-2", {
            "replicaSpecs": [{"type": "worker", "template":
                make_template(make_container("main", sh="sleep 0.5"))}],
        }, namespace=NS))  # fmt: skip
        wait_for("job done by the new leader", lambda: jobs.phase("GenericJob", "gj-le-2") == "Succeeded", 30)

        a.start().wait_ready(60)
        assert b.stop() == 0  # clean shutdown releases the lease: a takes over within a retry period or two
        released = time.monotonic()
        wait_for("a takes over after release", lambda: a.metric_sum("t9k_controller_leader") == 1, 10)
        assert time.monotonic() - released < 2.5
    finally:
        a.kill()
        b.kill()


def test_health_endpoints(controller: ControllerProcess) -> None:
    assert controller.ready()
    assert controller.live() == (200, "ok\n")
    names = {name for name, _ in controller.metrics()}
    for metric in (
        "reconcile_total",
        "workqueue_depth",
        "reconcile_duration_seconds_bucket",
        "api_requests_total",
    ):
        assert f"t9k_controller_{metric}" in names, metric
    reads = controller.metric_sum("t9k_controller_api_requests_total", access="read")
    assert reads >= 16, "one list and one watch per watched type at least"


def test_local_cluster_runs_the_controller_by_default(cluster_factory: Any) -> None:
    """`t9k-local run` (and `up`) start `python -m t9k_provider.controller` as a child process."""
    cluster = cluster_factory(controller=True, kubelet="simulated")
    jobs = Jobs(cluster.api_client())
    tpl = make_template(make_container("main", sh="true"))
    tpl["metadata"] = {"annotations": {"t9k.local/simulate-exit-code": "0"}}
    jobs.create(
        make_job(
            "GenericJob", "gj-local", {"replicaSpecs": [{"type": "worker", "template": tpl}]}, namespace=NS
        )
    )
    wait_for(
        "the built-in controller ran it", lambda: jobs.phase("GenericJob", "gj-local") == "Succeeded", 60
    )


def test_namespace_flag_limits_what_the_controller_sees(
    cluster: LocalCluster, jobs: Jobs, tmp_path: Path
) -> None:
    jobs.core.create_namespace({"metadata": {"name": "team-a"}})
    proc = ControllerProcess(cluster.kubeconfig, tmp_path / "ns.log", "--namespace", "team-a")
    try:
        proc.start().wait_ready(60)
        tpl = make_template(make_container("main", sh="sleep 0.2"))
        inside = make_job(
            "GenericJob", "gj-team-a", {"replicaSpecs": [{"type": "worker", "template": tpl}]}, namespace=NS
        )
        inside["metadata"]["namespace"] = "team-a"
        jobs.custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "genericjobs", inside)
        jobs.create(
            make_job(
                "GenericJob",
                "gj-outside",
                {"replicaSpecs": [{"type": "worker", "template": tpl}]},
                namespace=NS,
            )
        )

        def phase_in_team_a() -> str | None:
            obj = jobs.custom.get_namespaced_custom_object(
                GROUP, VERSION, "team-a", "genericjobs", "gj-team-a"
            )
            return (obj.get("status") or {}).get("phase")

        wait_for("the job in the watched namespace ran", lambda: phase_in_team_a() == "Succeeded", 60)
        assert "status" not in jobs.get("GenericJob", "gj-outside"), "a job outside the namespace is ignored"
        assert jobs.pods("gj-outside") == []
    finally:
        proc.stop()


def test_controller_rides_out_an_api_server_restart(cluster_factory: Any, tmp_path: Path) -> None:
    """Watches break and requests fail while the server is down; informers back off and resume."""
    cluster = cluster_factory(kubelet="simulated")
    jobs = Jobs(cluster.api_client())
    proc = ControllerProcess(cluster.kubeconfig, tmp_path / "restart.log")
    tpl = make_template(make_container("main", sh="true"))
    tpl["metadata"] = {"annotations": {"t9k.local/simulate-exit-code": "0"}}
    try:
        proc.start().wait_ready(60)
        jobs.create(
            make_job(
                "GenericJob",
                "gj-before",
                {"replicaSpecs": [{"type": "worker", "template": tpl}]},
                namespace=NS,
            )
        )
        wait_for("first job", lambda: jobs.phase("GenericJob", "gj-before") == "Succeeded", 60)
        watches = proc.metric_sum("t9k_controller_api_requests_total", verb="watch")
        cluster.restart()
        jobs = Jobs(cluster.api_client())
        jobs.create(
            make_job(
                "GenericJob",
                "gj-after",
                {"replicaSpecs": [{"type": "worker", "template": tpl}]},
                namespace=NS,
            )
        )
        wait_for(
            "job created after the restart", lambda: jobs.phase("GenericJob", "gj-after") == "Succeeded", 90
        )
        assert proc.running(), "the controller survived the outage"
        # Watches broke and were resumed from their last resourceVersion (the store kept its history).
        assert proc.metric_sum("t9k_controller_api_requests_total", verb="watch") > watches
        assert proc.live()[0] == 200
    finally:
        proc.stop()


def test_elastic_scale_down_removes_out_of_range_pods_and_services(
    cluster_factory: Any, tmp_path: Path
) -> None:
    """docs/controller.md#r12 end to end: indices >= expectedReplicas lose their pod and Service; ranks stay
    contiguous."""
    cluster = cluster_factory(kubelet="simulated")
    jobs = Jobs(cluster.api_client())
    proc = ControllerProcess(cluster.kubeconfig, tmp_path / "elastic.log")
    try:
        proc.start().wait_ready(60)
        jobs.create(make_job("PyTorchTrainingJob", "pj-elastic", {
            "torchrunConfig": {"enabled": True},
            "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 3},
            "replicaSpecs": [{"type": "worker", "template":
                make_template(make_container("pytorch", sh="train.py"))}],
        }, namespace=NS))  # fmt: skip
        names = [f"pj-elastic-worker-{i}" for i in range(3)]

        def children() -> tuple[list[str], list[str]]:
            return jobs.pod_names("pj-elastic"), jobs.owned("pj-elastic", jobs.core.list_namespaced_service)

        wait_for("three workers with their services", lambda: children() == (names, names), 30)
        jobs.patch("PyTorchTrainingJob", "pj-elastic", {"spec": {"elastic": {"expectedReplicas": 1}}})
        wait_for("scaled down to worker-0", lambda: children() == (names[:1], names[:1]), 30)
        tasks = jobs.get("PyTorchTrainingJob", "pj-elastic")["status"]["tasks"]
        assert [r["name"] for r in task_replicas(tasks[0])] == names[:1]
        jobs.patch("PyTorchTrainingJob", "pj-elastic", {"spec": {"elastic": {"expectedReplicas": 2}}})
        wait_for("scaled up to two workers", lambda: children() == (names[:2], names[:2]), 30)
        assert jobs.phase("PyTorchTrainingJob", "pj-elastic") not in TERMINAL
    finally:
        proc.stop()


def test_evicted_pod_is_replaced_without_using_the_backoff_budget(
    cluster_factory: Any, tmp_path: Path
) -> None:
    """The node evicts a replica (pod Failed, reason Evicted, no exit code): a retryable failure
    (docs/controller.md#r9)."""
    cluster = cluster_factory(kubelet="simulated")
    jobs = Jobs(cluster.api_client())
    proc = ControllerProcess(cluster.kubeconfig, tmp_path / "evict.log")
    try:
        proc.start().wait_ready(60)
        jobs.create(make_job("PyTorchTrainingJob", "pj-evicted", {
            "runPolicy": {"backoffLimit": 0},
            "replicaSpecs": [{"type": "master", "restartPolicy": "OnFailure",
                              "template": make_template(make_container("pytorch", sh="train.py"))}],
        }, namespace=NS))  # fmt: skip
        wait_for("Running", lambda: jobs.phase("PyTorchTrainingJob", "pj-evicted") == "Running", 30)
        (pod,) = jobs.pods("pj-evicted")
        jobs.core.patch_namespaced_pod_status(pod.metadata.name, NS, {"status": {
            "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory.",
        }})  # fmt: skip

        def replaced() -> bool:
            pods = jobs.pods("pj-evicted")
            return len(pods) == 1 and pods[0].metadata.uid != pod.metadata.uid

        wait_for("the evicted pod replaced", replaced, 30)
        wait_for("Running again", lambda: jobs.phase("PyTorchTrainingJob", "pj-evicted") == "Running", 30)
        assert jobs.get("PyTorchTrainingJob", "pj-evicted")["status"].get("backoffCount", 0) == 0
    finally:
        proc.stop()
