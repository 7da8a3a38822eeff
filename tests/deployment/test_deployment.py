"""The provider in a real Airflow deployment: separate scheduler, triggerer, DAG processor and API server,
LocalExecutor, DAG runs triggered and inspected through the REST API only, jobs on the local cluster.

``dag.test()`` (tests/airflow) runs triggers inline in one process; here a deferred task really leaves its
worker, the triggerer really resumes it, and Airflow's own races (a stale executor event, a lost worker, a
killed triggerer) really happen. The first runs start together (``runs``) so the module stays within its
time budget, and the tests act on them in the order their jobs run; the triggerer is killed last, once they
have finished.
"""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.parse
from typing import Any

import pytest

from benchmarks.airflow_deployment import JOB_URL_TEMPLATE, AirflowDeployment
from t9k_provider.jobclient import identity as ident
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.testing import LocalCluster, wait_for
from t9k_provider.waiting import status as job_status

pytestmark = [pytest.mark.deployment, pytest.mark.cluster, pytest.mark.timeout(480)]

JOBS = "/apis/batch.tensorstack.dev/v1beta1/namespaces/default"
EPOCH = re.compile(r"\[([\w.-]+)/main\] epoch (\d+)/10 loss=")
#: Bounds of the waits below, generous for a loaded 2-core machine.
RUN_TIMEOUT = 240
START_TIMEOUT = 120


# -- the cluster side ----------------------------------------------------------------------------------------


def get(cluster: LocalCluster, path: str) -> Any:
    status, _, body = cluster.request("GET", path)
    if status == 404:
        return None
    assert status == 200, f"GET {path}: {status} {body}"
    return body


def job_of(
    cluster: LocalCluster, plural: str, dag_id: str, run_id: str, task_id: str
) -> dict[str, Any] | None:
    """The task instance's job, found by the Airflow annotations the operator puts on it."""
    wanted = {ident.DAG_ID: dag_id, ident.RUN_ID: run_id, ident.TASK_ID: task_id}
    for job in get(cluster, f"{JOBS}/{plural}")["items"]:
        if ident.is_ours(job, wanted):
            return dict(job)
    return None


def pods_of(cluster: LocalCluster, kind: str, name: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"labelSelector": pod_selector(kind, name)})
    return list(get(cluster, f"/api/v1/namespaces/default/pods?{query}")["items"])


def wait_for_running_job(cluster: LocalCluster, plural: str, dag_id: str, run_id: str, task_id: str) -> dict:
    def running() -> dict[str, Any] | None:
        job = job_of(cluster, plural, dag_id, run_id, task_id)
        outcome = job_status.outcome(job) if job is not None else None
        assert outcome not in ("succeeded", "failed"), (
            f"job of {dag_id}/{task_id} ended before the test acted"
        )
        return job if outcome == "running" else None

    return dict(wait_for(f"the job of {dag_id}/{task_id} to run", running, START_TIMEOUT, 0.5))


# -- the runs ------------------------------------------------------------------------------------------------


OVERLAPPING = ("dep_pipeline", "dep_mark_failed", "dep_lost_worker", "dep_mapped_same_name")


@pytest.fixture(scope="module")
def runs(airflow: AirflowDeployment) -> dict[str, str]:
    """The runs that may overlap, started at once: DAG id -> run id (``dep_explicit_name`` has two)."""
    started = {dag_id: airflow.trigger(dag_id) for dag_id in OVERLAPPING}
    started["dep_explicit_name"] = airflow.trigger("dep_explicit_name")
    started["dep_explicit_name/2"] = airflow.trigger("dep_explicit_name")
    return started


def test_retry_after_a_lost_worker_adopts_the_succeeded_job(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> None:
    """The worker running try 1 dies while the job runs; the job succeeds before try 2 starts (retry_delay
    15 s). Try 2 reports that job instead of running it again."""
    run_id = runs["dep_lost_worker"]
    job = wait_for_running_job(cluster, "genericjobs", "dep_lost_worker", run_id, "job")
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    pods = {pod["metadata"]["uid"] for pod in pods_of(cluster, "GenericJob", name)}
    pid = wait_for(
        "the task's process", lambda: airflow.task_process("dep_lost_worker", run_id, "job"), 30, 0.2
    )
    os.kill(pid, signal.SIGKILL)

    assert airflow.wait_for_run("dep_lost_worker", run_id, RUN_TIMEOUT)["state"] == "success"
    ti = airflow.task_instance("dep_lost_worker", run_id, "job")
    assert ti["try_number"] == 2, "the killed try should have been retried"
    job = get(cluster, f"{JOBS}/genericjobs/{name}")
    assert job is not None and job["metadata"]["uid"] == uid, "try 2 replaced the job of try 1"
    completed = job_status.parse_time(job["status"].get("completionTime"))
    started = job_status.parse_time(ti["start_date"])
    assert completed is not None and started is not None and completed < started, (
        f"the scenario needs the job to succeed (at {completed}) before try 2 starts (at {started})"
    )
    assert {pod["metadata"]["uid"] for pod in pods_of(cluster, "GenericJob", name)} == pods


def test_train_log_shows_replica_lines_while_the_job_runs(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> None:
    """Live logs while deferred: the log read from the REST API during the job already has epoch lines, and
    each rank's first epoch line was logged while the job ran, not when the task resumed at its end.

    Fails on the current code: in deferrable mode the lines are printed only once the job has finished.
    """
    run_id = runs["dep_pipeline"]
    job = wait_for_running_job(cluster, "pytorchtrainingjobs", "dep_pipeline", run_id, "train")
    name = job["metadata"]["name"]
    seen_while_running: list[str] = []
    deadline = time.monotonic() + RUN_TIMEOUT
    while not seen_while_running and job_status.outcome(job) == "running" and time.monotonic() < deadline:
        try_number = airflow.task_instance("dep_pipeline", run_id, "train")["try_number"]
        log = airflow.task_log("dep_pipeline", run_id, "train", try_number)
        seen_while_running = [line.text for line in log if EPOCH.search(line.text)]
        time.sleep(1.0)
        job = get(cluster, f"{JOBS}/pytorchtrainingjobs/{name}") or job
    assert seen_while_running, f"no epoch line in the train task's log while job {name} ran"

    assert airflow.wait_for_run("dep_pipeline", run_id, RUN_TIMEOUT)["state"] == "success"
    job = get(cluster, f"{JOBS}/pytorchtrainingjobs/{name}")
    completed = job_status.parse_time(job["status"].get("completionTime"))
    assert completed is not None, job["status"]
    ti = airflow.task_instance("dep_pipeline", run_id, "train")
    first_lines: dict[str, Any] = {}
    for line in airflow.task_log("dep_pipeline", run_id, "train", ti["try_number"]):
        if (m := EPOCH.search(line.text)) and m[2] == "1":
            first_lines[m[1]] = line.at
    assert len(first_lines) == 2, first_lines
    assert all(at is not None and at < completed for at in first_lines.values()), (
        f"each rank's first epoch line must precede job {name}'s completion ({completed}): {first_lines}"
    )


def test_pipeline_succeeds(airflow: AirflowDeployment, runs: dict[str, str]) -> None:
    run = airflow.wait_for_run("dep_pipeline", runs["dep_pipeline"], RUN_TIMEOUT)
    states = {
        ti["task_id"]: ti["state"] for ti in airflow.task_instances("dep_pipeline", runs["dep_pipeline"])
    }
    assert run["state"] == "success", states
    assert states == {"prepare": "success", "train": "success", "evaluate": "success"}


def test_pipeline_runs_every_task_on_try_1(airflow: AirflowDeployment, runs: dict[str, str]) -> None:
    """No wasted retry: with a job that finishes at once, Airflow's stale-event race
    (apache/airflow#72716) can end a resumed try early. Fails on the current code whenever the race hits."""
    airflow.wait_for_run("dep_pipeline", runs["dep_pipeline"], RUN_TIMEOUT)
    tries = {
        ti["task_id"]: ti["try_number"] for ti in airflow.task_instances("dep_pipeline", runs["dep_pipeline"])
    }
    assert tries == {"prepare": 1, "train": 1, "evaluate": 1}


def test_train_log_holds_every_replica_line_once(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> None:
    """The final log of the train task, from the REST API: each rank's ten epoch lines, once each, prefixed
    with their pod."""
    run_id = runs["dep_pipeline"]
    airflow.wait_for_run("dep_pipeline", run_id, RUN_TIMEOUT)
    job = job_of(cluster, "pytorchtrainingjobs", "dep_pipeline", run_id, "train")
    assert job is not None
    name = job["metadata"]["name"]
    ti = airflow.task_instance("dep_pipeline", run_id, "train")
    lines = [
        (m[1], int(m[2]))
        for line in airflow.task_log("dep_pipeline", run_id, "train", ti["try_number"])
        if (m := EPOCH.search(line.text))
    ]
    expected = [(f"{name}-worker-{rank}", epoch) for rank in (0, 1) for epoch in range(1, 11)]
    assert sorted(lines) == expected


def test_extra_link_resolves_to_the_job(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> None:
    run_id = runs["dep_pipeline"]
    airflow.wait_for_run("dep_pipeline", run_id, RUN_TIMEOUT)
    job = job_of(cluster, "pytorchtrainingjobs", "dep_pipeline", run_id, "train")
    assert job is not None
    url = JOB_URL_TEMPLATE.format(namespace="default", name=job["metadata"]["name"])
    assert airflow.extra_links("dep_pipeline", run_id, "train") == {"T9k Job": url}


def test_marking_a_deferred_task_failed_deletes_its_job(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> None:
    run_id = runs["dep_mark_failed"]
    airflow.wait_for_task("dep_mark_failed", run_id, "wait", ("deferred",), START_TIMEOUT)
    job = wait_for_running_job(cluster, "genericjobs", "dep_mark_failed", run_id, "wait")
    name = job["metadata"]["name"]
    assert pods_of(cluster, "GenericJob", name)

    airflow.set_task_state("dep_mark_failed", run_id, "wait", "failed")

    wait_for(
        f"job {name} and its pods to be deleted",
        lambda: (
            get(cluster, f"{JOBS}/genericjobs/{name}") is None and not pods_of(cluster, "GenericJob", name)
        ),
        60,
        0.5,
    )
    assert airflow.task_instance("dep_mark_failed", run_id, "wait")["state"] == "failed"


def test_mapped_instances_sharing_an_explicit_name_each_run_their_job(
    airflow: AirflowDeployment, runs: dict[str, str]
) -> None:
    """Three mapped instances over manifests all named ``sweep``. Fails on the current code: an explicit name
    is used as is, so two of them find the name taken by another task instance."""
    run = airflow.wait_for_run("dep_mapped_same_name", runs["dep_mapped_same_name"], RUN_TIMEOUT)
    states = {
        ti["map_index"]: ti["state"]
        for ti in airflow.task_instances("dep_mapped_same_name", run["dag_run_id"])
    }
    assert states == {0: "success", 1: "success", 2: "success"}


def test_an_explicit_name_serves_every_run_of_the_dag(
    airflow: AirflowDeployment, runs: dict[str, str]
) -> None:
    """Two runs of a DAG whose manifest is named ``explicit-name``. Fails on the current code: the second run
    finds the first run's job under that name."""
    states = [
        airflow.wait_for_run("dep_explicit_name", runs[key], RUN_TIMEOUT)["state"]
        for key in ("dep_explicit_name", "dep_explicit_name/2")
    ]
    assert states == ["success", "success"]


def test_sigkill_of_the_triggerer_leaves_the_job_and_a_new_triggerer_resumes_the_task(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> None:
    for key, run_id in runs.items():  # the triggerer dies alone: earlier runs must not be caught in it
        if key != "dep_mark_failed":
            airflow.wait_for_run(key.split("/")[0], run_id, RUN_TIMEOUT)
    run_id = airflow.trigger("dep_triggerer_kill")
    airflow.wait_for_task("dep_triggerer_kill", run_id, "wait", ("deferred",), START_TIMEOUT)
    job = wait_for_running_job(cluster, "genericjobs", "dep_triggerer_kill", run_id, "wait")
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    time.sleep(2)  # the triggerer has picked the trigger up and is watching the job

    airflow.crash("triggerer")
    time.sleep(5)
    job = get(cluster, f"{JOBS}/genericjobs/{name}")
    assert job is not None and job["metadata"]["uid"] == uid
    assert "deletionTimestamp" not in job["metadata"]
    assert airflow.task_instance("dep_triggerer_kill", run_id, "wait")["state"] == "deferred"

    airflow.start_component("triggerer")
    assert airflow.wait_for_run("dep_triggerer_kill", run_id, RUN_TIMEOUT)["state"] == "success"
    ti = airflow.task_instance("dep_triggerer_kill", run_id, "wait")
    assert ti["try_number"] == 1
    job = get(cluster, f"{JOBS}/genericjobs/{name}")
    assert job is not None and job["metadata"]["uid"] == uid and job_status.outcome(job) == "succeeded"
