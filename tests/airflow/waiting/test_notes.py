"""Why a pending job waits, in the task log: the scheduler's message, rate-limited; the notes are values,
each answer returning them as they are after it."""

from __future__ import annotations

from typing import Any

from t9k_provider.waiting import notes as waiting_notes
from t9k_provider.waiting.notes import WaitingNotes, unschedulable_note
from tests.support.builders import replica_pod, unschedulable

MESSAGE = "0/1 nodes are available: 1 Insufficient cpu."


def unscheduled(name: str, message: str = MESSAGE) -> dict[str, Any]:
    return unschedulable(replica_pod(name, "worker", 0, "j"), message)


def test_note_names_the_first_unscheduled_pod() -> None:
    scheduled = {
        "metadata": {"name": "a"},
        "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]},
    }
    assert unschedulable_note([scheduled]) is None
    assert unschedulable_note([unscheduled("j-worker-1"), scheduled, unscheduled("j-worker-0", "other")]) == (
        "pod j-worker-0 is not scheduled: other"
    )


def test_notes_are_rate_limited() -> None:
    read = waiting_notes.READ_INTERVAL
    pods = [unscheduled("p")]
    changed = [unscheduled("p", "changed")]
    assert not WaitingNotes(0.0).due(1.0)  # a job scheduled at once costs no pod list
    notes = WaitingNotes(-read)
    assert notes.due(0.0) and notes.due(0.0)  # asking changes nothing
    notes = notes.read(0.0)
    said, notes = notes.say(pods, 0.0)
    assert said == f"job waits: pod p is not scheduled: {MESSAGE}"
    assert not notes.due(1.0)  # pods are not read again before READ_INTERVAL
    assert notes.due(read)
    said, notes = notes.say(pods, read)
    assert said is None  # unchanged: not repeated yet
    said, notes = notes.say(changed, read + 1)
    assert said == "job waits: pod p is not scheduled: changed"  # changed: at once
    said, notes = notes.say(changed, read + 2)
    assert said is None
    said, notes = notes.say(changed, read + 1 + waiting_notes.REPEAT_INTERVAL)
    assert said == "job waits: pod p is not scheduled: changed"  # unchanged for REPEAT_INTERVAL: said again
    said, notes = notes.say([], read + 2 + waiting_notes.REPEAT_INTERVAL)
    assert said is None  # scheduled: nothing to say
