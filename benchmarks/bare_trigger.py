"""``MomentTrigger``: a trigger that does nothing but fire at a given moment, the floor of Airflow's own
triggerer beside ``T9kJobTrigger`` in section 12 (docs/benchmarks.md#12-triggerer-capacity).

A thousand of them firing at the same moment cost the triggerer exactly what its own part of a burst costs:
each trigger's event handed from the runner to the supervisor, its ``Trigger fired event`` record, the task
instance written back to the DB, and no request to any cluster. The moment is written to a file once every
trigger has said it is armed, so a slow triggerer start cannot make some fire late; one reader per file
serves every trigger of the runner's event loop. Airflow's ``DateTimeTrigger`` would not do: it sleeps in
whole seconds (up to a second late) and logs every second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from benchmarks.triggerer_db import ARMED

#: How often the one reader of a moment file looks for it: well within the notice the moment is written with
#: (``triggerer_capacity.FLOOR_NOTICE``), and rarely enough to cost nothing in the idle window.
READ_EVERY_SECONDS = 0.1
_READERS: dict[str, asyncio.Future[float]] = {}


class MomentTrigger(BaseTrigger):
    """Fires once ``offset`` seconds after the moment (Unix time) ``moment_file`` holds, once it exists;
    ``carry`` (kept in its kwargs, unused) and ``echo`` (characters of padding in its event) give it a T9k
    trigger's sizes, to tell their cost from the rest of ours."""

    def __init__(self, moment_file: str, offset: float = 0.0, carry: Any = None, echo: int = 0) -> None:
        super().__init__()
        self.moment_file = moment_file
        self.offset = offset
        self.carry = carry
        self.echo = echo

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs = {"moment_file": self.moment_file, "offset": self.offset}
        return (f"{__name__}.MomentTrigger", {**kwargs, "carry": self.carry, "echo": self.echo})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self.log.info(ARMED)
        reader = _READERS.get(self.moment_file)
        if reader is None:
            reader = _READERS[self.moment_file] = asyncio.ensure_future(_read(Path(self.moment_file)))
        moment = await asyncio.shield(reader)
        await asyncio.sleep(max(0.0, moment + self.offset - time.time()))
        yield TriggerEvent({"status": "succeeded", **({"echo": "x" * self.echo} if self.echo else {})})


async def _read(path: Path) -> float:
    while not path.exists():
        await asyncio.sleep(READ_EVERY_SECONDS)
    return float(path.read_text())
