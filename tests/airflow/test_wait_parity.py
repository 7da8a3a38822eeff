"""The operator's wait in the worker and the trigger's wait in the triggerer decide with one function
(``waiting.step``), and a task ends the same way whichever waited.

Each case runs both paths against one in-memory controller: the worker path is a non-deferrable ``execute``;
the deferred path is a deferrable ``execute`` that hands over at once, the operator's own trigger (its API
served from the same fake store), and ``execute_complete`` with the trigger's event. Both must conclude on
the same step and end the task with the same result or the same exception and message.
"""

from __future__ import annotations

import asyncio
import copy
from datetime import timedelta
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import TaskDeferred

from t9k_provider.operators import worker_wait
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.triggers import job as trigger_module
from t9k_provider.triggers.job import T9kJobTrigger
from t9k_provider.waiting import step as step_module
from t9k_provider.waiting.step import Step
from tests.airflow.builders import FAILED, PENDING, SUCCEEDED, make
from tests.airflow.fakes import FakeHook, FakeTI, kube_error, pod

pytestmark = pytest.mark.timeout(60)

LONG_AGO = "2026-01-01T00:00:00Z"  # the conditions' lastTransitionTime in ``with_status``
RUNNING_LONG = ("Running", (("Running", "", "All pods are running normally."),))
PAUSED = ("Paused", (("Paused", "", "paused by user"),))
UNKNOWN = ("Unknown", ())

#: name -> (the controller's script, operator options, the job's pods: container waiting reasons)
CASES: dict[str, tuple[list[Any], dict[str, Any], list[str]]] = {
    "succeeded": ([SUCCEEDED], {}, []),
    "failed": ([FAILED], {}, []),
    "startup-timeout": ([PENDING], {"startup_timeout": 0}, []),
    "running-timeout": ([RUNNING_LONG], {"running_timeout": 1}, []),
    "paused-timeout": ([PAUSED], {"paused_timeout": 1}, []),
    "unknown-timeout": ([UNKNOWN], {"unknown_timeout": 0}, []),
    "replica-cannot-start": ([PENDING], {"pod_error_timeout": 0}, ["ErrImagePull"]),
    "stalled": ([RUNNING_LONG], {"progress_timeout": 1}, []),
    "execution-timeout": ([PENDING], {"execution_timeout": timedelta(microseconds=1)}, []),
}


class StoreApi:
    """The trigger's client lease and ``KubeApi`` over the fake store the operator's hook uses, so both
    paths see one controller; it refuses watches (the trigger then reads its job every poll)."""

    def __init__(self, hook: FakeHook) -> None:
        self.hook = hook
        self.api = self

    async def __aenter__(self) -> StoreApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def reauthenticate(self) -> None:
        raise AssertionError("no 401 in these cases")

    async def get(self, rt: Any, namespace: str, name: str) -> dict[str, Any]:
        return self.hook.get_job(rt.plural, namespace, name)

    async def list(self, rt: Any, namespace: str, **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
        if rt.plural == "pods":
            return self.hook.list_pods(namespace, kwargs["label_selector"]), "1"
        return [], "1"

    async def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise kube_error(405, "watch is not supported")
        yield  # an async generator, as KubeApi.watch is

    async def delete(self, rt: Any, namespace: str, name: str, **kwargs: Any) -> dict[str, Any]:
        self.hook.delete_job(rt.plural, namespace, name, uid=kwargs.get("uid"))
        return {}


def controller(script: list[Any], waiting: list[str]) -> FakeHook:
    hook = FakeHook()
    hook.script = list(script)
    for index, reason in enumerate(waiting):
        replica = pod(f"replica-{index}", "worker", index, "placeholder")
        replica["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": reason, "message": "x"}}
        hook.pods.append(replica)
    return hook


def bind_pods(hook: FakeHook) -> None:
    """Label the pods for the job the operator just created (its name is the task instance's)."""
    (_, name), *_ = hook.jobs
    key, _, value = pod_selector("GenericJob", name).partition("=")
    for replica in hook.pods:
        replica["metadata"]["labels"][key] = value


def recording(calls: list[Step], monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
    """Record every step ``module``'s wait takes, deciding with the real function."""

    def record(*args: Any, **kwargs: Any) -> Step:
        decided = step_module.step(*args, **kwargs)
        calls.append(decided)
        return decided

    monkeypatch.setattr(module, "step", record)


def ending(run: Any) -> tuple[str, str]:
    """How the task ended: ``("result", phase)`` or the exception's type and message."""
    try:
        return "result", run()["phase"]
    except Exception as exc:
        return type(exc).__name__, str(exc)


def in_worker(case: str, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[str, str], Step, FakeHook]:
    script, options, waiting = CASES[case]
    hook = controller(script, waiting)
    steps: list[Step] = []
    recording(steps, monkeypatch, worker_wait)
    original = hook.create_job

    def create(plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        created = original(plural, namespace, body)
        bind_pods(hook)
        return created

    hook.create_job = create  # type: ignore[method-assign]
    op = make(hook, **options)
    context = {"ti": FakeTI()}
    return ending(lambda: op.execute(context)), steps[-1], hook


def deferred(case: str, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[str, str], Step, FakeHook]:
    script, options, waiting = CASES[case]
    hook = controller(script, waiting)
    monkeypatch.setattr(worker_wait, "step", lambda *a, **k: Step("hand_back"))  # defer at once
    op = make(hook, deferrable=True, **options)
    context = {"ti": FakeTI()}
    with pytest.raises(TaskDeferred) as handed:
        op.execute(context)
    bind_pods(hook)
    trigger = handed.value.trigger
    assert isinstance(trigger, T9kJobTrigger)
    steps: list[Step] = []
    recording(steps, monkeypatch, trigger_module)
    monkeypatch.setattr(T9kJobTrigger, "_client", lambda self: StoreApi(hook))
    events = asyncio.run(_events(trigger))
    assert len(events) == 1
    return ending(lambda: op.execute_complete(context, events[0])), steps[-1], hook


async def _events(trigger: T9kJobTrigger) -> list[dict[str, Any]]:
    return [event.payload async for event in trigger.run()]


def test_the_worker_and_the_trigger_decide_with_one_function() -> None:
    assert worker_wait.step is step_module.step
    assert trigger_module.step is step_module.step


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_task_ends_the_same_way_whichever_waited(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        worker_end, worker_step, worker_store = in_worker(case, patch)
    with monkeypatch.context() as patch:
        deferred_end, trigger_step, deferred_store = deferred(case, patch)
    assert worker_step.action == trigger_step.action == "conclude"
    assert (worker_step.status, worker_step.message) == (trigger_step.status, trigger_step.message)
    assert worker_end == deferred_end
    assert sorted(worker_store.jobs) == sorted(deferred_store.jobs)  # deleted (or kept) alike
    assert worker_store.deletes() == deferred_store.deletes()


def test_both_hand_back_when_nothing_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A running job within its limits: the worker's wait before deferring ends in a deferral, the
    trigger's logging interval in a hand-back to the worker, both by the same ``hand_back`` step."""
    hook = controller([RUNNING_LONG], [])
    steps: list[Step] = []
    recording(steps, monkeypatch, worker_wait)
    op = make(hook, deferrable=True, logging_interval=0.01)
    with pytest.raises(TaskDeferred) as handed:
        op.execute({"ti": FakeTI()})
    recording(steps, monkeypatch, trigger_module)
    monkeypatch.setattr(T9kJobTrigger, "_client", lambda self: StoreApi(hook))
    (event,) = asyncio.run(_events(copy.copy(handed.value.trigger)))
    assert event["status"] == "running"
    assert [s.action for s in steps if s.action in ("conclude", "hand_back")] == ["hand_back", "hand_back"]
