"""A waited-for job's states (``jobclient.feed``), run through the trigger's wait over a scripted client:
transient read errors retried, 401 re-authentication, fatal answers, the shared watch taken without a read,
expired, refused or cut-short watches, the spacing of new states."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from tests.airflow.fakes import api_error
from tests.airflow.scripted import (
    JOBS,
    FakeAsyncClient,
    first_event,
    job,
    trigger,
    use_script,
    versioned,
)

pytestmark = pytest.mark.timeout(60)


async def test_transient_errors_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(
        monkeypatch,
        [api_error(503), ConnectionResetError("reset"), api_error(429), job("Succeeded")],
    )
    assert (await first_event(trigger()))["status"] == "succeeded"


async def test_persistent_transient_errors_become_retryable_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("t9k_provider.jobclient.feed.MAX_CONSECUTIVE_ERRORS", 3)
    use_script(monkeypatch, [api_error(503)])
    event = await first_event(trigger())
    assert event["status"] == "error" and event["retryable"] is True


async def test_forbidden_is_a_fatal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [api_error(403, "forbidden: cannot get genericjobs")])
    event = await first_event(trigger())
    assert event["status"] == "error" and event["retryable"] is False and "forbidden" in event["message"]


async def test_unauthorized_reopens_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # Expiring tokens over a long wait: every 401 after a good read gets a fresh client again.
    script = [api_error(401), job("Running")] * 5 + [job("Succeeded")]
    use_script(monkeypatch, script)
    monkeypatch.setattr(FakeAsyncClient, "reauthentications", 0)
    assert (await first_event(trigger()))["status"] == "succeeded"
    assert FakeAsyncClient.reauthentications == 5  # each retires the shared client: the next one is new


async def test_repeated_unauthorized_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [api_error(401)])
    event = await first_event(trigger())
    assert event["status"] == "error" and event["retryable"] is True


async def test_expired_watch_reads_again_and_watches_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_script(
        monkeypatch, [versioned("Running", "7"), versioned("Running", "9"), versioned("Succeeded", "12")]
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
        monkeypatch,
        [versioned("Running", "7"), versioned("Running", "9"), versioned("Running", "10"),
         versioned("Succeeded", "12")],
    )  # fmt: skip
    monkeypatch.setattr(FakeAsyncClient, "watch_mode", "changes")
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr(FakeAsyncClient, "gets", 0)
    started = time.monotonic()
    event = await first_event(trigger(poll_interval=30))
    assert event["status"] == "succeeded" and event["job"]["phase"] == "Succeeded"
    assert FakeAsyncClient.watch_calls == ["1"] and FakeAsyncClient.gets == 1
    assert time.monotonic() - started < 5  # the changes coalesce: the spacing is test_changes_are_spaced...


async def test_the_jobs_end_is_taken_at_once_within_the_spacing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short job ends right after it started: its end is not held back by the spacing, which would
    otherwise add itself to every task
    (docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators)."""
    use_script(
        monkeypatch, [versioned("Running", "7"), versioned("Failed", "9"), versioned("Succeeded", "12")]
    )
    monkeypatch.setattr(FakeAsyncClient, "watch_mode", "changes")
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr(FakeAsyncClient, "gets", 0)
    monkeypatch.setattr("t9k_provider.jobclient.feed.MIN_READ_SPACING_SECONDS", 120.0)
    event = await asyncio.wait_for(first_event(trigger(poll_interval=300)), 30)  # spaced, it would take 120 s
    assert event["status"] == "failed" and FakeAsyncClient.gets == 1


async def test_unwatchable_job_is_polled_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [versioned("Running", "7")])
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr(FakeAsyncClient, "gets", 0)
    task = asyncio.ensure_future(first_event(trigger(poll_interval=0.1)))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert FakeAsyncClient.watch_calls == ["1"]  # a 405 is not retried: no watch per poll
    assert 5 <= FakeAsyncClient.gets <= 13


async def test_watches_cut_short_fall_back_to_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [versioned("Running", "7")])
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
    watch.deliver("MODIFIED", versioned("Pending", "8"))  # arrived between subscribing and the read
    watch.seen(versioned("Running", "9"))
    assert not watch.changed.is_set() and watch.latest is None
    watch.deliver("MODIFIED", versioned("Running", "9"))
    assert not watch.changed.is_set()
    watch.deliver("MODIFIED", versioned("Succeeded", "10"))
    assert watch.changed.is_set() and watch.latest is not None
    assert watch.latest["status"]["phase"] == "Succeeded"


async def test_a_refused_watch_is_tried_again_after_a_watch_period(monkeypatch: pytest.MonkeyPatch) -> None:
    use_script(monkeypatch, [versioned("Running", "7")])
    monkeypatch.setattr(FakeAsyncClient, "watch_calls", [])
    monkeypatch.setattr("t9k_provider.jobclient.watch.WATCH_SECONDS", 0.4)
    monkeypatch.setattr("t9k_provider.jobclient.feed.MIN_READ_SPACING_SECONDS", 0.01)
    task = asyncio.ensure_future(first_event(trigger(poll_interval=0.05)))
    await asyncio.sleep(1.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 2 <= len(FakeAsyncClient.watch_calls) <= 5  # polled in between, watch retried every 0.4 s


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


@pytest.mark.parametrize(("then", "spaced"), [("Running", True), ("Succeeded", False)])
async def test_changes_are_spaced_but_the_jobs_end_cuts_the_pause_short(then: str, spaced: bool) -> None:
    """A change that comes right after the last look waits out the spacing pause, with what arrives during
    it taken after the pause; the job's end arriving during the pause is taken at once (a job that starts
    and ends within the spacing is seen ending as it ends)."""
    from t9k_provider.jobclient import feed as feed_module

    class Watch:
        running = True
        deleted = False
        failure: BaseException | None = None
        latest: dict[str, Any] | None = versioned("Running", "8")

        def __init__(self) -> None:
            self.changed = asyncio.Event()
            self.changed.set()
            self.looked_at = time.monotonic()  # just looked: the next state waits the spacing pause

        def deliver(self, state: dict[str, Any]) -> None:
            self.latest = state
            self.changed.set()

    watch = Watch()
    spacing = feed_module.MIN_READ_SPACING_SECONDS
    asyncio.get_running_loop().call_later(spacing / 5, watch.deliver, versioned(then, "9"))
    feed = feed_module.JobFeed(
        FakeAsyncClient, {}, JOBS, "ns", "j", uid="uid-1", pod_selector=None, poll_interval=30,
        execution_deadline=None, log=logging.getLogger(__name__),
    )  # type: ignore[arg-type]  # fmt: skip
    feed._watch = watch  # type: ignore[assignment]
    started = time.monotonic()
    state = await feed._watched(versioned("Running", "7"), delay=30)
    took = time.monotonic() - started
    assert state is not None and state["status"]["phase"] == then  # what came during the pause
    assert (took >= spacing * 0.9) if spaced else (took < spacing / 2), took
