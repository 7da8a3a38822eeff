"""The CRI log file format's writing side: what the shim appends for each container (`logs` reads it back
for `pods/log`). Each line on disk is `<RFC3339Nano UTC> <stdout|stderr> <F|P> <text>\\n`; `P` marks a
partial line (a chunk of a longer line). Apart from `logs` so that the shim, which starts for every container,
imports only this (docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

# A line longer than this is split into `P` chunks, as containerd does (16 KiB).
MAX_LINE_BYTES = 16 * 1024


def format_timestamp(ns: int) -> str:
    """RFC 3339 with exactly nine fractional digits, as the kubelet prints it."""
    seconds, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{frac:09d}Z"


class CriLogWriter:
    """Appends stdout/stderr chunks to a CRI log file, one record per line (used by the shim)."""

    def __init__(self, path: Path, clock: Callable[[], int] = time.time_ns) -> None:
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._clock = clock
        self._pending: dict[str, bytes] = {"stdout": b"", "stderr": b""}

    def write(self, stream: str, data: bytes) -> None:
        buf = self._pending[stream] + data
        records: list[bytes] = []
        stamp = format_timestamp(self._clock()).encode()
        while True:
            nl = buf.find(b"\n")
            if nl < 0 or nl > MAX_LINE_BYTES:
                if len(buf) < MAX_LINE_BYTES:
                    break
                records.append(self._record(stamp, stream, b"P", buf[:MAX_LINE_BYTES]))
                buf = buf[MAX_LINE_BYTES:]
                continue
            records.append(self._record(stamp, stream, b"F", buf[:nl]))
            buf = buf[nl + 1 :]
        self._pending[stream] = buf
        if records:
            self._file.write(b"".join(records))

    def flush_partial(self, stream: str) -> None:
        """Write out text not ended by a newline (at EOF it counts as a full line, as in containerd)."""
        if self._pending[stream]:
            stamp = format_timestamp(self._clock()).encode()
            self._file.write(self._record(stamp, stream, b"F", self._pending[stream]))
            self._pending[stream] = b""

    def close(self) -> None:
        for stream in self._pending:
            self.flush_partial(stream)
        self._file.close()

    @staticmethod
    def _record(stamp: bytes, stream: str, tag: bytes, text: bytes) -> bytes:
        return b"%s %s %s %s\n" % (stamp, stream.encode(), tag, text)
