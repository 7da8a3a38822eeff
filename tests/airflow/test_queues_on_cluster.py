"""Tasks whose jobs wait in a T9k Queue, with ``dag.test()`` on the local cluster (real controller, scheduler
and replicas; 8 simulated GPUs): each DAG runs in a process of its own (``dagrun``), so that several tasks
wait at once. Three 2-GPU trainings in a Queue of 2 GPUs (a job holds it until all three are in line): one
runs, the others wait whole, say their place and an expected start close to their actual one, and none fails
by ``startup_timeout``; a later higher-priority task is admitted first; ``queue_timeout`` fails a task that
waits too long, naming the Queue and its state; a closed and a deleted Queue are said by the waiting tasks,
which fail at ``queue_timeout``, while what runs goes on.

The DAGs are in ``dags/t9k_it_queues.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.jobs.contract import LABEL_GROUP_NAME
from t9k_provider.kube.resources import GPU
from t9k_provider.kube.timestamps import parse_time
from t9k_provider.testing import LocalCluster, wait_for
from tests.airflow import dagrun
from tests.airflow.cluster import DAGS, airflow_on_cluster
from tests.airflow.dags.t9k_it_queues import STARTUP_TIMEOUT, training

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

DAG_FILE = DAGS / "t9k_it_queues.py"
SCHED, VERSION = "scheduler.tensorstack.dev", "v1beta1"
JOBS = ("batch.tensorstack.dev", "v1beta1")
#: How long a DAG run may take here (its process imports Airflow and parses the DAG first).
RUN_SECONDS = 240
#: The expected start said, against the actual one: within this share of the time the task waited.
WITHIN = 0.25
EXPECTED = re.compile(r"expected to start at (\d\d:\d\d:\d\d) UTC \(in (\d+):(\d\d):(\d\d)\)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with airflow_on_cluster(
        tmp_path_factory.mktemp("t9k-queues"), flink_operator=False, capacity={"gpus": "8"}
    ) as started:
        yield started


@pytest.fixture(scope="module")
def custom(cluster: LocalCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


def make_queue(custom: client.CustomObjectsApi, name: str) -> None:
    body = {"apiVersion": f"{SCHED}/{VERSION}", "kind": "Queue", "metadata": {"name": name},
            "spec": {"quota": {"requests": {GPU: 2}}}}  # fmt: skip
    custom.create_cluster_custom_object(SCHED, VERSION, "queues", body)


def podgroups(custom: client.CustomObjectsApi, queue: str) -> list[dict[str, Any]]:
    found = custom.list_cluster_custom_object(SCHED, VERSION, "podgroups")["items"]
    return [pg for pg in found if pg["spec"].get("queue") == queue]


def admitted(pg: dict[str, Any]) -> bool:
    return (pg.get("status") or {}).get("phase") in ("Inqueue", "Running")


def in_line(custom: client.CustomObjectsApi, queue: str, priority: int | None = None) -> list[str]:
    """The jobs in the Queue's line (of ``priority``, if given): not admitted and given a place. A PodGroup
    whose pods are still being created is not judged yet, so a quota freed meanwhile goes to one behind it."""
    return sorted(
        pg["metadata"]["name"]
        for pg in podgroups(custom, queue)
        if not admitted(pg)
        and (pg.get("status") or {}).get("queuePosition") is not None
        and priority in (None, pg["spec"].get("priority"))
    )


def job_phase(custom: client.CustomObjectsApi, name: str) -> str:
    job = custom.get_namespaced_custom_object(*JOBS, "default", "genericjobs", name)
    return str((job.get("status") or {}).get("phase") or "")


def start_job(custom: client.CustomObjectsApi, name: str, queue: str) -> None:
    """A job of the Queue that no task waits for, holding its quota until it is deleted."""
    body = training(queue, code="import time; time.sleep(600)")
    body["metadata"] = {"name": name, "namespace": "default"}
    custom.create_namespaced_custom_object(*JOBS, "default", "genericjobs", body)


class Run:
    """A DAG run in a process of its own: its output and, once it ended, its result."""

    def __init__(self, dag_id: str, directory: Path) -> None:
        self.dag_id = dag_id
        self.process, self.out = dagrun.start(DAG_FILE, dag_id, directory, "t9k_queue")
        self.log = directory / f"{dag_id}.log"
        self.deadline = time.monotonic() + RUN_SECONDS

    def wait_for(self, what: str, probe: Callable[[], object]) -> None:
        """``probe`` true within the run's own time (its process starts Airflow first: 70 s of it with both
        cores busy, with three more starting beside it), or the run's output once its process ended first."""
        remaining = max(1.0, self.deadline - time.monotonic())
        wait_for(what, lambda: probe() or self.process.poll() is not None, remaining)
        assert probe(), f"{what}: the run ended first: {self.output[-3000:]}"

    def finish(self) -> dict[str, Any]:
        try:
            self.process.wait(RUN_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        assert self.process.returncode == 0 and self.out.exists(), self.output[-3000:]
        return json.loads(self.out.read_text())

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def queue_record(self) -> dict[str, Any]:
        (record,) = json.loads(self.out.read_text())["xcoms"]["train"]["t9k_queue"]
        return record


@contextmanager
def placed_only_when_admitted(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> Iterator[list[str]]:
    """Samples, while the block runs, that no pod of a PodGroup its Queue has not admitted is bound to a node
    (the pods read first: a bound pod's PodGroup was admitted before the bind, so it shows admitted after);
    yields the violations found."""
    found: list[str] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.3):
            pods = core.list_namespaced_pod("default").items
            groups = {pg["metadata"]["name"]: pg for pg in podgroups(custom, "it-gpu")}
            for pod in pods:
                group = groups.get((pod.metadata.labels or {}).get(LABEL_GROUP_NAME, ""))
                if group is not None and pod.spec.node_name and not admitted(group):
                    found.append(f"{pod.metadata.name} on {pod.spec.node_name} while in line")

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        done.set()
        thread.join(5)


def estimates(output: str, around: float) -> list[tuple[float, float]]:
    """Each exact expected start the task log said, as (when said, the start said), epoch seconds; the clock
    times are taken on the day nearest ``around``."""
    found = []
    for clock, hours, minutes, seconds in EXPECTED.findall(output):
        day = datetime.fromtimestamp(around, timezone.utc)
        at = datetime.combine(day.date(), datetime.strptime(clock, "%H:%M:%S").time(), timezone.utc)
        at += timedelta(days=round((around - at.timestamp()) / 86400))
        found.append(
            (at.timestamp() - (int(hours) * 3600 + int(minutes) * 60 + int(seconds)), at.timestamp())
        )
    return found


def test_three_trainings_in_a_queue_of_two_gpus_wait_whole_and_say_when_they_start(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, tmp_path: Path
) -> None:
    """A job of the Queue holds its quota until all three are in line: each task's process takes seconds of
    CPU to start, and under load they started so far apart that the second waited only 6 s, not the longer
    than ``startup_timeout`` this test is about."""
    make_queue(custom, "it-gpu")
    start_job(custom, "hold-it-gpu", "it-gpu")
    wait_for("the holder runs", lambda: job_phase(custom, "hold-it-gpu") == "Running", 60)
    with placed_only_when_admitted(core, custom) as violations:
        runs = [Run(f"it_queue_{i}", tmp_path) for i in (1, 2, 3)]
        for run in runs:
            run.wait_for("all three in line", lambda: len(in_line(custom, "it-gpu")) == 3)
        freed = time.time()
        custom.delete_namespaced_custom_object(*JOBS, "default", "genericjobs", "hold-it-gpu")
        results = [run.finish() for run in runs]
    assert violations == []
    for run, result in zip(runs, results, strict=True):
        assert result["tasks"] == {"train": "success"}, run.output[-3000:]
    started = sorted(runs, key=lambda run: str(run.queue_record()["admitted_at"]))
    first = started[0].queue_record()  # admitted as soon as the holder's quota was free
    assert parse_time(first["admitted_at"]).timestamp() - freed < STARTUP_TIMEOUT, first
    for place, run in enumerate(started[1:], start=1):
        output, record = run.output, run.queue_record()
        actual = parse_time(record["admitted_at"]).timestamp()
        waited = record["waited_seconds"]
        assert waited > STARTUP_TIMEOUT, record  # longer than startup_timeout, and it did not fail by it
        assert f"queue it-gpu: {'1st' if place == 1 else '2nd'} in line" in output, output[-3000:]
        said = estimates(output, actual)
        assert said, output[-3000:]
        last = said[-1][1]
        assert abs(last - actual) <= WITHIN * waited, (said, actual, waited)
        errors = [(round(when - actual, 1), round(at - actual, 1)) for when, at in said]
        print(f"{run.dag_id}: waited {waited:.1f}s; (said, start said) minus the actual start: {errors}")


def test_priority_queue_timeout_and_a_closed_or_deleted_queue(
    custom: client.CustomObjectsApi, tmp_path: Path
) -> None:
    """One Queue whose quota a job holds until the test ends it: a task waits there (low), a second task
    (of a lower priority) with a 4 s ``queue_timeout`` fails, naming the Queue and its state, and a later one
    of a higher priority (high) goes first. Two more Queues, each full with a job: the task waiting in one is
    told it closed, the other's that it was deleted; both fail at their ``queue_timeout``, and the job that
    runs goes on."""
    for queue in ("it-prio", "it-closed", "it-deleted"):
        make_queue(custom, queue)
        start_job(custom, f"hold-{queue}", queue)
    wait_for("the holders run", lambda: all(job_phase(custom, f"hold-{q}") == "Running" for q in
             ("it-prio", "it-closed", "it-deleted")), 60)  # fmt: skip
    low, timeout, closed, deleted = (
        Run(f"it_queue_{r}", tmp_path) for r in ("low", "timeout", "closed", "deleted")
    )
    closed.wait_for("closed's in line", lambda: in_line(custom, "it-closed"))
    custom.patch_cluster_custom_object(SCHED, VERSION, "queues", "it-closed", {"spec": {"closed": True}})
    deleted.wait_for("deleted's in line", lambda: in_line(custom, "it-deleted"))
    custom.delete_cluster_custom_object(SCHED, VERSION, "queues", "it-deleted")
    low.wait_for("low in line", lambda: in_line(custom, "it-prio", priority=10))
    high = Run("it_queue_high", tmp_path)
    high.wait_for("high in line", lambda: in_line(custom, "it-prio", priority=50))
    timeout.wait_for("timeout's task ended", lambda: timeout.process.poll() is not None)  # quota still held
    custom.delete_namespaced_custom_object(*JOBS, "default", "genericjobs", "hold-it-prio")  # its end
    results = {run.dag_id: (run, run.finish()) for run in (low, timeout, closed, deleted, high)}
    assert job_phase(custom, "hold-it-deleted") == "Running"  # what its deleted Queue admitted goes on
    for name in ("hold-it-closed", "hold-it-deleted"):
        custom.delete_namespaced_custom_object(*JOBS, "default", "genericjobs", name)
    run, result = results["it_queue_timeout"]
    assert result["tasks"] == {"train": "failed"}, run.output[-3000:]
    assert "T9kJobTimeout" in run.output and re.search(
        r"not admitted by its queue within queue_timeout=4s: queue it-prio: \w+ in line; quota "
        rf"{re.escape(GPU)} 2 of 2 used, 0 free",
        run.output,
    ), run.output[-3000:]
    for name, said in (
        ("closed", "queue it-closed is closed"),
        ("deleted", "queue it-deleted does not exist any more"),
    ):
        run, result = results[f"it_queue_{name}"]
        assert result["tasks"] == {"train": "failed"}, run.output[-3000:]
        assert said in run.output and f"within queue_timeout=45s: {said}" in run.output, run.output[-3000:]
    (low_run, low_result), (high_run, high_result) = results["it_queue_low"], results["it_queue_high"]
    assert low_result["tasks"] == high_result["tasks"] == {"train": "success"}, low_run.output[-3000:]
    low_record, high_record = low_run.queue_record(), high_run.queue_record()
    # low was in line before high was started (the waits above), its task saw it so, and high went first;
    # high's task may never have seen it in line (its Queue is read every 3 polls, and it was admitted sooner)
    assert any(p["standing"] == "waiting" for p in low_record["positions"]), low_record
    assert high_record["admitted_at"] < low_record["admitted_at"], (low_record, high_record)
