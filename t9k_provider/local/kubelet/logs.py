"""Container logs in the CRI file format: the `pods/log` reader of what the shim writes (`crilog`).

Each line on disk is `<RFC3339Nano UTC> <stdout|stderr> <F|P> <text>\\n`; `P` marks a partial line (a
chunk of a longer line). The timestamp is taken when the shim reads the bytes, so `sinceTime`/`timestamps`
work after the fact and logs survive a server restart.
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.kubelet.crilog import MAX_LINE_BYTES

FOLLOW_POLL_SECONDS = 0.1
READ_BYTES = 1 << 20


@dataclass(frozen=True)
class LogRecord:
    timestamp: bytes
    stream: bytes
    partial: bool
    text: bytes

    @classmethod
    def parse(cls, line: bytes) -> LogRecord | None:
        parts = line.rstrip(b"\n").split(b" ", 3)
        if len(parts) < 3:
            return None
        text = parts[3] if len(parts) == 4 else b""
        return cls(parts[0], parts[1], parts[2] == b"P", text)

    def when(self) -> datetime:
        return parse_timestamp(self.timestamp.decode())


def _render(records: Iterable[LogRecord], timestamps: bool, at_line_start: list[bool]) -> bytes:
    """Reassemble records into the user's text; `at_line_start` carries state across calls."""
    out = bytearray()
    for rec in records:
        if timestamps and at_line_start[0]:
            out += rec.timestamp + b" "
        out += rec.text
        if rec.partial:
            at_line_start[0] = False
        else:
            out += b"\n"
            at_line_start[0] = True
    return bytes(out)


class _RecordFile:
    """Reads complete records from a file that may still be growing.

    The file stays open once found: when its pod is deleted the kubelet removes the pod's directory, and a
    follower that has not read the container's last lines yet still reads them through the open file.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None
        self._offset = 0
        self._rest = b""

    def _open(self) -> int | None:
        if self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def skip_existing(self) -> None:
        """Start after the last complete record so far (attach shows new output; one in flight is kept)."""
        fd = self._open()
        if fd is None:
            return
        size = os.fstat(fd).st_size
        start = max(0, size - MAX_LINE_BYTES - 1024)  # one record at most is incomplete
        self._offset = start + os.pread(fd, size - start, start).rfind(b"\n") + 1

    def read_new(self) -> list[LogRecord]:
        fd = self._open()
        if fd is None:
            return []
        chunks = []
        while chunk := os.pread(fd, READ_BYTES, self._offset):
            chunks.append(chunk)
            self._offset += len(chunk)
        data = self._rest + b"".join(chunks)
        cut = data.rfind(b"\n") + 1
        self._rest = data[cut:]
        records = (LogRecord.parse(line) for line in data[:cut].splitlines())
        return [r for r in records if r is not None]


async def read_log(
    path: Path,
    *,
    follow: bool,
    timestamps: bool,
    tail_lines: int | None,
    since_time: datetime | None,
    limit_bytes: int | None,
    finished: Callable[[], Awaitable[bool]],
) -> AsyncIterator[bytes]:
    """Yield the container's output as the kubelet serves it.

    With `follow`, new output is streamed until `finished()` is true and the file is drained; the caller
    decides what "finished" means (usually: the container terminated, i.e. its attempt's exit file exists).
    """
    source = _RecordFile(Path(path))
    at_line_start = [True]
    remaining = limit_bytes

    def select(records: list[LogRecord]) -> list[LogRecord]:
        if since_time is None:
            return records
        bound = since_time if since_time.tzinfo else since_time.replace(tzinfo=timezone.utc)
        return [r for r in records if r.when() >= bound]

    def clip(chunk: bytes) -> bytes:
        nonlocal remaining
        if remaining is None:
            return chunk
        chunk = chunk[:remaining]
        remaining -= len(chunk)
        return chunk

    try:
        first = select(source.read_new())
        if tail_lines is not None:
            first = _tail(first, tail_lines)
        chunk = clip(_render(first, timestamps, at_line_start))
        if chunk:
            yield chunk
        if not follow:
            return
        done = False
        while remaining is None or remaining > 0:
            chunk = clip(_render(select(source.read_new()), timestamps, at_line_start))
            if chunk:
                yield chunk
                continue
            if done:
                return
            # Check "finished" before the next read so output written just before the exit is never lost.
            done = await finished()
            if not done:
                await asyncio.sleep(FOLLOW_POLL_SECONDS)
    finally:
        source.close()


async def follow_new_records(
    path: Path, finished: Callable[[], Awaitable[bool]], started: Callable[[], Awaitable[None]] | None = None
) -> AsyncIterator[LogRecord]:
    """Records the container writes from now on, until `finished()` is true and the file is drained;
    `started()` is awaited once where "now" is fixed (an attach tells its client then, not before: what the
    container writes once the client knows is never skipped)."""
    source = _RecordFile(Path(path))
    try:
        source.skip_existing()
        if started is not None:
            await started()
        done = False
        while True:
            records = source.read_new()
            for record in records:
                yield record
            if records:
                continue
            if done:
                return
            done = await finished()  # checked before the last read: no output written before the end is lost
            if not done:
                await asyncio.sleep(FOLLOW_POLL_SECONDS)
    finally:
        source.close()


def _tail(records: list[LogRecord], lines: int) -> list[LogRecord]:
    """Keep the records making up the last `lines` full lines (a line may span several `P` records)."""
    if lines <= 0:
        return []
    groups: collections.deque[list[LogRecord]] = collections.deque(maxlen=lines)
    current: list[LogRecord] = []
    for rec in records:
        current.append(rec)
        if not rec.partial:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return [rec for group in groups for rec in group]
