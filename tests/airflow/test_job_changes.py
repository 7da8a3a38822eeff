"""JobChanges: how a wait in the worker takes the job's next state from a watch, and when it reads instead."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from t9k_provider.jobclient.changes import JobChanges
from tests.airflow.fakes import api_error, generic_manifest, with_status

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = [pytest.mark.airflow_independent, pytest.mark.timeout(30)]


def job(phase: str, version: str, uid: str = "u1") -> dict[str, Any]:
    out = with_status(generic_manifest("j", namespace="ns"), phase)
    out["metadata"].update(uid=uid, resourceVersion=version)
    return out


class Watching:
    """A hook whose watch replays ``events`` (an exception ends it), then stays open for ``lasts`` seconds."""

    def __init__(self, events: list[Any], lasts: float | None = None) -> None:
        self.events = events
        self.lasts = lasts
        self.watches: list[str | None] = []

    def watch_job(
        self, plural: str, namespace: str, name: str, resource_version: str | None, timeout: float
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        self.watches.append(resource_version)
        for item in self.events:
            if isinstance(item, BaseException):
                raise item
            yield item
        time.sleep(timeout if self.lasts is None else self.lasts)


def changes(hook: Any) -> JobChanges:
    import logging

    return JobChanges(hook, "genericjobs", "ns", "j", "u1", logging.getLogger("test"))


def test_a_quiet_job_costs_one_watch_per_window() -> None:
    hook = Watching([("BOOKMARK", {"metadata": {"resourceVersion": "9"}})])
    current = job("Running", "5")
    assert changes(hook).next_state(current, 0.2, lambda: False) is current
    assert hook.watches == ["5"]  # from the version held: no change after it is missed


def test_the_end_is_taken_as_it_happens() -> None:
    hook = Watching([("MODIFIED", job("Running", "6")), ("MODIFIED", job("Succeeded", "7"))])
    started = time.monotonic()
    state = changes(hook).next_state(job("Running", "5"), 10, lambda: False)
    assert state is not None and state["status"]["phase"] == "Succeeded"
    assert time.monotonic() - started < 2


def test_a_kill_is_noticed_at_the_next_change() -> None:
    hook = Watching([("MODIFIED", job("Running", "6"))], lasts=10)
    started = time.monotonic()
    state = changes(hook).next_state(job("Running", "5"), 10, lambda: True)  # killed meanwhile
    assert state is not None and state["metadata"]["resourceVersion"] == "6"
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    "event",
    [("DELETED", job("Running", "6")), ("MODIFIED", job("Running", "6", uid="another"))],
    ids=["deleted", "replaced"],
)
def test_deleted_or_replaced_job_is_read(event: tuple[str, dict[str, Any]]) -> None:
    assert changes(Watching([event], lasts=10)).next_state(job("Running", "5"), 10, lambda: False) is None


def test_expired_version_is_read_at_once() -> None:
    started = time.monotonic()
    follow = changes(Watching([api_error(410, "too old resource version")]))
    assert follow.next_state(job("Running", "5"), 10, lambda: False) is None
    assert time.monotonic() - started < 2 and follow.watching


def test_a_watch_cut_short_waits_out_the_window_then_reads() -> None:
    started = time.monotonic()
    assert changes(Watching([], lasts=0)).next_state(job("Running", "5"), 1.0, lambda: False) is None
    assert time.monotonic() - started >= 0.9


def test_a_refused_watch_turns_into_reads_every_window() -> None:
    hook = Watching([api_error(403, "cannot watch genericjobs")])
    follow = changes(hook)
    assert follow.next_state(job("Running", "5"), 0.1, lambda: False) is None
    assert not follow.watching
    assert follow.next_state(job("Running", "5"), 0.1, lambda: False) is None
    assert len(hook.watches) == 1
