"""T9kJobTrigger: serialisation, every event it can fire, transient errors, kill semantics."""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from t9k_provider.jobs import API_VERSION
from t9k_provider.kube.resources import ResourceType
from t9k_provider.triggers.job import T9kJobTrigger
from tests.airflow.fakes import generic_manifest, kube_error, with_status
from tests.airflow.versions import airflow3_only

pytestmark = pytest.mark.timeout(60)

JOBS = ResourceType(API_VERSION, "GenericJob", "genericjobs")


class FakeAsyncClient:
    """Stands in for an ``AsyncT9kClient`` lease and the ``KubeApi`` it holds (``api`` is itself): replays a
    script of jobs or exceptions, one per GET."""

    pods: list[dict[str, Any]] = []
    #: Leases held now; ``unbuildable`` makes a new lease fail as building a client can (an exec plugin).
    leases = 0
    unbuildable = False

    def __init__(self, script: list[Any], deletes: list[tuple[str, str | None]]) -> None:
        self.script = script
        self.deletes = deletes
        self.api = self

    async def __aenter__(self) -> FakeAsyncClient:
        await asyncio.sleep(0)
        if FakeAsyncClient.unbuildable:
            raise ConnectionError("exec plugin: cannot reach the identity provider")
        FakeAsyncClient.leases += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        FakeAsyncClient.leases -= 1

    async def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        assert rt == JOBS and namespace == "ns" and name == "j"
        FakeAsyncClient.gets += 1
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, BaseException):
            raise item
        return item

    pod_lists = 0

    async def list(
        self, rt: ResourceType, namespace: str, *, label_selector: str | None = None, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        if rt == JOBS:
            assert limit == 1  # only the watch's starting version is wanted
            return [], "1"
        assert rt.plural == "pods" and label_selector
        FakeAsyncClient.pod_lists += 1
        return self.pods, "1"

    watch_calls: list[str] = []
    gets = 0
    #: The namespace watch. "unsupported" answers 405 (a proxy without watch: the trigger falls back to
    #: polling, so the script plays out one GET per poll), "expired" answers 410 at once, "short" ends
    #: cleanly at once (a proxy cutting streams), "changes" streams the rest of the script as MODIFIED
    #: events (an exception in it breaks the stream)
    watch_mode = "unsupported"

    async def watch(
        self, rt: ResourceType, namespace: str, version: str, timeout: int
    ) -> AsyncIterator[dict[str, Any]]:
        assert rt == JOBS and namespace == "ns"
        FakeAsyncClient.watch_calls.append(version)
        if self.watch_mode == "unsupported":
            raise kube_error(405, "watch is not supported")
        if self.watch_mode == "expired":
            raise kube_error(410, "too old resource version")
        if self.watch_mode == "short":
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}
            return  # ends cleanly, long before its timeout
        while True:
            await asyncio.sleep(0.05)  # the trigger has read the job meanwhile
            item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
            if isinstance(item, BaseException):
                raise item
            yield {"type": "MODIFIED", "object": item}
            if len(self.script) == 1 and item is self.script[0]:
                break
        await asyncio.sleep(timeout)

    reauthentications = 0

    def reauthenticate(self) -> None:
        FakeAsyncClient.reauthentications += 1

    delete_error: BaseException | None = None

    async def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str,
    ) -> dict[str, Any]:
        assert rt == JOBS and propagation == "Foreground"
        assert uid is not None  # the stop policy deletes only with the uid it read as a precondition
        if self.delete_error is not None:
            error, self.delete_error = self.delete_error, None  # one refusal; the policy reads again
            raise error
        self.deletes.append((name, uid))
        return {}


def trigger(**kwargs: Any) -> T9kJobTrigger:
    defaults: dict[str, Any] = {
        "credentials": {"in_cluster": False, "kubeconfig": {"k": "v"}, "context": "ctx"},
        "kind": "GenericJob",
        "plural": "genericjobs",
        "name": "j",
        "namespace": "ns",
        "uid": "uid-1",
        "poll_interval": 0.01,
    }
    return T9kJobTrigger(**{**defaults, **kwargs})


def job(
    phase: str, *conditions: tuple[str, str, str], uid: str = "uid-1", created: str | None = None
) -> dict:
    out = with_status(generic_manifest("j", namespace="ns", uid=uid), phase, *conditions)
    if created:
        out["metadata"]["creationTimestamp"] = created
    return out


def use_script(monkeypatch: pytest.MonkeyPatch, script: list[Any]) -> list[tuple[str, str | None]]:
    deletes: list[tuple[str, str | None]] = []
    monkeypatch.setattr(FakeAsyncClient, "leases", 0)
    monkeypatch.setattr(FakeAsyncClient, "unbuildable", False)
    monkeypatch.setattr(T9kJobTrigger, "_client", lambda self: FakeAsyncClient(script, deletes))
    monkeypatch.setattr("t9k_provider.hooks.errors.BACKOFF_BASE_SECONDS", 0.001)
    return deletes


async def first_event(t: T9kJobTrigger) -> dict[str, Any]:
    events = [event.payload async for event in t.run()]
    assert len(events) == 1
    return events[0]


async def cancelled(t: T9kJobTrigger, after: float = 0.1) -> None:
    """What the triggerer does before ``on_kill``/``cleanup``: run the trigger, then cancel it."""
    task = asyncio.ensure_future(first_event(t))
    await asyncio.sleep(after)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_serialisation_round_trip() -> None:
    original = trigger(limits={"startup_timeout": 5.0, "execution_deadline": 123.0}, logging_interval=30.0)
    classpath, kwargs = original.serialize()
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert classpath == "t9k_provider.triggers.job.T9kJobTrigger"
    import json

    json.dumps(kwargs)  # plain JSON: no client objects, no file paths the triggerer may lack


def test_serialisation_round_trip_with_live_logs() -> None:
    original = trigger(
        pod_selector="tensorstack.dev/owner-name=j",
        log_targets=[["worker", 0], [None, None]],
        log_cursors={"uid/main": [5, 1]},
    )
    classpath, kwargs = original.serialize()
    assert kwargs["log_targets"] == [["worker", 0], [None, None]]
    rebuilt = T9kJobTrigger(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert rebuilt.log_cursors == {"uid/main": [5, 1]}


async def test_succeeded(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(
        monkeypatch, [job("Pending"), job("Running"), job("Succeeded", ("Completed", "Succeeded", "ok"))]
    )
    event = await first_event(trigger(resume={"job": {"name": "j"}, "cursors": {"u/c": [5, 1]}}))
    assert event["status"] == "succeeded"
    assert event["job"]["phase"] == "Succeeded" and event["job"]["uid"] == "uid-1"
    assert event["resume"] == {"job": {"name": "j"}, "cursors": {"u/c": [5, 1]}}  # echoed for the worker


async def test_failed_carries_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Failed", ("Failed", "Failed", "The job exited with an error code."))])
    event = await first_event(trigger())
    assert event["status"] == "failed" and "error code" in event["message"]


async def test_startup_timeout_uses_creation_time(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Pending", created="2020-01-01T00:00:00Z")])
    event = await first_event(trigger(limits={"startup_timeout": 60}))
    assert event["status"] == "timeout" and "startup_timeout" in event["message"]


async def test_execution_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Running")])
    started = time.monotonic()
    event = await first_event(trigger(limits={"execution_deadline": time.time() + 0.3}, poll_interval=5))
    assert event["status"] == "timeout"
    assert time.monotonic() - started < 3  # the sleep was shortened to the deadline


async def test_paused_limit_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Paused", ("Paused", "", "paused"))])
    event = await first_event(trigger(limits={"paused_timeout": 1}))
    assert event["status"] == "failed" and "paused_timeout" in event["message"]


async def test_transient_errors_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(
        monkeypatch,
        [kube_error(503), ConnectionResetError("reset"), kube_error(429), job("Succeeded")],
    )
    assert (await first_event(trigger()))["status"] == "succeeded"


async def test_persistent_transient_errors_become_retryable_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("t9k_provider.jobclient.feed.MAX_CONSECUTIVE_ERRORS", 3)
    use_script(monkeypatch, [kube_error(503)])
    event = await first_event(trigger())
    assert event["status"] == "error" and event["retryable"] is True


async def test_forbidden_is_a_fatal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [kube_error(403, "forbidden: cannot get genericjobs")])
    event = await first_event(trigger())
    assert event["status"] == "error" and event["retryable"] is False and "forbidden" in event["message"]


async def test_unauthorized_reopens_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # Expiring tokens over a long wait: every 401 after a good read gets a fresh client again.
    script = [kube_error(401), job("Running")] * 5 + [job("Succeeded")]
    use_script(monkeypatch, script)
    monkeypatch.setattr(FakeAsyncClient, "reauthentications", 0)
    assert (await first_event(trigger()))["status"] == "succeeded"
    assert FakeAsyncClient.reauthentications == 5  # each retires the shared client: the next one is new


async def test_repeated_unauthorized_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [kube_error(401)])
    event = await first_event(trigger())
    assert event["status"] == "error" and event["retryable"] is True


async def test_deleted_job(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [kube_error(404)])
    event = await first_event(trigger())
    assert event["status"] == "error" and "deleted" in event["message"]


async def test_replaced_job_is_not_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Succeeded", uid="other")])
    event = await first_event(trigger())
    assert event["status"] == "error" and "replaced" in event["message"]


async def test_logging_interval_hands_back_to_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Running")])
    event = await first_event(trigger(logging_interval=0.05))
    assert event["status"] == "running"


async def test_on_kill_deletes_only_with_delete_action(monkeypatch: pytest.MonkeyPatch) -> None:
    deletes = use_script(monkeypatch, [job("Running")])
    for action in ("delete", "keep"):
        t = trigger(on_kill_action=action)
        await cancelled(t)
        await t.on_kill()
        await t.cleanup()
    assert deletes == [("j", "uid-1")]
    assert FakeAsyncClient.leases == 0  # cleanup released the lease the kill used


@pytest.mark.parametrize("after", [0.0, 0.1], ids=["at-start", "while-waiting"])
async def test_kill_path_builds_nothing(monkeypatch: pytest.MonkeyPatch, after: float) -> None:
    """on_kill and cleanup delete through the lease run() took first, even when no client could be built
    any more (an exec plugin that fails now) and the kill comes before run() awaited anything."""
    deletes = use_script(monkeypatch, [job("Running")])
    monkeypatch.setattr("t9k_provider.triggers.job.TRIGGER_ON_KILL", True)
    t = trigger()
    await cancelled(t, after)
    FakeAsyncClient.unbuildable = True
    await t.on_kill()
    assert deletes == [("j", "uid-1")]
    await t.cleanup()
    assert FakeAsyncClient.leases == 0


async def test_an_event_releases_every_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer that stops at the first event (dag.test()) calls no cleanup: nothing may stay leased."""
    use_script(monkeypatch, [job("Succeeded")])
    async for _ in trigger().run():
        assert FakeAsyncClient.leases == 0
        break


def logged_lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the trigger logs, whatever handlers the Airflow version (and earlier tests) configured."""
    lines: list[str] = []

    class Log:
        def _add(self, msg: str, *args: Any, **_: Any) -> None:
            lines.append(msg % args if args else msg)

        debug = info = warning = error = exception = _add

    monkeypatch.setattr(T9kJobTrigger, "log", property(lambda self: Log()))
    return lines


@pytest.mark.parametrize("status", [404, 409])
async def test_on_kill_of_a_job_already_gone(monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    """404: deleted between the kill's read and its delete; 409: a precondition failed, and the fresh read
    shows that the name holds another job now."""
    script = [job("Running")]
    deletes = use_script(monkeypatch, script)
    t = trigger()
    await cancelled(t)

    async def refuse(*args: Any, **kwargs: Any) -> None:
        script[:] = [job("Running", uid="another")]
        raise kube_error(status)

    monkeypatch.setattr(FakeAsyncClient, "delete", refuse)
    lines = logged_lines(monkeypatch)
    await t.on_kill()
    assert deletes == []
    assert any("task killed: job ns/j already gone" in line for line in lines)


async def test_on_kill_keeps_a_job_that_already_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop policy of the worker's kill path: an ended job is kept (a later try reports its result)."""
    script = [job("Running")]
    deletes = use_script(monkeypatch, script)
    t = trigger()
    await cancelled(t)
    script[:] = [job("Succeeded")]
    lines = logged_lines(monkeypatch)
    await t.on_kill()
    assert deletes == []
    assert any("task killed: job ns/j had already ended; kept" in line for line in lines)


async def test_on_kill_of_a_job_that_changed_reads_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """409 on the resourceVersion precondition (the controller updated the job): read again, then delete."""
    deletes = use_script(monkeypatch, [job("Running")])
    monkeypatch.setattr(FakeAsyncClient, "delete_error", kube_error(409))
    t = trigger()
    await cancelled(t)
    gets = FakeAsyncClient.gets
    await t.on_kill()
    assert deletes == [("j", "uid-1")]
    assert FakeAsyncClient.gets - gets == 2


async def test_on_kill_that_the_api_refuses_is_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any other refusal is reported in the log, never raised: the triggerer would only log it too."""
    deletes = use_script(monkeypatch, [job("Running")])
    monkeypatch.setattr(FakeAsyncClient, "delete_error", kube_error(403, "forbidden"))
    t = trigger()
    await cancelled(t)
    lines = logged_lines(monkeypatch)
    await t.on_kill()
    assert deletes == []
    assert any("could not delete job ns/j" in line and "forbidden" in line for line in lines)


async def test_triggerer_restart_never_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelling run() (what a triggerer shutdown does) and cleanup() leave the job alone."""
    deletes = use_script(monkeypatch, [job("Running")])
    t = trigger(poll_interval=0.01)
    task = asyncio.ensure_future(first_event(t))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await t.cleanup()
    assert deletes == []


async def test_real_async_client_is_bound_to_its_own_configuration() -> None:
    from kubernetes_asyncio import client

    from t9k_provider.hooks.async_t9k import AsyncT9kClient

    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "secret-token"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    before = client.Configuration.get_default_copy().host
    async with AsyncT9kClient({"in_cluster": False, "kubeconfig": kubeconfig}) as lease:
        configuration = lease.api._client.configuration
        assert configuration.host == "http://127.0.0.1:1"
        assert "secret-token" in str(configuration.api_key)
    assert client.Configuration.get_default_copy().host == before


@pytest.mark.parametrize(
    ("state", "deleted"), [("deferred", False), (None, False), ("failed", True), ("success", True)]
)
async def test_cleanup_before_airflow_3_3_deletes_only_after_a_user_kill(
    monkeypatch: pytest.MonkeyPatch, state: str | None, deleted: bool
) -> None:
    deletes = use_script(monkeypatch, [job("Running")])
    monkeypatch.setattr("t9k_provider.triggers.job.TRIGGER_ON_KILL", False)
    t = trigger()

    async def task_state() -> str | None:
        return state

    monkeypatch.setattr(t, "_task_state", task_state)
    await cancelled(t)
    FakeAsyncClient.unbuildable = True  # the cleanup needs no new client
    await t.cleanup()
    assert bool(deletes) is deleted
    assert FakeAsyncClient.leases == 0


async def test_cleanup_is_inert_on_airflow_3_3_and_after_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    deletes = use_script(monkeypatch, [job("Succeeded")])
    t = trigger()

    async def killed() -> str:
        return "failed"

    monkeypatch.setattr(t, "_task_state", killed)
    monkeypatch.setattr("t9k_provider.triggers.job.TRIGGER_ON_KILL", True)
    await t.cleanup()  # 3.3+: on_kill is the only path
    monkeypatch.setattr("t9k_provider.triggers.job.TRIGGER_ON_KILL", False)
    await first_event(t)
    await t.cleanup()  # the event already handed the job back to a worker
    await t.on_kill()
    assert deletes == []


@airflow3_only("the triggerer reads task states through the execution API (RuntimeTaskInstance)")
async def test_task_state_reads_the_mapped_key(mocker: Any) -> None:
    get_states = mocker.patch(
        "airflow.sdk.execution_time.task_runner.RuntimeTaskInstance.get_task_states",
        return_value={"run": {"job_3": "deferred"}},
    )
    t = trigger()
    t.task_instance = mocker.Mock(
        dag_id="d",
        task_id="job",
        run_id="run",
        map_index=3,
        spec=["dag_id", "task_id", "run_id", "map_index"],
    )
    assert await t._task_state() == "deferred"
    assert get_states.call_args.kwargs["map_index"] == 3


async def test_replica_that_cannot_start_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [job("Pending")])
    stuck = {
        "metadata": {"name": "j-worker-0"},
        "status": {
            "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "InvalidImageName"}}}]
        },
    }
    monkeypatch.setattr(FakeAsyncClient, "pods", [stuck])
    event = await first_event(
        trigger(limits={"pod_error_timeout": 0}, pod_selector="tensorstack.dev/owner-name=j")
    )
    assert event["status"] == "timeout" and "InvalidImageName" in event["message"]


def _versioned(phase: str, version: str) -> dict:
    out = job(phase)
    out["metadata"]["resourceVersion"] = version
    return out


async def test_expired_watch_reads_again_and_watches_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_script(
        monkeypatch, [_versioned("Running", "7"), _versioned("Running", "9"), _versioned("Succeeded", "12")]
    )
    monkeypatch.setattr(FakeAsyncClient, "watch_mode", "expired")
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr("t9k_provider.jobclient.feed.MIN_READ_SPACING_SECONDS", 0.01)
    monkeypatch.setattr(FakeAsyncClient, "gets", 0)
    event = await first_event(trigger(poll_interval=30))
    assert event["status"] == "succeeded"
    # each read follows a (re)subscription to the namespace watch, so no change after it can be missed
    assert len(FakeAsyncClient.watch_calls) == 3 and FakeAsyncClient.gets == 3


async def test_watched_changes_need_no_read(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(
        monkeypatch, [_versioned("Running", "7"), _versioned("Running", "9"), _versioned("Succeeded", "12")]
    )
    monkeypatch.setattr(FakeAsyncClient, "watch_mode", "changes")
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr(FakeAsyncClient, "gets", 0)
    started = time.monotonic()
    event = await first_event(trigger(poll_interval=30))
    assert event["status"] == "succeeded" and event["job"]["phase"] == "Succeeded"
    assert FakeAsyncClient.watch_calls == ["1"] and FakeAsyncClient.gets == 1
    # two changes in a row: the second is taken only after the short pause, not at once
    assert 0.5 <= time.monotonic() - started < 5


async def test_unwatchable_job_is_polled_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [_versioned("Running", "7")])
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr(FakeAsyncClient, "gets", 0)
    task = asyncio.ensure_future(first_event(trigger(poll_interval=0.1)))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert FakeAsyncClient.watch_calls == ["1"]  # a 405 is not retried: no watch per poll
    assert 5 <= FakeAsyncClient.gets <= 13


@pytest.mark.parametrize(("state", "lists"), [("running", False), ("waiting", True)])
async def test_pods_are_listed_only_while_a_replica_has_not_started(
    monkeypatch: pytest.MonkeyPatch, state: str, lists: bool
) -> None:
    running = job("Running")
    running["status"]["tasks"] = [
        {
            "type": "worker",
            "replicas": [{"name": "j-worker-0", "containers": [{"name": "main", "state": state}]}],
        }
    ]
    use_script(monkeypatch, [running])
    monkeypatch.setattr(FakeAsyncClient, "pod_lists", 0)
    t = trigger(
        limits={"pod_error_timeout": 60}, pod_selector="tensorstack.dev/owner-name=j", poll_interval=0.05
    )
    task = asyncio.ensure_future(first_event(t))
    await asyncio.sleep(1.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (FakeAsyncClient.pod_lists > 3) is lists


async def test_watches_cut_short_fall_back_to_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [_versioned("Running", "7")])
    monkeypatch.setattr(FakeAsyncClient, "watch_mode", "short")
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr(FakeAsyncClient, "gets", 0)
    monkeypatch.setattr("t9k_provider.jobclient.feed.MIN_READ_SPACING_SECONDS", 0.01)
    task = asyncio.ensure_future(first_event(trigger(poll_interval=0.1)))
    await asyncio.sleep(1.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(FakeAsyncClient.watch_calls) == 5  # MAX_WATCH_FAILURES, then no more watching
    assert FakeAsyncClient.gets >= 5 + 3  # a read after each failed watch, then one per poll


async def test_an_event_older_than_the_read_is_not_news() -> None:
    from t9k_provider.jobclient.watch import JobWatch

    watch = JobWatch(FakeAsyncClient, {"in_cluster": True}, JOBS, "ns", "j")  # type: ignore[arg-type]
    watch.deliver("MODIFIED", _versioned("Pending", "8"))  # arrived between subscribing and the read
    watch.seen(_versioned("Running", "9"))
    assert not watch.changed.is_set() and watch.latest is None
    watch.deliver("MODIFIED", _versioned("Running", "9"))
    assert not watch.changed.is_set()
    watch.deliver("MODIFIED", _versioned("Succeeded", "10"))
    assert watch.changed.is_set() and watch.latest is not None
    assert watch.latest["status"]["phase"] == "Succeeded"


async def test_leases_share_one_client_until_a_401_retires_it() -> None:
    from t9k_provider.hooks.async_t9k import AsyncT9kClient, shared_clients

    def creds(token: str) -> dict[str, Any]:
        return {"in_cluster": False, "kubeconfig": {
            "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
            "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}]}}  # fmt: skip

    async with AsyncT9kClient(creds("a")) as one, AsyncT9kClient(creds("a")) as two:
        assert one.api is two.api and shared_clients() == 1
        async with AsyncT9kClient(creds("b")) as other:
            assert other.api is not one.api and shared_clients() == 2
        assert shared_clients() == 1  # its last lease closed it
        first = one.api
        one.reauthenticate()
        two.reauthenticate()  # the same 401 seen twice retires the client once
        async with AsyncT9kClient(creds("a")) as three:
            assert three.api is not first
            assert not first._client.rest_client.pool_manager.closed  # still leased by one and two
        assert shared_clients() == 0  # the retired client is no longer handed out
    assert first._client.rest_client.pool_manager.closed
    with pytest.raises(RuntimeError, match="outside"):
        one.api  # noqa: B018 - a lease that ended holds no client


async def test_a_refused_watch_is_tried_again_after_a_watch_period(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [_versioned("Running", "7")])
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr("t9k_provider.jobclient.watch.WATCH_SECONDS", 0.4)
    monkeypatch.setattr("t9k_provider.jobclient.feed.MIN_READ_SPACING_SECONDS", 0.01)
    task = asyncio.ensure_future(first_event(trigger(poll_interval=0.05)))
    await asyncio.sleep(1.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 2 <= len(FakeAsyncClient.watch_calls) <= 5  # polled in between, watch retried every 0.4 s


async def test_trigger_logs_why_a_pending_job_waits(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    use_script(monkeypatch, [job("Pending"), job("Succeeded")])
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
    waiting = {"metadata": {"name": "j-worker-0"}, "status": {"phase": "Pending", "conditions": [condition]}}
    monkeypatch.setattr(FakeAsyncClient, "pods", [waiting])
    monkeypatch.setattr("t9k_provider.waiting.notes.READ_INTERVAL", 0.0)
    with caplog.at_level(logging.INFO):
        event = await first_event(trigger(pod_selector="tensorstack.dev/owner-name=j"))
    assert event["status"] == "succeeded"
    logged = caplog.text + capsys.readouterr().out  # Airflow 3 triggers log through structlog to stdout
    assert "job waits: pod j-worker-0 is not scheduled: 0/1 nodes" in logged


async def test_a_watch_failure_during_the_read_spacing_pause_is_acted_on_at_once() -> None:
    """The shared watch can fail while a trigger spaces its reads: the trigger must read the job (and
    watch again) now, not keep the state it had and fall back to polling for a whole interval."""
    from t9k_provider.jobclient import feed as feed_module

    class Watch:
        running = True
        deleted = False
        failure: BaseException | None = None
        latest: dict[str, Any] | None = job("Running")

        def __init__(self) -> None:
            self.changed = asyncio.Event()
            self.changed.set()
            self.looked_at = time.monotonic()  # just read: the next state waits the spacing pause

        def fail(self, exc: BaseException) -> None:
            self.failure, self.running = exc, False
            self.changed.set()

    watch = Watch()
    asyncio.get_running_loop().call_later(
        feed_module.MIN_READ_SPACING_SECONDS / 2, watch.fail, ConnectionResetError("stream dropped")
    )
    feed = feed_module.JobFeed(
        FakeAsyncClient, {}, JOBS, "ns", "j", uid="uid-1", pod_selector=None, poll_interval=0.01,
        execution_deadline=None, log=logging.getLogger(__name__),
    )  # type: ignore[arg-type]  # fmt: skip
    feed._watch = watch  # type: ignore[assignment]
    state = await feed._watched(job("Running"), delay=30)
    assert state is None  # read it
    assert watch.changed.is_set()  # and the failure is still news for the next round
