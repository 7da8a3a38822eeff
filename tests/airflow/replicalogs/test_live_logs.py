"""Live replica logs while deferred: the trigger follows replica logs on the local cluster (real controller,
pods as processes) and the worker's final pass resumes where it stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_provider.jobs import API_VERSION
from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.replicalogs.follower import LogFollower
from t9k_provider.replicalogs.targets import ReplicaTarget, pod_selector
from t9k_provider.testing import LocalCluster
from t9k_provider.testing.polling import wait_for
from t9k_provider.triggers.job import T9kJobTrigger
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS
from tests.airflow.versions import airflow2_only
from tests.support.clusters import cluster_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

NS = "default"
CONN_ID = "t9k_live_logs"


cluster = cluster_fixture(controller=True)


@pytest.fixture
def in_triggerer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Airflow 2.11: run as its triggerer runs a trigger whose task log handler supports triggers (the
    context variable marking an individual trigger set, ``HANDLER_SUPPORTS_TRIGGERER``); Airflow 3: as is."""
    if AIRFLOW_V_3_0_PLUS:
        yield
        return
    from airflow.jobs import triggerer_job_runner
    from airflow.utils.log.trigger_handler import ctx_indiv_trigger

    monkeypatch.setattr(triggerer_job_runner, "HANDLER_SUPPORTS_TRIGGERER", True)
    token = ctx_indiv_trigger.set(True)
    try:
        yield
    finally:
        ctx_indiv_trigger.reset(token)


@pytest.fixture
def hook(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> Any:
    from t9k_provider.hooks.t9k import T9kHook

    conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(cluster.kubeconfig)}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(conn))
    return T9kHook(conn_id=CONN_ID)


def replica(rtype: str, code: str, replicas: int = 1, policy: Any = "Never") -> dict[str, Any]:
    container = {"name": "main", "image": "python:3.11", "command": [sys.executable, "-u", "-c", code]}
    return {"type": rtype, "replicas": replicas, "restartPolicy": policy, "template": {"spec": {
        "containers": [container]}}}  # fmt: skip


def submit(cluster: LocalCluster, kind: str, plural: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "namespace": NS}
    body = {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}
    status, _, job = cluster.request("POST", f"/apis/{API_VERSION}/namespaces/{NS}/{plural}", body)
    assert status == 201, job
    return job


def trigger(
    cluster: LocalCluster,
    kind: str,
    plural: str,
    job: dict[str, Any],
    targets: list[ReplicaTarget],
    **options: Any,
) -> T9kJobTrigger:
    """The trigger an operator defers to for ``job``, following ``targets``; ``options``: more arguments."""
    name = job["metadata"]["name"]
    arguments: dict[str, Any] = {
        "credentials": {"kubeconfig": yaml.safe_load(cluster.kubeconfig.read_text())},
        "kind": kind, "plural": plural, "name": name, "namespace": NS, "uid": job["metadata"]["uid"],
        "poll_interval": 1.0, "limits": {"startup_timeout": 60}, "pod_selector": pod_selector(kind, name),
        "log_targets": [list(t) for t in targets],  # as the operator serializes them
    }  # fmt: skip
    return T9kJobTrigger(**{**arguments, **options})


class Lines(logging.Handler):
    """The replica lines a trigger logs, with when each was logged."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("["):
            self.lines.append((record.created, message))

    def texts(self) -> list[str]:
        return [text for _, text in self.lines]


async def run_trigger(t: T9kJobTrigger) -> tuple[dict[str, Any], float, Lines]:
    """The first event, when it came, and the replica lines the trigger logged (through ``self.log``)."""
    lines = Lines()
    t._log = logging.getLogger(f"test.trigger.{t.name}")  # a stdlib logger in place of Airflow's (structlog)
    t._log.setLevel(logging.INFO)
    t._log.addHandler(lines)
    async for event in t.run():
        return event.payload, time.time(), lines
    raise AssertionError("the trigger ended without an event")


class FirstLineSeen(logging.Handler):
    """Creates ``path`` once the trigger logged ``first``."""

    def __init__(self, path: Path, first: str) -> None:
        super().__init__(logging.INFO)
        self.path, self.first = path, first

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == self.first:
            self.path.touch()


def test_replica_lines_reach_the_log_while_the_job_runs_and_the_final_pass_repeats_none(
    cluster: LocalCluster, hook: Any, in_triggerer: None, tmp_path: Path
) -> None:
    seen = tmp_path / "line-0-logged"  # the worker prints the rest once the trigger logged its first line
    code = (
        f"import os, time\nseen, deadline = {str(seen)!r}, time.time() + 30\n"
        "for i in range(16):\n    print(f'line {i}', flush=True)\n"
        "    while i == 0 and not os.path.exists(seen) and time.time() < deadline:\n        time.sleep(0.1)\n"
        "    time.sleep(0.4)"
    )
    job = submit(
        cluster,
        "GenericJob",
        "genericjobs",
        "live",
        {"replicaSpecs": [replica("worker", code, policy={"policy": "Never"})]},
    )
    t = trigger(cluster, "GenericJob", "genericjobs", job, [ReplicaTarget("worker", 0)])
    logger = logging.getLogger(f"test.trigger.{t.name}")  # the one run_trigger gives the trigger
    first_line_seen = FirstLineSeen(seen, "[live-worker-0/main] line 0")
    logger.addHandler(first_line_seen)
    try:
        event, fired_at, lines = asyncio.run(run_trigger(t))
    finally:
        logger.removeHandler(first_line_seen)
    assert event["status"] == "succeeded", event
    assert lines.texts() == [f"[live-worker-0/main] line {i}" for i in range(16)]
    # written as they happened (over the 6 s the lines after the first took once it was logged), not in one
    # batch when the job ended
    assert lines.lines[-1][0] - lines.lines[0][0] > 3.0, lines.lines
    assert fired_at >= lines.lines[-1][0]
    (key,) = event["log_cursors"]
    assert key.endswith("/main")

    # The worker's final pass after resumption starts where the trigger stopped: nothing twice.
    selector = pod_selector("GenericJob", "live")
    assert final_pass(hook, selector, event["log_cursors"]) == []
    # from no cursor it prints them all: the cursors are what prevented it
    assert len(final_pass(hook, selector, {})) == 16


def test_every_replica_arrives_when_cleanup_deletes_a_replica_still_running(
    cluster: LocalCluster, hook: Any, tmp_path: Path, in_triggerer: None
) -> None:
    """The cause of the missing worker-1 lines: a PyTorchTrainingJob without a master succeeds with worker-0,
    and ``cleanUpPolicy: Unfinished`` deletes a worker still running then, its log with it, so a log pass
    once the job has ended finds only worker-0. Followed live, both workers' lines arrive."""
    done = tmp_path / "rank1-printed"  # rank 0 ends after rank 1 printed all, as DDP ranks are in step
    code = (
        "import os, pathlib, time\nrank = os.environ['RANK']\n"
        "for i in range(6):\n    print(f'epoch {i} loss=0.5 rank={rank}', flush=True)\n    time.sleep(0.3)\n"
        f"done = pathlib.Path({str(done)!r})\n"
        "if rank == '0':\n    deadline = time.time() + 60\n"
        "    while not done.exists() and time.time() < deadline:\n        time.sleep(0.1)\n"
        "else:\n    done.touch()\n    time.sleep(120)"
    )
    spec = {
        "runPolicy": {"cleanUpPolicy": "Unfinished", "backoffLimit": 0},
        "replicaSpecs": [replica("worker", code, replicas=2)],
    }
    job = submit(cluster, "PyTorchTrainingJob", "pytorchtrainingjobs", "ddp", spec)
    t = trigger(cluster, "PyTorchTrainingJob", "pytorchtrainingjobs", job, [ReplicaTarget("worker", None)])
    event, _, lines = asyncio.run(run_trigger(t))
    assert event["status"] == "succeeded", event
    for rank in (0, 1):
        got = [text for text in lines.texts() if text.startswith(f"[ddp-worker-{rank}/main]")]
        expected = [f"[ddp-worker-{rank}/main] epoch {i} loss=0.5 rank={rank}" for i in range(6)]
        assert got == expected, lines.texts()

    # What a pass at the end sees once cleanup is done: worker-1 is gone with its log.
    deadline = time.monotonic() + 30
    selector = pod_selector("PyTorchTrainingJob", "ddp")
    while any(p["metadata"]["name"] == "ddp-worker-1" for p in hook.list_pods(NS, selector)):
        assert time.monotonic() < deadline, "worker-1 was not cleaned up"
        time.sleep(0.2)
    printed = final_pass(hook, selector, {})
    assert not any(re.search(r"ddp-worker-1", line) for line in printed), printed
    assert sum("ddp-worker-0" in line for line in printed) == 6


@airflow2_only("a triggerer whose task log handler does not support triggers")
def test_lines_are_left_to_the_worker_where_trigger_logs_do_not_reach_the_task_log(
    cluster: LocalCluster, hook: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.jobs import triggerer_job_runner
    from airflow.utils.log.trigger_handler import ctx_indiv_trigger

    monkeypatch.setattr(triggerer_job_runner, "HANDLER_SUPPORTS_TRIGGERER", False)
    token = ctx_indiv_trigger.set(True)
    try:
        code = "print('only line', flush=True)"
        spec = {"replicaSpecs": [replica("worker", code, policy={"policy": "Never"})]}
        job = submit(cluster, "GenericJob", "genericjobs", "unforwarded", spec)
        t = trigger(cluster, "GenericJob", "genericjobs", job, [ReplicaTarget("worker", 0)])
        t.log_cursors = {"earlier/main": [1, 1]}
        event, _, lines = asyncio.run(run_trigger(t))
    finally:
        ctx_indiv_trigger.reset(token)
    assert event["status"] == "succeeded", event
    assert lines.texts() == []
    assert event["log_cursors"] == {"earlier/main": [1, 1]}  # unchanged: the worker prints every line
    assert final_pass(hook, pod_selector("GenericJob", "unforwarded"), event["log_cursors"]) == [
        "[unforwarded-worker-0/main] only line"
    ]


def test_a_restarted_trigger_keeps_the_stall_deadline_its_reports_set(
    cluster: LocalCluster, in_triggerer: None
) -> None:
    """A triggerer restart builds the trigger anew from its stored arguments: it reads the report again from
    the log, whose timestamp (not the restart) sets the deadline, so the trigger fires when the report is
    ``progress_timeout`` old, not ``progress_timeout`` after the restart."""
    timeout, poll_interval = 10.0, 1.0
    code = "from t9k_provider.progress import report\nimport time\nreport(1, total=10, loss=0.5)\n"
    code += "time.sleep(600)"
    spec = {"replicaSpecs": [replica("worker", code, policy={"policy": "Never"})]}
    job = submit(cluster, "GenericJob", "genericjobs", "stalled", spec)
    target = ReplicaTarget("worker", 0)
    limits = {"startup_timeout": 60, "progress_timeout": timeout}
    stored = trigger(cluster, "GenericJob", "genericjobs", job, [target], limits=limits, leader=list(target))
    _, arguments = stored.serialize()  # what the triggerer's database holds
    reported_at = wait_for("the report in the leader's log", lambda: report_time(cluster, "stalled-worker-0"))

    async def first_life() -> None:  # the first triggerer follows the job a while, then stops
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(run_trigger(stored), 3.0)
        finally:
            await stored.cleanup()  # as a triggerer does; it stops no job of a task still deferred

    asyncio.run(first_life())
    time.sleep(max(0.0, reported_at + timeout * 0.6 - time.time()))
    restarted_at = time.time()
    event, fired_at, _ = asyncio.run(run_trigger(T9kJobTrigger(**arguments)))
    assert event["status"] == "timeout", event
    assert "no progress report for progress_timeout=10s; the last: step 1/10 at " in event["message"]
    assert event["progress"]["step"] == 1 and event["progress"]["metrics"] == {"loss": 0.5}
    assert fired_at - reported_at <= timeout + poll_interval + 1.0, (reported_at, restarted_at, fired_at)
    assert fired_at - restarted_at < timeout  # not counted afresh from the restart


#: A training that reports every second for 10 minutes.
REPORTING = (
    "from t9k_provider.progress import report\nimport time\nfor step in range(1, 601):\n"
    "    report(step, total=600)\n    time.sleep(1)"
)
LATE_TIMEOUT = 4.0


def reporting_for_a_while(cluster: LocalCluster, name: str) -> dict[str, Any]:
    """A job of ``REPORTING`` that has run for twice ``LATE_TIMEOUT`` since its first report."""
    spec = {"replicaSpecs": [replica("worker", REPORTING, policy={"policy": "Never"})]}
    job = submit(cluster, "GenericJob", "genericjobs", name, spec)
    first = wait_for("the first report", lambda: report_time(cluster, f"{name}-worker-0"))
    time.sleep(max(0.0, first + 2 * LATE_TIMEOUT - time.time()))
    return job


def test_a_trigger_started_late_reads_the_reports_it_missed_before_it_calls_a_stall(
    cluster: LocalCluster, in_triggerer: None
) -> None:
    """A trigger that starts after ``progress_timeout`` of the job's run (a triggerer restart, a slow pick-up
    after the deferral) holds no report yet: its stream is only opening. The training reports every second,
    so no stall may be called; the reports it missed are read before any verdict."""
    timeout = LATE_TIMEOUT
    job = reporting_for_a_while(cluster, "healthy")
    target = ReplicaTarget("worker", 0)
    limits = {"startup_timeout": 60, "progress_timeout": timeout}
    late = trigger(cluster, "GenericJob", "genericjobs", job, [target], limits=limits, leader=list(target))

    async def follow_a_while() -> dict[str, Any] | None:
        try:
            event, _, _ = await asyncio.wait_for(run_trigger(late), 3 * timeout)
            return event
        except asyncio.TimeoutError:
            return None
        finally:
            await late.cleanup()

    event = asyncio.run(follow_a_while())
    assert event is None, event  # still waiting: the training reports


def test_a_worker_wait_started_late_reads_the_reports_it_missed_before_it_calls_a_stall(
    cluster: LocalCluster, hook: Any
) -> None:
    """The same in the worker (a new try adopting the running job of an earlier one): its streams open as it
    starts waiting, and the wait hands back (here: after three timeouts) instead of calling a stall."""
    from t9k_provider.jobclient.client import JobClient
    from t9k_provider.jobclient.identity import JobRef
    from t9k_provider.operators.kill import KillSwitch
    from t9k_provider.operators.worker_wait import WorkerWait
    from t9k_provider.replicalogs.targets import Followed, pod_selector
    from t9k_provider.replicalogs.waitlogs import WaitLogs
    from t9k_provider.waiting.limits import WaitLimits

    job = reporting_for_a_while(cluster, "healthy-w")
    log = logging.getLogger("test.worker_wait")
    ref = JobRef("GenericJob", "genericjobs", "healthy-w", NS, job["metadata"]["uid"])
    target = ReplicaTarget("worker", 0)
    selector = pod_selector(ref.kind, ref.name)
    logs = WaitLogs(hook, NS, selector, Followed([target], target), {}, None, log, live=True)
    client = JobClient(hook, log)
    wait = WorkerWait(
        client, ref, WaitLimits(startup_timeout=60, progress_timeout=LATE_TIMEOUT), logs, poll_interval=1.0,
        kill=KillSwitch("keep"), log=log,
    )  # fmt: skip
    first = client.read(ref)
    assert isinstance(first, dict)
    assert wait.run(first, until=time.time() + 3 * LATE_TIMEOUT).status == "running"
    assert logs.lines.progress.step is not None and logs.lines.progress.step > 2 * LATE_TIMEOUT


def report_time(cluster: LocalCluster, pod: str) -> float | None:
    """When the pod's container wrote its progress report (the log's timestamp), or None before."""
    status, _, text = cluster.request("GET", f"/api/v1/namespaces/{NS}/pods/{pod}/log?timestamps=true")
    for line in pod_logs.parse_lines(text if status == 200 else ""):
        if line.text.startswith("T9K_PROGRESS "):
            return line.timestamp_ns / 1e9
    return None


def final_pass(hook: Any, selector: str, cursors: dict[str, list[int]]) -> list[str]:
    """What the operator's ``LogFollower`` prints from ``cursors`` (the worker's pass after the trigger)."""
    printed: list[str] = []
    log = logging.getLogger("test.final_pass")
    log.setLevel(logging.INFO)
    log.addHandler(handler := _Collect(printed))
    try:
        LogFollower(hook, NS, selector, lambda _: True, cursors, log=log).poll()
    finally:
        log.removeHandler(handler)
    return printed


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.INFO)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())
