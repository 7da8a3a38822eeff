"""Resumable reads of container logs: parse ``timestamps=true`` lines and remember where each stream stopped.

A cursor is ``[timestamp_ns, lines_seen_at_that_timestamp]`` per ``<pod uid>/<container>``. It is plain JSON,
so a deferred operator carries it across trigger round trips and a reconnect never repeats or skips a line.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Iterable
from typing import NamedTuple

from t9k_provider.kube.timestamps import rfc3339

Cursor = list[int]

#: Size of one log read, so a chatty replica can never exhaust the worker's memory.
READ_LIMIT_BYTES = 1 << 20
#: A read that returned only already-seen lines grows (x4) up to this, to get past a burst of output.
MAX_READ_LIMIT_BYTES = 16 << 20
#: Extra seconds re-read before the cursor, absorbing clock skew between worker and cluster.
SINCE_MARGIN_SECONDS = 2


class LogLine(NamedTuple):
    timestamp_ns: int
    text: str


def parse_timestamp_ns(stamp: str) -> int | None:
    """RFC 3339 with up to nanosecond precision (Go trims trailing zeros) to integer nanoseconds."""
    stamp = stamp.strip()
    if stamp.endswith("Z"):
        stamp = stamp[:-1]
    elif stamp.endswith("+00:00"):
        stamp = stamp[:-6]
    else:
        return None
    whole, _, fraction = stamp.partition(".")
    try:
        seconds = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
        nanos = int((fraction + "000000000")[:9]) if fraction else 0
    except ValueError:
        return None
    return seconds * 1_000_000_000 + nanos


def parse_line(raw: str, previous_ns: int) -> LogLine:
    """One ``timestamps=true`` line; a line without a timestamp inherits ``previous_ns``."""
    stamp, _, rest = raw.partition(" ")
    parsed = parse_timestamp_ns(stamp)
    return LogLine(previous_ns, raw) if parsed is None else LogLine(parsed, rest)


def parse_lines(text: str) -> list[LogLine]:
    """Split a ``timestamps=true`` log body."""
    lines: list[LogLine] = []
    for raw in text.splitlines():
        lines.append(parse_line(raw, lines[-1].timestamp_ns if lines else 0))
    return lines


class Resume:
    """Drops the lines a stream repeats from before ``cursor`` and moves the cursor over the others, one line
    at a time, so a followed stream and a batch read (``advance``) resume the same way."""

    def __init__(self, cursor: Cursor | None) -> None:
        self.cursor = list(cursor) if cursor else None
        self._seen_ts, self._repeats_left = (cursor[0], cursor[1]) if cursor else (-1, 0)

    def fresh(self, line: LogLine) -> bool:
        """Whether ``line`` is new (then the cursor moves past it)."""
        if line.timestamp_ns < self._seen_ts:
            return False
        if line.timestamp_ns == self._seen_ts and self._repeats_left > 0:
            self._repeats_left -= 1
            return False
        if self.cursor is not None and self.cursor[0] == line.timestamp_ns:
            self.cursor = [line.timestamp_ns, self.cursor[1] + 1]
        else:
            self.cursor = [line.timestamp_ns, 1]
        return True


def advance(lines: Iterable[LogLine], cursor: Cursor | None) -> tuple[list[LogLine], Cursor | None]:
    """Drop lines already seen according to ``cursor``; return the new lines and the moved cursor."""
    resume = Resume(cursor)
    return [line for line in lines if resume.fresh(line)], resume.cursor


def since_seconds(cursor: Cursor | None, now: float) -> int | None:
    """The API's ``sinceSeconds`` reaching back to the cursor's whole second (the clients have no
    ``sinceTime``); the lines re-read from that second are dropped by ``advance``."""
    if not cursor or cursor[0] < 0:
        return None
    return max(1, math.ceil(now - cursor[0] // 1_000_000_000) + SINCE_MARGIN_SECONDS)


def since_time(cursor: Cursor | None) -> str | None:
    """The API's ``sinceTime`` (whole seconds, RFC 3339) of the cursor; ``Resume`` drops what it repeats."""
    if not cursor or cursor[0] < 0:
        return None
    return rfc3339(cursor[0] // 1_000_000_000)


def skip_to_recent(now: float) -> Cursor:
    """A cursor a margin before ``now``: the way out when even the largest read holds no new line."""
    return [int((now - SINCE_MARGIN_SECONDS) * 1_000_000_000), 0]
