"""Medians, spreads and percentiles: every figure is reported over repeated runs, never as one sample."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


def percentile(samples: list[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100) of a non-empty sample."""
    if not samples:
        raise ValueError("percentile of no samples")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


@dataclass
class Figure:
    """One measured quantity: a sample per run, how to print it, and the target it is judged against.

    ``target`` is ``("<", 1.0)`` or ``(">=", 10.0)``: the median must satisfy it. Unless ``zero_ok``, a
    sample that is not positive means the measurement is broken (a counter that reads zero).
    """

    section: str
    name: str
    unit: str
    samples: list[float]
    target: tuple[str, float] | None = None
    note: str = ""
    digits: int = 1
    zero_ok: bool = False

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        op, bound = self.target
        return {"<": self.median < bound, "<=": self.median <= bound, ">=": self.median >= bound}[op]

    def fmt(self, value: float) -> str:
        return f"{value:,.{self.digits}f}"


class MeasurementError(RuntimeError):
    """A benchmark produced a figure that cannot be right; the run fails instead of reporting it."""


def check(figures: list[Figure], runs: int) -> None:
    """Every figure has a sample per run, all finite, and positive unless zero is a legitimate result."""
    problems = []
    for f in figures:
        if len(f.samples) < runs:
            problems.append(f"{f.name}: {len(f.samples)} samples for {runs} runs")
        elif not all(math.isfinite(x) for x in f.samples):
            problems.append(f"{f.name}: non-finite sample in {f.samples}")
        elif not f.zero_ok and min(f.samples) <= 0:
            problems.append(f"{f.name}: sample <= 0 in {f.samples} (a broken counter or timer)")
    if problems:
        raise MeasurementError("implausible measurements:\n  " + "\n  ".join(problems))
