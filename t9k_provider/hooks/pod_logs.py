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


def parse_lines(text: str) -> list[LogLine]:
    """Split a ``timestamps=true`` log body; a line without a timestamp inherits the previous one."""
    lines: list[LogLine] = []
    last = 0
    for raw in text.splitlines():
        stamp, _, rest = raw.partition(" ")
        parsed = parse_timestamp_ns(stamp)
        if parsed is None:
            lines.append(LogLine(last, raw))
            continue
        last = parsed
        lines.append(LogLine(parsed, rest))
    return lines


def advance(lines: Iterable[LogLine], cursor: Cursor | None) -> tuple[list[LogLine], Cursor | None]:
    """Drop lines already seen according to ``cursor``; return the new lines and the moved cursor."""
    seen_ts, seen_count = (cursor[0], cursor[1]) if cursor else (-1, 0)
    fresh: list[LogLine] = []
    skipped_at_seen_ts = 0
    for line in lines:
        if line.timestamp_ns < seen_ts:
            continue
        if line.timestamp_ns == seen_ts and skipped_at_seen_ts < seen_count:
            skipped_at_seen_ts += 1
            continue
        fresh.append(line)
    if not fresh:
        return fresh, cursor
    newest = fresh[-1].timestamp_ns
    at_newest = sum(1 for line in fresh if line.timestamp_ns == newest)
    if newest == seen_ts:
        at_newest += seen_count
    return fresh, [newest, at_newest]


def since_seconds(cursor: Cursor | None, now: float) -> int | None:
    """The API's ``sinceSeconds`` reaching back to the cursor's whole second (the clients have no
    ``sinceTime``); the lines re-read from that second are dropped by ``advance``."""
    if not cursor or cursor[0] < 0:
        return None
    return max(1, math.ceil(now - cursor[0] // 1_000_000_000) + SINCE_MARGIN_SECONDS)


def skip_to_recent(now: float) -> Cursor:
    """A cursor a margin before ``now``: the way out when even the largest read holds no new line."""
    return [int((now - SINCE_MARGIN_SECONDS) * 1_000_000_000), 0]
