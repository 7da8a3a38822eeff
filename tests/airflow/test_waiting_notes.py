"""Why a pending job waits, in the task log: the scheduler's message, rate-limited, in the sync wait loop
and in the trigger."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from t9k_provider.waiting import notes as waiting_notes
from t9k_provider.waiting.notes import WaitingNotes, unschedulable_note

MESSAGE = "0/1 nodes are available: 1 Insufficient cpu."


def unscheduled(name: str, message: str = MESSAGE) -> dict[str, Any]:
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return {"metadata": {"name": name}, "status": {"phase": "Pending", "conditions": [condition]}}


def test_note_names_the_first_unscheduled_pod() -> None:
    scheduled = {
        "metadata": {"name": "a"},
        "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]},
    }
    assert unschedulable_note([scheduled]) is None
    assert unschedulable_note([unscheduled("j-worker-1"), scheduled, unscheduled("j-worker-0", "other")]) == (
        "pod j-worker-0 is not scheduled: other"
    )


def test_notes_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.notes")
    read = waiting_notes.READ_INTERVAL
    notes = WaitingNotes(-read)
    pods = [unscheduled("p")]
    assert not WaitingNotes(0.0).due(1.0)  # a job scheduled at once costs no pod list
    with caplog.at_level(logging.INFO, logger="test.notes"):
        assert notes.due(0.0)
        notes.say(pods, 0.0, log)
        assert not notes.due(1.0)  # pods are not read again before READ_INTERVAL
        assert notes.due(read)
        notes.say(pods, read, log)  # unchanged: not repeated yet
        notes.say(
            [unscheduled("p", "changed")], waiting_notes.READ_INTERVAL + 1, log
        )  # changed: said at once
        notes.say(
            [unscheduled("p", "changed")],
            waiting_notes.READ_INTERVAL + 1 + waiting_notes.REPEAT_INTERVAL,
            log,
        )
    said = [r.getMessage() for r in caplog.records if r.name == "test.notes"]
    assert said == [
        f"job waits: pod p is not scheduled: {MESSAGE}",
        "job waits: pod p is not scheduled: changed",
        "job waits: pod p is not scheduled: changed",
    ]
