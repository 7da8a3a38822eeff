"""A job that waits in its T9k Queue, as one look of the wait decides (``waiting.step`` with ``limits``): the
Queue is read every ``queue_every`` while the job waits and before a limit's verdict, the time in line is not
charged to ``startup_timeout`` (which counts from the admission), ``queue_timeout`` bounds it with a message
naming the Queue and its state, and no pod of a job in line is read."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.queueing import QueueState
from t9k_provider.waiting.step import WaitMemory, step
from tests.airflow.waiting.test_queueing import T0, gpus, state
from tests.support.builders import generic_manifest

pytestmark = pytest.mark.airflow_independent

CREATED = "2026-01-01T10:00:00Z"  # T0


def queued_job(phase: str = "Pending") -> dict[str, Any]:
    job = generic_manifest("j", namespace="ns", creationTimestamp=CREATED)
    job["spec"]["scheduler"] = {"t9kScheduler": {"queue": "gpu"}}
    job["status"] = {"phase": phase, "conditions": []}
    return job


def look(job: dict[str, Any], limits: WaitLimits, now: float, memory: WaitMemory, read: QueueState | None):
    """One look: ``step``, and again with ``read`` when it asks to read the Queue."""
    decided = step(job, limits, now, memory)
    if decided.action == "read_queue":
        decided = step(job, limits, now, decided.memory, queue=read, queue_read=True)
    return decided


def test_time_in_line_is_not_charged_to_startup_timeout_and_queue_timeout_bounds_it() -> None:
    limits = WaitLimits(startup_timeout=5, queue_timeout=60)
    job, memory = queued_job(), WaitMemory(T0, queue_every=3)
    first = step(job, limits, T0 + 1, memory)
    assert first.action == "wait"  # not yet due, and no limit passed: no read
    asked = step(job, limits, T0 + 5, memory)
    assert asked.action == "read_queue"  # startup_timeout passed: is the job in line?
    waiting = step(job, limits, T0 + 5, asked.memory, queue=state(read_at=T0 + 5), queue_read=True)
    assert waiting.action == "wait" and waiting.note is not None and "1st in line" in waiting.note
    assert waiting.memory.queue is not None and waiting.memory.queue.in_line
    later = look(job, limits, T0 + 40, waiting.memory, state(read_at=T0 + 40))
    assert later.action == "wait"  # 40 s in line, startup_timeout 5: still waiting
    over = look(job, limits, T0 + 60, later.memory, state(standing="closed", read_at=T0 + 60))
    assert (over.action, over.status, over.limit) == ("end", "timeout", "queue_timeout")
    assert over.message == (
        "not admitted by its queue within queue_timeout=60s: queue gpu is closed: it admits no new job, and "
        "this one waits until it opens"
    )


def test_startup_timeout_counts_from_the_admission() -> None:
    limits = WaitLimits(startup_timeout=5)
    job, memory = queued_job(), WaitMemory(T0, queue_every=3)
    admitted = state(standing="admitted", position=None, admitted_at=T0 + 10, read_at=T0 + 11)
    seen = look(job, limits, T0 + 11, memory, admitted)
    assert seen.action == "wait" and seen.memory.queue is not None
    assert seen.memory.queue.admitted_at == T0 + 10
    assert step(job, limits, T0 + 14.9, seen.memory).action == "wait"  # no read once admitted
    ended = step(job, limits, T0 + 15, seen.memory)
    assert (ended.action, ended.limit) == ("end", "startup_timeout")
    assert "since queue gpu admitted it (not scheduled)" in ended.message


def test_a_queue_that_cannot_be_read_leaves_startup_timeout_as_it_was() -> None:
    limits = WaitLimits(startup_timeout=5)
    ended = look(queued_job(), limits, T0 + 5, WaitMemory(T0, queue_every=3), None)
    assert (ended.action, ended.limit) == ("end", "startup_timeout")
    assert "(not admitted or not scheduled)" in ended.message


def test_a_job_in_line_is_read_every_queue_every_and_its_pods_not_at_all() -> None:
    limits = WaitLimits(pod_error_timeout=120)
    job, memory = queued_job(), WaitMemory(T0, queue_every=3)
    assert step(job, limits, T0 + 1, memory).action == "read_pods"  # not known to be in line yet
    seen = look(job, limits, T0 + 3, memory, state(read_at=T0 + 3))
    assert seen.action == "wait"  # in line: no pod of it is placed, none is read
    assert step(job, limits, T0 + 5, seen.memory).action == "wait"
    assert step(job, limits, T0 + 6, seen.memory).action == "read_queue"
    again = look(job, limits, T0 + 6, seen.memory, state(read_at=T0 + 6, needs=gpus(2)))
    assert again.note is None  # the same line: said once


def test_a_job_that_left_the_line_is_read_once_for_its_admission() -> None:
    limits = WaitLimits()
    job, memory = queued_job(), WaitMemory(T0, queue_every=3)
    in_line = look(job, limits, T0 + 3, memory, state(read_at=T0 + 3))
    running = queued_job("Running")
    asked = step(running, limits, T0 + 4, in_line.memory)
    assert asked.action == "read_queue"
    admitted = state(standing="admitted", position=None, admitted_at=T0 + 3.5, read_at=T0 + 4)
    said = step(running, limits, T0 + 4, asked.memory, queue=admitted, queue_read=True)
    assert said.note == "queue gpu admitted the job after 0:00:04 in line"  # since its creation
    assert step(running, limits, T0 + 60, said.memory).action == "wait"
