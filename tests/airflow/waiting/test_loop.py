"""The one wait (``waiting.loop``): its protocol around ``step`` against a scripted seam, and every way a
wait ends run through both of its adapters, the worker's (``operators.worker_wait``) and the trigger's
(``triggers.job``), over one in-memory controller: both must end in the same ``WaitResult``. Then the task
ends the same way whichever waited (the worker's conclusion, or ``execute_complete`` after the trigger's
event)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import TaskDeferred

from t9k_provider.jobclient.client import JobClient
from t9k_provider.jobclient.identity import JobRef
from t9k_provider.operators import worker_wait
from t9k_provider.operators.kill import KillSwitch
from t9k_provider.operators.worker_wait import WorkerWait
from t9k_provider.progress import Report
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.triggers import job as trigger_module
from t9k_provider.triggers.job import T9kJobTrigger
from t9k_provider.waiting import loop
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.reported import ReportedProgress
from t9k_provider.waiting.result import WaitResult
from t9k_provider.waiting.step import Step, WaitMemory
from tests.airflow.fakes import FakeHook, FakeTI, StoreApi, make
from tests.support.builders import (
    FAILED,
    PENDING,
    SUCCEEDED,
    generic_manifest,
    replica_pod,
    unschedulable,
    waiting,
    with_status,
)

pytestmark = pytest.mark.timeout(60)
LOG = logging.getLogger(__name__)

RUNNING_LONG = ("Running", (("Running", "", "All pods are running normally."),))
PAUSED = ("Paused", (("Paused", "", "paused by user"),))
UNKNOWN = ("Unknown", ())


# -- the protocol, against a scripted seam ----------------------------------------------------------------


class Seam:
    """A seam that brings ``states`` one by one (the last one sticks) and records what the loop asks."""

    def __init__(self, states: list[Any], pods: list[dict[str, Any]] | None = None) -> None:
        self.states = states
        self.pod_list = pods or []
        self.asked: list[str] = []
        self.reads_work = True
        self.reported = ReportedProgress()

    async def next_state(self, job: dict[str, Any] | None, window: float) -> dict[str, Any] | WaitResult:
        self.asked.append("next_state")
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    async def pods(self) -> list[dict[str, Any]]:
        self.asked.append("pods")
        return self.pod_list

    async def largest_node(self) -> dict[str, int] | None:
        self.asked.append("largest_node")
        return {}

    async def recent_reports(self, since: float) -> bool:
        self.asked.append("recent_reports")
        return self.reads_work

    async def cordoned_nodes(self) -> set[str]:
        self.asked.append("cordoned_nodes")
        return {"n1"}

    def progress(self) -> ReportedProgress:
        return self.reported


def job(phase: tuple[str, Any], uid: str = "u1") -> dict[str, Any]:
    return with_status(generic_manifest("j", namespace="ns", uid=uid), phase[0], *phase[1])


def run(seam: Seam, limits: WaitLimits, memory: WaitMemory | None = None, uid: str = "u1") -> WaitResult:
    memory = memory or WaitMemory(time.time())
    return asyncio.run(loop.wait(seam, limits, memory, uid=uid, poll_interval=0.01, log=LOG))


def test_the_loop_ends_with_the_jobs_outcome_and_the_state_it_saw() -> None:
    seam = Seam([job(PENDING), job(RUNNING_LONG), job(SUCCEEDED)])
    result = run(seam, WaitLimits())
    assert (result.status, result.message) == ("succeeded", "")
    assert result.job is not None and result.job["status"]["phase"] == "Succeeded"
    assert seam.asked == ["next_state"] * 3


def test_a_seam_that_cannot_go_on_ends_the_wait_with_its_result() -> None:
    gone = WaitResult("error", "job ns/j was deleted while the task waited", retryable=True)
    assert run(Seam([job(RUNNING_LONG), gone]), WaitLimits()) is gone


def test_another_object_under_the_jobs_name_is_the_replaced_verdict() -> None:
    result = run(Seam([job(SUCCEEDED, uid="other")]), WaitLimits())
    assert (result.status, result.retryable) == ("error", True)
    assert result.message == "job ns/j was replaced by another object (uid other)"


def test_pods_and_the_largest_node_are_read_when_step_asks_and_only_then() -> None:
    stuck = waiting(replica_pod("j-worker-0", "worker", 0, "j"), "ErrImagePull")
    seam = Seam([job(PENDING)], [stuck])
    result = run(seam, WaitLimits(pod_error_timeout=0))
    assert result.status == "timeout" and "ErrImagePull" in result.message
    assert seam.asked == ["next_state", "pods", "largest_node"]
    quiet = Seam([job(PENDING), job(SUCCEEDED)], [stuck])
    assert run(quiet, WaitLimits()).status == "succeeded"
    assert "pods" not in quiet.asked  # no limit needs them, and no note is due yet


def test_a_stall_is_called_after_a_read_to_the_present_and_a_failed_read_waits_a_poll() -> None:
    seam = Seam([job(RUNNING_LONG)])
    seam.reads_work = False
    memory = WaitMemory(time.time(), hand_back_at=time.time() + 0.3)
    result = run(seam, WaitLimits(progress_timeout=1), memory)
    assert result.status == "running"  # no verdict on a read that failed: handed back at 0.3 s
    assert seam.asked.count("recent_reports") >= 2  # asked again after a poll interval
    seam = Seam([job(RUNNING_LONG)])
    result = run(seam, WaitLimits(progress_timeout=1))
    assert result.status == "timeout" and "no progress report since the job started running" in result.message
    assert seam.asked == ["next_state", "recent_reports"]


def test_a_newer_report_the_read_finds_moves_the_deadline() -> None:
    seam = Seam([job(RUNNING_LONG)])
    reports = iter([time.time() + 0.2, None])

    async def found(since: float) -> bool:
        seam.asked.append("recent_reports")
        at = next(reports, None)
        if at is not None:
            seam.reported.add(Report(1, 10, {}), at)
        return True

    seam.recent_reports = found  # type: ignore[method-assign]
    result = run(seam, WaitLimits(progress_timeout=1))
    assert result.status == "timeout" and "the last: step 1/10" in result.message
    assert seam.asked.count("recent_reports") == 2  # the second read found nothing newer


def test_a_pending_jobs_note_is_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("t9k_provider.waiting.notes.READ_INTERVAL", 0.0)
    pending = unschedulable(replica_pod("j-worker-0", "worker", 0, "j"), "0/1 nodes")
    with caplog.at_level(logging.INFO, logger=__name__):
        run(Seam([job(PENDING), job(SUCCEEDED)], [pending]), WaitLimits())
    assert "job waits: pod j-worker-0 is not scheduled: 0/1 nodes" in caplog.text


def test_the_wait_is_handed_back_when_its_time_came() -> None:
    memory = WaitMemory(time.time(), hand_back_at=time.time())
    result = run(Seam([job(RUNNING_LONG)]), WaitLimits(), memory)
    assert result.status == "running" and result.job is not None


# -- both adapters -----------------------------------------------------------------------------------------

#: name -> (the controller's script, wait limits, the job's pods: container waiting reasons)
CASES: dict[str, tuple[list[Any], dict[str, Any], list[str]]] = {
    "succeeded": ([PENDING, SUCCEEDED], {}, []),
    "failed": ([FAILED], {}, []),
    "startup-timeout": ([PENDING], {"startup_timeout": 0}, []),
    "running-timeout": ([RUNNING_LONG], {"running_timeout": 1}, []),
    "paused-timeout": ([PAUSED], {"paused_timeout": 1}, []),
    "unknown-timeout": ([UNKNOWN], {"unknown_timeout": 0}, []),
    "replica-cannot-start": ([PENDING], {"pod_error_timeout": 0}, ["ErrImagePull"]),
    "stalled": ([RUNNING_LONG], {"progress_timeout": 1}, []),
    "execution-timeout": ([PENDING], {"execution_deadline": 1.0}, []),
    "deleted": ([RUNNING_LONG, None], {}, []),
}


def controller(case: str) -> tuple[FakeHook, JobRef]:
    """The store with the case's job (its script played by reads), its pods labelled for it."""
    script, _, stuck = CASES[case]
    hook = FakeHook()
    created = hook.put(generic_manifest("j", namespace="ns"))
    ref = JobRef("GenericJob", "genericjobs", "j", "ns", created["metadata"]["uid"])
    hook.script = [state for state in script if state is not None]
    if None in script:  # the job is deleted after its first read
        original = hook.get_job

        def vanishing(*args: Any) -> dict[str, Any]:
            found = original(*args)
            hook.jobs.clear()
            return found

        hook.get_job = vanishing  # type: ignore[method-assign]
    hook.pods = [waiting(replica_pod(f"j-worker-{i}", "worker", i, "j"), why) for i, why in enumerate(stuck)]
    return hook, ref


def recording(monkeypatch: pytest.MonkeyPatch) -> list[Step]:
    """Every step the one loop takes, deciding with the real function."""
    steps: list[Step] = []
    real = loop.step

    def record(*args: Any, **kwargs: Any) -> Step:
        steps.append(real(*args, **kwargs))
        return steps[-1]

    monkeypatch.setattr(loop, "step", record)
    return steps


def in_worker(case: str) -> WaitResult:
    hook, ref = controller(case)
    client = JobClient(hook, LOG)  # type: ignore[arg-type]
    first = client.read(ref)
    assert isinstance(first, dict)
    wait = WorkerWait(
        client, ref, WaitLimits(**CASES[case][1]), None, poll_interval=0.01, kill=KillSwitch("keep"), log=LOG
    )
    return wait.run(first, None)


def in_trigger(case: str, monkeypatch: pytest.MonkeyPatch) -> WaitResult:
    hook, ref = controller(case)
    monkeypatch.setattr(T9kJobTrigger, "_client", lambda self: StoreApi(hook))
    trigger = T9kJobTrigger(
        credentials=hook.credentials, kind=ref.kind, plural=ref.plural, name=ref.name,
        namespace=ref.namespace, uid=ref.uid, poll_interval=0.01,
        limits=WaitLimits(**CASES[case][1]).to_kwargs(), pod_selector=pod_selector(ref.kind, ref.name),
    )  # fmt: skip

    async def events() -> list[dict[str, Any]]:
        return [event.payload async for event in trigger.run()]

    (event,) = asyncio.run(events())
    return WaitResult.from_event(event)


def test_the_worker_and_the_trigger_run_one_loop() -> None:
    assert worker_wait.wait is loop.wait
    assert trigger_module.wait is loop.wait


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wait_ends_the_same_way_through_either_adapter(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        worker_steps = recording(patch)
        worker = in_worker(case)
    with monkeypatch.context() as patch:
        trigger_steps = recording(patch)
        deferred = in_trigger(case, patch)
    assert (worker.status, worker.message, worker.retryable) == (
        deferred.status, deferred.message, deferred.retryable,
    )  # fmt: skip
    assert worker.status != "running"
    if case != "deleted":  # a deletion ends the wait in the seam, not in a step
        assert worker_steps[-1].action == trigger_steps[-1].action == "end"


# -- the task ends the same way whichever waited ------------------------------------------------------------


def bind_pods(hook: FakeHook, reasons: list[str]) -> None:
    """The case's stuck pods, labelled for the job the operator just created (its name is the task
    instance's)."""
    (_, name), *_ = hook.jobs
    hook.pods = [
        waiting(replica_pod(f"{name}-worker-{i}", "worker", i, name), why) for i, why in enumerate(reasons)
    ]


def ending(run_task: Any) -> tuple[str, str]:
    """How the task ended: ``("result", phase)`` or the exception's type and message."""
    try:
        return "result", run_task()["phase"]
    except Exception as exc:
        return type(exc).__name__, str(exc)


def task_in_worker(case: str) -> tuple[tuple[str, str], FakeHook]:
    script, limits, stuck = CASES[case]
    hook = FakeHook()
    hook.script = list(script)
    original = hook.create_job

    def create(plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        created = original(plural, namespace, body)
        bind_pods(hook, stuck)
        return created

    hook.create_job = create  # type: ignore[method-assign]
    options = {k: v for k, v in limits.items() if k != "execution_deadline"}
    if "execution_deadline" in limits:
        options["execution_timeout"] = timedelta(microseconds=1)
    op = make(hook, **options)
    return ending(lambda: op.execute({"ti": FakeTI()})), hook


def task_deferred(case: str, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[str, str], FakeHook]:
    script, limits, stuck = CASES[case]
    hook = FakeHook()
    hook.script = list(script)
    options = {k: v for k, v in limits.items() if k != "execution_deadline"}
    if "execution_deadline" in limits:
        options["execution_timeout"] = timedelta(microseconds=1)
    op = make(hook, deferrable=True, **options)
    context = {"ti": FakeTI()}
    with monkeypatch.context() as patch:  # defer at once, whatever the first look would say
        patch.setattr(WorkerWait, "run", lambda self, job, until, seen=None: WaitResult("running", job=job))
        with pytest.raises(TaskDeferred) as handed:
            op.execute(context)
    bind_pods(hook, stuck)
    trigger = handed.value.trigger
    assert isinstance(trigger, T9kJobTrigger)
    monkeypatch.setattr(T9kJobTrigger, "_client", lambda self: StoreApi(hook))

    async def events() -> list[dict[str, Any]]:
        return [event.payload async for event in trigger.run()]

    (event,) = asyncio.run(events())
    return ending(lambda: op.execute_complete(context, event)), hook


@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "deleted"))
def test_a_task_ends_the_same_way_whichever_waited(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    worker_end, worker_store = task_in_worker(case)
    deferred_end, deferred_store = task_deferred(case, monkeypatch)
    assert worker_end == deferred_end
    assert sorted(worker_store.jobs) == sorted(deferred_store.jobs)  # deleted (or kept) alike
    assert worker_store.deletes() == deferred_store.deletes()


class Said:
    """A logger that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)


def test_each_disruption_the_controller_records_is_said_once_and_a_drain_by_its_cordon() -> None:
    """The job restarts as a whole after worker-1's eviction (its node cordoned: a drain), then after a
    preemption: each is said when the wait first sees it, never again, and the nodes are read only for an
    eviction."""
    evicted = {"replicaType": "worker", "replicaIndex": 1, "node": "n1", "reason": "EvictionByEvictionAPI",
               "time": "2026-01-01T10:00:05Z", "uid": "p1", "action": "RestartJob", "restart": 1}  # fmt: skip
    preempted = {**evicted, "reason": "PreemptionByScheduler", "time": "2026-01-01T10:01:00Z", "uid": "p2",
                 "restart": 2, "message": "(PodGroup ns/urgent, priority 80 > 50)"}  # fmt: skip
    first, second = job(RUNNING_LONG), job(RUNNING_LONG)
    first["status"]["disruptions"] = [evicted]
    second["status"]["disruptions"] = [evicted, preempted]
    seam, said = Seam([first, first, second, second, job(SUCCEEDED)]), Said()
    result = asyncio.run(
        loop.wait(seam, WaitLimits(), WaitMemory(time.time()), uid="u1", poll_interval=0.01, log=said)
    )
    assert result.status == "succeeded"
    assert said.lines == [
        "disruption: worker-1 was evicted (drain of node n1) at 10:00:05 UTC; the job restarts as a whole "
        "(restart 1)",
        "disruption: worker-1 was preempted by ns/urgent (priority 80 > 50) on node n1 at 10:01:00 UTC; the "
        "job restarts as a whole (restart 2)",
    ]
    assert seam.asked.count("cordoned_nodes") == 1
