"""Report a training run's progress to the Airflow task that waits for it: ``report(step, total, **metrics)``.

Each call writes one line to standard output, which the replica's log keeps; the operators and the trigger
read the leader replica's log anyway (for the task log) and turn these lines into progress lines with a rate
and an ETA, XCom ``t9k_progress``, the metrics of an asset event, and the clock of ``progress_timeout``.

The line is the whole protocol, so a program in any language can report too (docs/airflow.md#progress-lines)::

    T9K_PROGRESS {"step": 120, "total": 1000, "metrics": {"loss": 0.31}}

the marker, one space, and a JSON object on one line: ``step`` a number >= 0 (required), ``total`` a number
> 0 or null, ``metrics`` an object of numbers, strings or booleans. When it was written is the log's own
timestamp. The standard library only: the TaskFlow runner ships this file to images without the package.

Where ``T9K_TENSORBOARD_DIR`` is set (a decorated task's ``tensorboard=True``; the job's TensorBoard reads
that directory), ``report`` also writes its numeric metrics there as TensorBoard scalars at step
``int(step)``, with the first writer the image can import (``WRITERS``), opened on the first report. Without
one, or when writing fails, it says so once on standard error and the training goes on without scalars.
"""

from __future__ import annotations

import importlib
import json
import math
import numbers
import os
import sys
from typing import Any, NamedTuple

__all__ = ["MARKER", "TENSORBOARD_DIR_ENV", "Report", "parse", "report"]

MARKER = "T9K_PROGRESS"
TENSORBOARD_DIR_ENV = "T9K_TENSORBOARD_DIR"
#: TensorBoard writers (module, class), tried in this order; torch's only where the training imported torch
#: already (importing it for the writer alone costs seconds). Each takes the directory and has
#: ``add_scalar(tag, value, step)`` and ``flush()``.
WRITERS = (
    ("torch.utils.tensorboard", "SummaryWriter"),
    ("tensorboard.summary", "Writer"),
    ("tensorboardX", "SummaryWriter"),
)
#: Metrics one line may carry, and the longest metric name: a report is a status line, not a dump.
MAX_METRICS = 32
MAX_NAME_CHARS = 64


class Report(NamedTuple):
    step: float
    total: float | None
    metrics: dict[str, float | str | bool]


def report(step: float, total: float | None = None, **metrics: float | str | bool) -> None:
    """Write a progress line for ``step`` (of ``total``) with the latest ``metrics``.

    Only the process of global rank 0 writes (``RANK`` unset or 0), so every rank may call it; the others
    return at once. Bad arguments raise ``ValueError`` or ``TypeError`` naming the argument.
    """
    if os.environ.get("RANK", "0").strip() not in ("", "0"):
        return
    checked = _checked(step, total, metrics)
    line = {"step": checked.step, "total": checked.total, "metrics": checked.metrics}
    sys.stdout.write(f"{MARKER} {json.dumps(line, separators=(',', ':'), allow_nan=False)}\n")
    sys.stdout.flush()
    directory = os.environ.get(TENSORBOARD_DIR_ENV)
    if directory:
        _scalars.write(directory, checked)


class _Scalars:
    """This process's TensorBoard writer: opened on the first report, off for good after a failure."""

    def __init__(self) -> None:
        self.writer: Any = None
        self.off = False

    def write(self, directory: str, checked: Report) -> None:
        if self.off:
            return
        try:
            if self.writer is None:
                self.writer = _open_writer(directory)
            step = int(checked.step)
            for name, value in checked.metrics.items():
                if not isinstance(value, (str, bool)):
                    self.writer.add_scalar(name, value, step)
            self.writer.flush()  # TensorBoard shows each report as it comes, and a crash loses none
        except Exception as exc:
            self.off = True
            sys.stderr.write(
                f"t9k_provider.progress: metrics are not written as TensorBoard scalars to {directory} "
                f"({exc}); the training goes on without them\n"
            )
            sys.stderr.flush()


def _open_writer(directory: str) -> Any:
    for module_name, class_name in WRITERS:
        if module_name.startswith("torch.") and "torch" not in sys.modules:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        return getattr(module, class_name)(directory)
    names = ", ".join(module_name for module_name, _ in WRITERS)
    raise ImportError(f"no TensorBoard writer can be imported here: none of {names}")


_scalars = _Scalars()


def parse(text: str) -> Report | None:
    """The report a log line carries, or None (not a progress line, or a malformed one: never an error)."""
    head, marked, body = text.partition(MARKER + " ")
    head = head.strip()
    if not marked or (head and not head.endswith(":")):  # DeepSpeed's pdsh writes "<host>: " first
        return None
    try:
        data = json.loads(body)
        metrics = data.get("metrics")
        return _checked(data["step"], data.get("total"), {} if metrics is None else metrics)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _checked(step: Any, total: Any, metrics: Any) -> Report:
    """The report, its numbers as plain ``int``/``float`` (numpy's scalars, say, are numbers too)."""
    if not _number(step) or step < 0:
        raise ValueError(f"step: must be a number >= 0, got {step!r}")
    if total is not None and (not _number(total) or total <= 0):
        raise ValueError(f"total: must be a number > 0 or None, got {total!r}")
    if not isinstance(metrics, dict):
        raise TypeError(f"metrics: must be an object of name=value pairs, got {type(metrics).__name__}")
    if len(metrics) > MAX_METRICS:
        raise ValueError(f"metrics: at most {MAX_METRICS} per report, got {len(metrics)}")
    for name, value in metrics.items():
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            raise ValueError(f"metric {name!r}: a name of 1 to {MAX_NAME_CHARS} characters")
        if not (isinstance(value, (str, bool)) or _number(value)):
            raise TypeError(f"metric {name!r}: a finite number, string or bool, got {value!r}")
    plain = {name: v if isinstance(v, (str, bool)) else _plain(v) for name, v in metrics.items()}
    return Report(_plain(step), None if total is None else _plain(total), plain)


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _plain(value: Any) -> float:
    return int(value) if isinstance(value, numbers.Integral) else float(value)
