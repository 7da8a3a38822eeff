"""Where a job waits in its T9k Queue and when it is expected to start, in the task log's words (pure).

A job that names a Queue (``spec.scheduler.t9kScheduler.queue``) waits there, whole, until the Queue admits
its PodGroup (docs/local-cluster.md#queues). While it waits, the wait reads where it stands
(``jobclient.queues``: its PodGroup, the Queue, the Queue's other PodGroups and the progress of those that
run) into a ``QueueState``, and the task log says it in one line: the Queue, the job's place in line, the
quota used and free, the jobs ahead with their own ETAs, and when the job is expected to start; again only
when one of these changes. The start is what the Queue's rule gives (docs/airflow.md#waiting-in-a-queue):
admitted in order, each job once what it needs is free, the running ones freeing theirs at their ETAs.

The ``QueueRecord`` is what a task's waits saw of the Queue (when the job began to wait, each place it held,
when it was admitted, the last line said): plain JSON, it travels across deferrals as the disruptions'
cursor does, ends in XCom ``t9k_queue``, and tells the limits whether the job is in line (time in line is not
charged to ``startup_timeout``; ``queue_timeout`` bounds it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Literal, NamedTuple

from t9k_provider.kube.timestamps import rfc3339
from t9k_provider.waiting.reported import duration

#: While its job waits in a Queue, the wait reads the Queue once every this many poll intervals.
READ_EVERY_POLLS = 3
#: At most this many positions are kept in the record (the first and the latest stay).
HISTORY_LIMIT = 50
#: An expected start is said again when it moves by more than this share of the time left until it...
RESAY_SHARE = 0.2
#: ...and by at least this many seconds.
RESAY_SECONDS = 2.0
#: The jobs ahead named in a line; the rest are counted.
AHEAD_NAMED = 4

Standing = Literal["waiting", "closed", "deleted", "refused", "admitted", "unknown"]
#: The standings in which the job waits in line (not admitted, and not for want of its PodGroup).
IN_LINE = ("waiting", "closed", "deleted", "refused")


@dataclass(frozen=True)
class Other:
    """Another job of the Queue: one that holds part of the quota (admitted; ``ends_at`` from its leader's
    progress, None when unknown) or one ahead of this job in line."""

    name: str
    requests: Mapping[str, Decimal] = field(default_factory=dict)
    running: bool = False
    ends_at: float | None = None
    #: ``step 12/40, ETA 0:00:18`` (its leader's latest report), or None.
    progress: str | None = None


@dataclass(frozen=True)
class QueueState:
    """One read of the job's place in its Queue, at ``read_at``."""

    queue: str
    read_at: float
    standing: Standing
    #: When the Queue admitted the job (its PodGroup's admission), if it did.
    admitted_at: float | None = None
    #: 1: next; None when the scheduler says none (a Queue that refuses the job's namespace).
    position: int | None = None
    #: The scheduler's reason (``QuotaExceeded``, ``WaitingInQueue``...) and message, as its PodGroup says.
    reason: str = ""
    message: str = ""
    #: The Queue's quota per resource; None: it has none (or it could not be read).
    quota: Mapping[str, Decimal] | None = None
    used: Mapping[str, Decimal] = field(default_factory=dict)
    #: What this job needs of the quota (its pods' requests, summed).
    needs: Mapping[str, Decimal] = field(default_factory=dict)
    #: The admitted jobs of the Queue (they hold what is used), and those ahead of this one in line.
    holders: tuple[Other, ...] = ()
    ahead: tuple[Other, ...] = ()


class Estimate(NamedTuple):
    """When the job is expected to be admitted (None: unknown), and whether that is the time itself or only
    the earliest it could be (a job it waits for has not said when it ends)."""

    at: float | None
    exact: bool


def expected_start(state: QueueState) -> Estimate:
    """When the Queue is expected to admit the job: each job ahead, in order, is admitted once what it needs
    is free, and the admitted ones free theirs at their ETAs (one without an ETA holds its share until it
    says); None when the Queue admits nothing now (closed, deleted, refusing), or has no quota to wait for."""
    if state.standing != "waiting" or state.quota is None:
        return Estimate(None, False)
    quota = state.quota
    held: list[tuple[Mapping[str, Decimal], float | None]] = [
        (h.requests, None if h.ends_at is None else max(h.ends_at, state.read_at)) for h in state.holders
    ]
    at = state.read_at
    for needs in [*(a.requests for a in state.ahead), state.needs]:
        moments = sorted({at, *(end for _, end in held if end is not None and end > at)})
        admitted = next((m for m in moments if _fits(needs, quota, held, m)), None)
        if admitted is None:  # what it needs is held by a job that has not said when it ends
            return Estimate(moments[-1], False)
        at = admitted
        held.append((needs, None))  # admitted: it holds its share for a run of unknown length
    return Estimate(at, True)


def _fits(
    needs: Mapping[str, Decimal],
    quota: Mapping[str, Decimal],
    held: list[tuple[Mapping[str, Decimal], float | None]],
    moment: float,
) -> bool:
    for name, limit in quota.items():
        holding = sum((r.get(name, Decimal(0)) for r, end in held if end is None or end > moment), Decimal(0))
        if holding + needs.get(name, Decimal(0)) > limit:
            return False
    return True


@dataclass(frozen=True)
class QueueRecord:
    """What a task's waits saw of the job's Queue (plain JSON: ``to_json``/``from_json``)."""

    queue: str
    #: When the job was first seen in line (epoch seconds); None: never.
    since: float | None = None
    admitted_at: float | None = None
    #: ``{"time", "position", "standing"}`` each time the job's place or standing changed, oldest first.
    positions: tuple[Mapping[str, Any], ...] = ()
    #: The last line's standing, position, quota and jobs ahead (what decides whether a line is new), and
    #: the start it said.
    said: str | None = None
    said_start: float | None = None
    said_exact: bool = False
    #: The latest state read, in words (for the message of a ``queue_timeout``).
    last: str = ""
    standing: Standing = "unknown"

    @property
    def in_line(self) -> bool:
        """Whether the job waits in line as last read (not admitted)."""
        return self.standing in IN_LINE

    def observe(
        self, state: QueueState, now: float, created: float | None = None
    ) -> tuple[QueueRecord, str | None]:
        """The record after ``state`` was read, and the line to log (None: nothing new to say); ``created``:
        when the job was created (its time in line counts from then)."""
        record = replace(self, standing=state.standing, last=_words(state))
        if state.standing in IN_LINE and record.since is None:
            record = replace(record, since=state.read_at)
        latest = record.positions[-1] if record.positions else None
        if state.standing != "unknown" and (
            latest is None or (latest["position"], latest["standing"]) != (state.position, state.standing)
        ):
            entry = {"time": state.read_at, "position": state.position, "standing": state.standing}
            kept = [*record.positions, entry]
            if len(kept) > HISTORY_LIMIT:
                kept = [kept[0], *kept[-(HISTORY_LIMIT - 1) :]]
            record = replace(record, positions=tuple(kept))
        if state.standing == "admitted":
            if record.admitted_at is not None:
                return record, None
            record = replace(record, admitted_at=state.admitted_at or state.read_at)
            if self.since is None:
                return record, None  # never seen in line: nothing to tell
            waited = record.waited(created, record.admitted_at) or 0.0
            return record, f"queue {state.queue} admitted the job after {duration(waited)} in line"
        if state.standing == "unknown":
            return record, None
        estimate = expected_start(state) if state.standing == "waiting" else Estimate(None, False)
        key = _key(state)
        moved = _moved(self.said_start, self.said_exact, estimate, now)
        if key == self.said and not moved:
            return record, None
        record = replace(record, said=key, said_start=estimate.at, said_exact=estimate.exact)
        return record, line(state, estimate, now)

    def waited(self, created: float | None, now: float) -> float | None:
        """Seconds the job waited to be admitted (so far, when it was not): from its creation, else from when
        the task first saw it in line."""
        start = created if created is not None else self.since
        if start is None:
            return None
        return max(0.0, (self.admitted_at if self.admitted_at is not None else now) - start)

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.queue, "since": self.since, "admitted_at": self.admitted_at,
            "positions": [dict(p) for p in self.positions], "said": self.said, "said_start": self.said_start,
            "said_exact": self.said_exact, "last": self.last, "standing": self.standing,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueueRecord:
        return cls(
            str(data["queue"]), data.get("since"), data.get("admitted_at"),
            tuple(dict(p) for p in data.get("positions") or ()), data.get("said"), data.get("said_start"),
            bool(data.get("said_exact")), str(data.get("last") or ""), data.get("standing") or "unknown",
        )  # fmt: skip

    def xcom(self, created: float | None, now: float) -> dict[str, Any]:
        """XCom ``t9k_queue``: the Queue, the seconds waited, when the job was admitted, and each place it
        held in line (times in RFC 3339)."""
        return {
            "queue": self.queue,
            "waited_seconds": None if (w := self.waited(created, now)) is None else round(w, 3),
            "admitted_at": None if self.admitted_at is None else rfc3339(self.admitted_at),
            "positions": [{**p, "time": rfc3339(p["time"])} for p in self.positions],
        }


def _moved(said: float | None, exact: bool, estimate: Estimate, now: float) -> bool:
    if (said is None) != (estimate.at is None) or exact != estimate.exact:
        return True
    if said is None or estimate.at is None:
        return False
    return abs(estimate.at - said) > max(RESAY_SECONDS, RESAY_SHARE * (said - now))


def _key(state: QueueState) -> str:
    """What makes a line new besides the start: the standing, the place, the quota, who is ahead."""
    others = ",".join(f"{o.name}:{o.running}" for o in (*state.holders, *state.ahead))
    return f"{state.standing}|{state.position}|{_quota(state)}|{others}"


def line(state: QueueState, estimate: Estimate, now: float) -> str:
    """The task log's line for a job in line: ``queue gpu: 2nd in line; quota nvidia.com/gpu 2 of 2 used, 0
    free; ahead: train-a (running, step 12/40, ETA 0:00:18), train-b (waiting); this job needs
    nvidia.com/gpu 2: expected to start at 10:42:31 UTC (in 0:00:19)``."""
    if state.standing != "waiting":
        return _words(state)
    parts = [f"queue {state.queue}: {_place(state)}", f"quota {_quota(state)}"]
    if state.holders or state.ahead:
        parts.append(f"ahead: {_others(state)}")
    needs = _amounts(state.needs, state.quota)
    start = _start(estimate, now)
    parts.append(f"this job needs {needs}: {start}" if needs else start)
    return "; ".join(parts)


def _words(state: QueueState) -> str:
    """The state in a few words (a queue_timeout's message says the last of them)."""
    q = state.queue
    if state.standing == "closed":
        return f"queue {q} is closed: it admits no new job, and this one waits until it opens"
    if state.standing == "deleted":
        return f"queue {q} does not exist any more: nothing admits this job unless it is created again"
    if state.standing == "refused":
        return f"queue {q} does not admit this job: {state.message or 'its namespace may not use it'}"
    if state.standing == "waiting":
        return f"queue {q}: {_place(state)}; quota {_quota(state)}"
    if state.standing == "admitted":
        return f"queue {q} admitted the job"
    return f"queue {q}: the job's PodGroup is not there yet"


def _place(state: QueueState) -> str:
    position = state.position if state.position is not None else len(state.ahead) + 1
    return f"{_ordinal(position)} in line"


def _quota(state: QueueState) -> str:
    if state.quota is None:
        return "unlimited"
    names = [n for n in sorted(state.quota) if n in state.needs or state.used.get(n)] or sorted(state.quota)
    shown = []
    for name in names:
        limit, used = state.quota[name], state.used.get(name, Decimal(0))
        free = max(limit - used, Decimal(0))
        shown.append(f"{name} {_number(used)} of {_number(limit)} used, {_number(free)} free")
    return "; ".join(shown)


def _others(state: QueueState) -> str:
    said = []
    for other in (*state.holders, *state.ahead):
        if other in state.holders:
            what = "running" if other.running else "admitted"
            if other.progress:
                what += f", {other.progress}"
        else:
            what = "waiting"
        said.append(f"{other.name} ({what})")
    more = len(said) - AHEAD_NAMED
    return ", ".join(said[:AHEAD_NAMED]) + (f" and {more} more" if more > 0 else "")


def _start(estimate: Estimate, now: float) -> str:
    if estimate.at is None:
        return "expected start unknown"
    when = f"{_clock(estimate.at)} (in {duration(max(0.0, estimate.at - now))})"
    if estimate.exact:
        return f"expected to start at {when}"
    unknown = "a job it waits for has not reported its progress yet"
    if estimate.at - now < 1.0:  # nothing known beyond now
        return f"expected start unknown ({unknown})"
    return f"expected to start after {when} ({unknown})"


def _amounts(amounts: Mapping[str, Decimal], quota: Mapping[str, Decimal] | None) -> str:
    names = [n for n in sorted(amounts) if quota is None or n in quota]
    return ", ".join(f"{n} {_number(amounts[n])}" for n in names if amounts[n])


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _number(amount: Decimal) -> str:
    if amount == amount.to_integral_value():
        return str(int(amount))
    return f"{amount.normalize():f}"


def _clock(epoch: float) -> str:
    return f"{datetime.fromtimestamp(epoch, timezone.utc):%H:%M:%S} UTC"
