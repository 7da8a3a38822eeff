"""The provider in a real Airflow deployment: separate scheduler, triggerer, DAG processor and API server,
LocalExecutor, DAG runs triggered and inspected through the REST API only, jobs on the local cluster.

``dag.test()`` (tests/airflow) runs triggers inline in one process; here a deferred task really leaves its
worker, the triggerer really resumes it, and Airflow's own races (a stale executor event, a lost worker, a
killed triggerer) really happen. The first runs start together (``runs``) so the module stays within its
time budget, and the tests act on them in the order their jobs run; the triggerer is killed last, once they
have finished, while two runs wait in it (``triggerer_restart``). Progress reports (``t9k_provider.progress``)
are read live by the triggerer and by the worker: the task log's progress lines, XCom ``t9k_progress`` and
``progress_timeout``, whose deadline a new triggerer takes from the reports' log timestamps.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pytest

from benchmarks.airflow_deployment import AIRFLOW_3, JOB_URL_TEMPLATE, AirflowDeployment, LogLine
from t9k_provider.jobclient import identity as ident
from t9k_provider.progress import MARKER
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.testing import LocalCluster, wait_for
from t9k_provider.waiting import status as job_status
from tests.deployment.dags.deployment_dags import EPOCHS, PROGRESS_STEPS, STALL_RESTART_TIMEOUT, STALL_TIMEOUT

pytestmark = [pytest.mark.deployment, pytest.mark.cluster, pytest.mark.timeout(480)]

JOBS = "/apis/batch.tensorstack.dev/v1beta1/namespaces/default"
EPOCH = re.compile(rf"\[([\w.-]+)/main\] epoch (\d+)/{EPOCHS} loss=")
#: Bounds of the waits below, generous for a loaded 2-core machine.
RUN_TIMEOUT = 240
START_TIMEOUT = 120
#: A stall verdict comes within progress_timeout plus one poll of the report; this much later on a loaded
#: machine.
VERDICT_MARGIN = 4
#: A progress line of the task log (Airflow 2's text lines start with the logger's ``{file.py:N} INFO - ``).
PROGRESS_LINE = re.compile(r"(?:^| - )progress: step ")
#: Airflow 3's line in a task log when the triggerer starts (or starts again) the task's trigger.
TRIGGER_START = re.compile(r"^trigger \S+ \(ID \d+\) starting$")
#: The stall message: the last report, its time and how long before the verdict (progress.latest).
STALL = re.compile(
    r"no progress report for progress_timeout=(\d+)s; the last: step 1/100 at "
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC \((\d+):(\d\d):(\d\d) ago\)"
)


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


def gone(cluster: LocalCluster, name: str) -> bool:
    return get(cluster, f"{JOBS}/genericjobs/{name}") is None and not pods_of(cluster, "GenericJob", name)


# -- the deployment side -------------------------------------------------------------------------------------


def xcom(airflow: AirflowDeployment, dag_id: str, run_id: str, task_id: str, key: str) -> Any:
    """An XCom value as JSON: Airflow 3 answers the stored JSON, Airflow 2 its value unless stringified."""
    path = f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/{task_id}"
    value = airflow.request("GET", f"{path}/xcomEntries/{key}" + ("" if AIRFLOW_3 else "?stringify=false"))
    value = value["value"]
    return json.loads(value) if isinstance(value, str) else value


def progress_lines(airflow: AirflowDeployment, dag_id: str, run_id: str, task_id: str) -> list[LogLine]:
    ti = airflow.task_instance(dag_id, run_id, task_id)
    return [line for line in airflow.task_log(dag_id, run_id, task_id, ti["try_number"]) if is_progress(line)]


def dump(log: list[LogLine]) -> str:
    """A task log for an assertion message, with when each line was logged."""
    return "\n".join(f"{line.at} {line.text}" for line in log)


def is_progress(line: LogLine) -> bool:
    return PROGRESS_LINE.search(line.text) is not None


@dataclass(frozen=True)
class Stall:
    """A stall verdict as its message tells it: the job, the limit, the last report's time and the verdict's
    (the report's time plus its age then, whole seconds)."""

    job: str
    limit: int
    reported_at: float
    decided_at: float

    @property
    def age(self) -> float:
        return self.decided_at - self.reported_at


def stall_verdict(airflow: AirflowDeployment, dag_id: str, run_id: str, task_id: str) -> Stall:
    """The failed task's stall message, from its log (the verdict of the worker or of the triggerer)."""
    ti = airflow.task_instance(dag_id, run_id, task_id)
    assert ti["state"] == "failed" and ti["try_number"] == 1, ti
    log = airflow.task_log(dag_id, run_id, task_id, ti["try_number"])
    for line in log:
        if (m := STALL.search(line.text)) and (
            job := re.search(r"job default/([\w.-]+): no progress", line.text)
        ):
            at = datetime.strptime(m[2], "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
            age = int(m[3]) * 3600 + int(m[4]) * 60 + int(m[5])
            return Stall(job[1], int(m[1]), at, at + age)
    text = "\n".join(line.text for line in log[-30:])
    raise AssertionError(f"no stall message naming the last report in {dag_id}/{task_id}'s log:\n{text}")


# -- the runs ------------------------------------------------------------------------------------------------


OVERLAPPING = ("dep_pipeline", "dep_mark_failed", "dep_lost_worker", "dep_mapped_same_name")


@pytest.fixture(scope="module")
def runs(airflow: AirflowDeployment) -> dict[str, str]:
    """The runs that may overlap, started at once: DAG id -> run id (``dep_explicit_name`` has two)."""
    started = {dag_id: airflow.trigger(dag_id) for dag_id in OVERLAPPING}
    started["dep_explicit_name"] = airflow.trigger("dep_explicit_name")
    started["dep_explicit_name/2"] = airflow.trigger("dep_explicit_name")
    started["dep_progress"] = airflow.trigger("dep_progress")
    started["dep_stall"] = airflow.trigger("dep_stall")
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
    """The final log of the train task, from the REST API: each rank's epoch lines, once each, prefixed with
    their pod."""
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
    expected = [(f"{name}-worker-{rank}", epoch) for rank in (0, 1) for epoch in range(1, EPOCHS + 1)]
    assert sorted(lines) == expected


def test_extra_link_resolves_to_the_job(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> None:
    run_id = runs["dep_pipeline"]
    airflow.wait_for_run("dep_pipeline", run_id, RUN_TIMEOUT)
    job = job_of(cluster, "pytorchtrainingjobs", "dep_pipeline", run_id, "train")
    assert job is not None
    url = JOB_URL_TEMPLATE.format(namespace="default", name=job["metadata"]["name"])
    links = airflow.extra_links("dep_pipeline", run_id, "train")
    assert links["T9k Job"] == url
    assert not links.get("TensorBoard")  # the job has no tensorboardSpec


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


def test_progress_reports_show_as_progress_lines_and_end_in_xcom(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> None:
    """A training deferred at once reports a step every half second for about 24 s: the triggerer writes a
    progress line (rate, ETA, loss) at most every 5 s while the job runs, never a raw report line, and the
    task pushes the last report and the history to XCom ``t9k_progress``."""
    run_id = runs["dep_progress"]
    assert airflow.wait_for_run("dep_progress", run_id, RUN_TIMEOUT)["state"] == "success"
    ti = airflow.task_instance("dep_progress", run_id, "train")
    assert ti["try_number"] == 1
    log = airflow.task_log("dep_progress", run_id, "train", ti["try_number"])
    text = "\n".join(line.text for line in log)
    assert any(line.text.endswith("training starts") for line in log), text  # replica lines are in the log
    assert MARKER not in text, "a report line reached the task log"
    progress = [line for line in log if is_progress(line)]
    assert progress, text

    reported = xcom(airflow, "dep_progress", run_id, "train", "t9k_progress")
    last = {"loss": round(1.0 / PROGRESS_STEPS, 4)}
    assert reported["step"] == reported["total"] == PROGRESS_STEPS and reported["metrics"] == last, reported
    history = reported["history"]
    assert [h["step"] for h in history] == list(range(1, PROGRESS_STEPS + 1)), history
    assert history[-1]["metrics"] == last

    job = job_of(cluster, "genericjobs", "dep_progress", run_id, "train")
    assert job is not None
    completed = job_status.parse_time(job["status"].get("completionTime"))
    assert completed is not None, job["status"]
    with_eta = [
        line for line in progress if re.search(r", [\d.]+ steps/s, ETA \d+:\d\d:\d\d, loss=", line.text)
    ]
    assert with_eta and with_eta[0].at is not None and with_eta[0].at < completed, (
        f"a progress line with a rate and an ETA must be written while job {job['metadata']['name']} runs "
        f"(it completed at {completed}):\n{dump(progress)}"
    )
    # one line when the first report comes, then at most one per 5 s, and one at the end; per run of the
    # trigger, which Airflow 3 may start again (its log says so), and which then reads the log from the start
    reporting = history[-1]["time"] - history[0]["time"]
    starts = max(1, sum(1 for line in log if TRIGGER_START.search(line.text)))
    assert len(progress) <= starts * (2 + reporting / 5), dump(log)
    assert f"progress: step {PROGRESS_STEPS}/{PROGRESS_STEPS} (100.0%)" in progress[-1].text
    assert progress[-1].text.endswith(f"loss={last['loss']}")


@pytest.mark.parametrize(
    ("task_id", "poll_interval"), [("deferred", 2), ("in_worker", 1)], ids=["deferred", "in_worker"]
)
def test_a_stalled_training_is_stopped_after_progress_timeout(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str], task_id: str, poll_interval: int
) -> None:
    """A training that reports step 1 and hangs: progress_timeout (8 s) after that report the job is deleted
    and the task fails naming the report, in the triggerer as in the worker. Without progress_timeout the
    job would sleep for 10 minutes."""
    run_id = runs["dep_stall"]
    airflow.wait_for_task(
        "dep_stall", run_id, task_id, ("failed", "success"), START_TIMEOUT + 4 * STALL_TIMEOUT
    )
    stall = stall_verdict(airflow, "dep_stall", run_id, task_id)
    assert stall.limit == STALL_TIMEOUT
    # whole seconds: the report's time is truncated, its age rounded
    assert STALL_TIMEOUT - 1 <= stall.age <= STALL_TIMEOUT + poll_interval + VERDICT_MARGIN, stall
    wait_for(f"job {stall.job} and its pods to be deleted", lambda: gone(cluster, stall.job), 60, 0.5)
    reported = xcom(airflow, "dep_stall", run_id, task_id, "t9k_progress")
    assert (reported["step"], reported["total"], reported["metrics"]) == (1, 100, {"loss": 0.9}), reported


@pytest.mark.parametrize("task_id", ["deferred", "in_worker"])
def test_a_stalled_training_s_line_and_report_are_taken_once(
    airflow: AirflowDeployment, runs: dict[str, str], task_id: str
) -> None:
    """The stalled replica's one line, its one progress line and its one report in XCom ``t9k_progress``'s
    history, once each, however the wait ended.

    Fails on the current code in the worker: a wait that concludes while the job still runs (a stall, any
    timeout) ends with the final pass (``WaitLogs.print_new``) from cursors that the live streams never
    handed back, so it reads the replica's log again from its start."""
    run_id = runs["dep_stall"]
    airflow.wait_for_task(
        "dep_stall", run_id, task_id, ("failed", "success"), START_TIMEOUT + 4 * STALL_TIMEOUT
    )
    ti = airflow.task_instance("dep_stall", run_id, task_id)
    log = airflow.task_log("dep_stall", run_id, task_id, ti["try_number"])
    lines = [line.text for line in log if line.text.endswith("step 1 done; hanging") or is_progress(line)]
    history = xcom(airflow, "dep_stall", run_id, task_id, "t9k_progress")["history"]
    assert (len(lines), [h["step"] for h in history]) == (2, [1]), f"{dump(log)}\nhistory: {history}"


# -- a killed triggerer (last: it stops every deferred task) -------------------------------------------------


@dataclass(frozen=True)
class TriggererRestart:
    """Two runs deferred when the triggerer was SIGKILLed, and what was seen before a new one started."""

    kill_run: str
    stall_run: str
    job: dict[str, Any]  # dep_triggerer_kill's job when the triggerer was killed
    after_kill: dict[str, Any] | None  # the same, 5 s later
    state_after_kill: str  # its task's state then
    stall_job_after_kill: dict[str, Any] | None
    killed_at: float
    restarted_at: float


@pytest.fixture(scope="module")
def triggerer_restart(
    airflow: AirflowDeployment, cluster: LocalCluster, runs: dict[str, str]
) -> TriggererRestart:
    """``dep_triggerer_kill`` (a job of 40 s, which outlasts the kill) and ``dep_stall_restart`` (a report,
    then a hang) both deferred; once the triggerer has read the report it is SIGKILLed, and a new one starts
    5 s later."""
    for key, run_id in runs.items():  # the triggerer dies alone: earlier runs must not be caught in it
        if key != "dep_mark_failed":
            airflow.wait_for_run(key.split("/")[0], run_id, RUN_TIMEOUT)
    kill_run = airflow.trigger("dep_triggerer_kill")
    stall_run = airflow.trigger("dep_stall_restart")
    airflow.wait_for_task("dep_triggerer_kill", kill_run, "wait", ("deferred",), START_TIMEOUT)
    job = wait_for_running_job(cluster, "genericjobs", "dep_triggerer_kill", kill_run, "wait")
    airflow.wait_for_task("dep_stall_restart", stall_run, "deferred", ("deferred",), START_TIMEOUT)
    wait_for(
        "the triggerer to read dep_stall_restart's report",
        lambda: progress_lines(airflow, "dep_stall_restart", stall_run, "deferred"),
        START_TIMEOUT,
        0.5,
    )
    time.sleep(2)  # the triggerer has picked the triggers up and is watching the jobs

    airflow.crash("triggerer")
    killed_at = time.time()
    time.sleep(5)
    stall_job = job_of(cluster, "genericjobs", "dep_stall_restart", stall_run, "deferred")
    restart = TriggererRestart(
        kill_run, stall_run, job,
        get(cluster, f"{JOBS}/genericjobs/{job['metadata']['name']}"),
        airflow.task_instance("dep_triggerer_kill", kill_run, "wait")["state"],
        stall_job, killed_at, time.time(),
    )  # fmt: skip
    airflow.start_component("triggerer")
    return restart


def test_sigkill_of_the_triggerer_leaves_the_job_and_a_new_triggerer_resumes_the_task(
    airflow: AirflowDeployment, cluster: LocalCluster, triggerer_restart: TriggererRestart
) -> None:
    restart = triggerer_restart
    name, uid = restart.job["metadata"]["name"], restart.job["metadata"]["uid"]
    job = restart.after_kill
    assert job is not None and job["metadata"]["uid"] == uid
    assert "deletionTimestamp" not in job["metadata"]
    assert restart.state_after_kill == "deferred"

    run_id = restart.kill_run
    assert airflow.wait_for_run("dep_triggerer_kill", run_id, RUN_TIMEOUT)["state"] == "success"
    ti = airflow.task_instance("dep_triggerer_kill", run_id, "wait")
    assert ti["try_number"] == 1
    job = get(cluster, f"{JOBS}/genericjobs/{name}")
    assert job is not None and job["metadata"]["uid"] == uid and job_status.outcome(job) == "succeeded"


def test_a_new_triggerer_keeps_the_stall_deadline_of_the_reports(
    airflow: AirflowDeployment, cluster: LocalCluster, triggerer_restart: TriggererRestart
) -> None:
    """The triggerer that read the report dies; the new one re-reads it from the log with its own timestamp,
    so the task fails progress_timeout (45 s) after the report, not 45 s after the new triggerer took over
    (some 10 s after the kill), nor with the report's time taken from when it was read again."""
    restart = triggerer_restart
    assert restart.stall_job_after_kill is not None, "the killed triggerer's job must be left running"
    airflow.wait_for_run("dep_stall_restart", restart.stall_run, RUN_TIMEOUT)
    stall = stall_verdict(airflow, "dep_stall_restart", restart.stall_run, "deferred")
    assert stall.job == restart.stall_job_after_kill["metadata"]["name"]
    assert stall.limit == STALL_RESTART_TIMEOUT
    assert stall.reported_at < restart.killed_at, (
        f"the report's time must be when it was written (before the kill at {restart.killed_at:.0f}), "
        f"not when the new triggerer read it: {stall}"
    )
    deadline = stall.reported_at + STALL_RESTART_TIMEOUT
    assert deadline - 1 <= stall.decided_at <= deadline + 2 + VERDICT_MARGIN, (
        f"the verdict must come at the report's deadline ({deadline:.0f}), not {STALL_RESTART_TIMEOUT}s "
        f"after the new triggerer (started at {restart.restarted_at:.0f}) took over: {stall}"
    )
    wait_for(f"job {stall.job} and its pods to be deleted", lambda: gone(cluster, stall.job), 60, 0.5)
