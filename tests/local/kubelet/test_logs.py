"""CRI log writer and reader: the format on disk and the `pods/log` parameters."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.kubelet import crilog, logs
from t9k_provider.local.kubelet.poddir import AttemptFiles


def _clock(values: list[int]):
    it = iter(values)
    return lambda: next(it)


SEC = 1_000_000_000
T0 = 1_700_000_000 * SEC


async def _never() -> bool:
    return False


async def _collect(path: Path, **kwargs) -> bytes:
    params = dict(follow=False, timestamps=False, tail_lines=None, since_time=None, limit_bytes=None)
    params.update(kwargs)
    params.setdefault("finished", _never)
    return b"".join([c async for c in logs.read_log(path, **params)])


async def _follow_into(
    chunks: list[bytes], path: Path, finished: Callable[[], Awaitable[bool]], pause: float = 0.0
) -> None:
    """Follow ``path`` as ``pods/log?follow=true`` does, appending each chunk; ``pause`` after each one."""
    params = dict(timestamps=False, tail_lines=None, since_time=None, limit_bytes=None)
    async for chunk in logs.read_log(path, follow=True, finished=finished, **params):
        chunks.append(chunk)
        await asyncio.sleep(pause)


def test_writer_records_lines_with_stream_tag_and_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    w = crilog.CriLogWriter(path, clock=_clock([T0 + 5, T0 + 6, T0 + 7]))
    w.write("stdout", b"hello\nwor")
    w.write("stderr", b"oops\n")
    w.write("stdout", b"ld\n")
    w.close()
    assert path.read_bytes().splitlines() == [
        b"2023-11-14T22:13:20.000000005Z stdout F hello",
        b"2023-11-14T22:13:20.000000006Z stderr F oops",
        b"2023-11-14T22:13:20.000000007Z stdout F world",
    ]


def test_writer_splits_long_lines_and_flushes_unterminated_text(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    w = crilog.CriLogWriter(path)
    w.write("stdout", b"x" * (crilog.MAX_LINE_BYTES + 10) + b"\ntail")
    w.close()
    tags = [line.split(b" ", 3)[2] for line in path.read_bytes().splitlines()]
    assert tags == [b"P", b"F", b"F"]


async def test_reader_reassembles_partial_lines_and_adds_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    w = crilog.CriLogWriter(path)
    long = b"y" * (crilog.MAX_LINE_BYTES + 3)
    w.write("stdout", long + b"\nshort\n")
    w.close()
    assert await _collect(path) == long + b"\nshort\n"
    stamped = (await _collect(path, timestamps=True)).splitlines()
    assert len(stamped) == 2
    stamp, text = stamped[0].split(b" ", 1)
    assert text == long
    assert parse_timestamp(stamp.decode()).tzinfo is not None


async def test_tail_lines_since_time_and_limit_bytes(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    w = crilog.CriLogWriter(path, clock=_clock([T0 + i * SEC for i in range(5)]))
    for i in range(5):
        w.write("stdout", b"line%d\n" % i)
    w.close()
    assert await _collect(path, tail_lines=2) == b"line3\nline4\n"
    assert await _collect(path, tail_lines=0) == b""
    since = datetime.fromtimestamp((T0 + 3 * SEC) / SEC, tz=timezone.utc)
    assert await _collect(path, since_time=since) == b"line3\nline4\n"
    assert await _collect(path, limit_bytes=8) == b"line0\nli"


async def test_follow_streams_new_output_and_ends_once_finished(tmp_path: Path) -> None:
    files = AttemptFiles(tmp_path, 0)
    path = files.log
    w = crilog.CriLogWriter(path)
    w.write("stdout", b"first\n")

    async def finished() -> bool:
        return files.finished

    chunks: list[bytes] = []
    task = asyncio.create_task(_follow_into(chunks, path, finished))
    await asyncio.sleep(0.3)
    assert b"".join(chunks) == b"first\n"
    assert not task.done()
    w.write("stderr", b"second\n")
    w.write("stdout", b"last words\n")
    w.close()
    files.write_exit_code(3)
    await asyncio.wait_for(task, timeout=5)
    assert b"".join(chunks) == b"first\nsecond\nlast words\n"
    assert files.exit_code() == 3


async def test_follow_reads_the_last_lines_after_the_pod_directory_is_removed(tmp_path: Path) -> None:
    """A job that succeeds with cleanUpPolicy All has its pods deleted at once, and the kubelet removes their
    directories: a follower that has not yet read the container's last lines still delivers them."""
    (tmp_path / "pod").mkdir()
    files = AttemptFiles(tmp_path / "pod", 0)
    w = crilog.CriLogWriter(files.log)
    w.write("stdout", b"first\n")
    pod_gone = asyncio.Event()

    async def finished() -> bool:
        return pod_gone.is_set()

    chunks: list[bytes] = []
    # a slow reader: the pod is deleted while it is still behind
    task = asyncio.create_task(_follow_into(chunks, files.log, finished, pause=0.5))
    await asyncio.sleep(0.2)
    w.write("stdout", b"last words\n")
    w.close()
    shutil.rmtree(tmp_path / "pod")
    pod_gone.set()
    await asyncio.wait_for(task, timeout=5)
    assert b"".join(chunks) == b"first\nlast words\n"


async def test_follow_without_file_yet_waits_then_ends(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    calls = 0

    async def finished() -> bool:
        nonlocal calls
        calls += 1
        return calls > 2

    assert await asyncio.wait_for(_collect(path, follow=True, finished=finished), timeout=5) == b""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02T03:04:05.123456789Z", datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)),
        ("2024-01-02T03:04:05Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
    ],
)
def test_parse_timestamp(text: str, expected: datetime) -> None:
    assert parse_timestamp(text) == expected


async def test_follow_new_records_skips_what_was_written_before(tmp_path: Path) -> None:
    """Attach: only records written after it starts, with their stream, until the container finishes."""
    path = tmp_path / "0.log"
    path.write_bytes(
        f"{crilog.format_timestamp(T0)} stdout F old line\n".encode() + b"2023-11-14T22:13:20.0Z std"
    )
    done = asyncio.Event()

    async def finished() -> bool:
        return done.is_set()

    async def collect() -> list[tuple[bytes, bytes]]:
        return [(r.stream, r.text) async for r in logs.follow_new_records(path, finished)]

    task = asyncio.create_task(collect())
    await asyncio.sleep(0.2)
    with open(path, "ab") as f:  # completes the record being written when following began
        f.write(b"err F half\n")
    w = crilog.CriLogWriter(path, clock=_clock([T0 + 1, T0 + 2]))
    w.write("stderr", b"new err\n")
    w.write("stdout", b"new out\n")
    w.close()
    await asyncio.sleep(0.3)
    done.set()
    assert await asyncio.wait_for(task, 5) == [
        (b"stderr", b"half"),
        (b"stderr", b"new err"),
        (b"stdout", b"new out"),
    ]


async def test_follow_new_records_says_when_it_started_and_keeps_all_written_after(tmp_path: Path) -> None:
    """An attach tells its client it is set up (``started``) only where its output starts: a line the
    container writes the moment the client knows is never skipped as one written before."""
    path = tmp_path / "0.log"
    path.write_bytes(f"{crilog.format_timestamp(T0)} stdout F before\n".encode())

    async def started() -> None:  # the client, told, makes the container write at once
        with open(path, "ab") as f:
            f.write(f"{crilog.format_timestamp(T0 + 1)} stdout F out\n".encode())

    async def finished() -> bool:
        return True

    records = [r.text async for r in logs.follow_new_records(path, finished, started=started)]
    assert records == [b"out"]
