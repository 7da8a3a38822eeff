"""What a wait knows of a training run's progress (``t9k_provider.progress`` reports from the leader's log):
the latest report and when it came, a bounded history, the rate and ETA, and the line the task log shows.
A report whose step is below the latest one is the training resumed from a checkpoint (its job restarted
after a disruption, say): it is kept as a resumption (the step reached, the step resumed at), and the rate
counts from there.

Plain JSON (``to_json``/``from_json``), so it travels in the trigger's arguments and events as the log
cursors do: the task keeps no state across a deferral, and a restarted triggerer re-reads the lines after
its cursors. When a report came is its log timestamp, so a re-read report counts from when it was written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from t9k_provider.progress import Report

#: Reports kept in the history; when it is full every other one is dropped, so it spans the whole run.
HISTORY_LIMIT = 100
#: The rate is measured over the last this many reports (fewer at the start).
RATE_WINDOW = 10
#: Least seconds between two progress lines in the task log (reports may come every step).
LOG_EVERY_SECONDS = 5.0


@dataclass
class ReportedProgress:
    step: float | None = None
    total: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    #: Epoch seconds of the latest report; None: none came.
    at: float | None = None
    #: ``{"step", "time", "metrics"}`` per kept report, oldest first.
    history: list[dict[str, Any]] = field(default_factory=list)
    #: ``{"reached", "resumed", "time"}`` per time the training went back to an earlier step (the latest 10).
    resumptions: list[dict[str, Any]] = field(default_factory=list)
    #: When the last progress line was written: carried across a hand-off, so the triggerer taking over from
    #: the worker's first wait keeps its pace instead of writing a second line within a second.
    logged_at: float | None = field(default=None, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ReportedProgress:
        if not data:
            return cls()
        return cls(
            data.get("step"), data.get("total"), dict(data.get("metrics") or {}), data.get("time"),
            [dict(h) for h in data.get("history") or []], [dict(r) for r in data.get("resumptions") or []],
            data.get("logged"),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any] | None:
        """``{"step", "total", "metrics", "time", "history", "resumptions", "logged"}``; None before any
        report."""
        if self.at is None:
            return None
        return {
            "step": self.step, "total": self.total, "metrics": dict(self.metrics), "time": self.at,
            "history": [dict(h) for h in self.history], "resumptions": [dict(r) for r in self.resumptions],
            "logged": self.logged_at,
        }  # fmt: skip

    def add(self, report: Report, at: float) -> Literal["new", "resumed"] | None:
        """Take ``report``, written at ``at``: ``resumed`` when its step is below the latest (the training
        went back to a checkpoint), else ``new``; None for one older than the latest or the latest again (a
        re-read line)."""
        if self.at is not None and (at < self.at or (at == self.at and report.step == self.step)):
            return None
        went_back = self.step is not None and report.step is not None and report.step < self.step
        if went_back:
            self.resumptions = [
                *self.resumptions,
                {"reached": self.step, "resumed": report.step, "time": at},
            ][-10:]
        self.step, self.total, self.metrics, self.at = report.step, report.total, dict(report.metrics), at
        self.history.append({"step": report.step, "time": at, "metrics": dict(report.metrics)})
        if len(self.history) > HISTORY_LIMIT:
            self.history = [*self.history[:-1:2], self.history[-1]]  # the first and the latest stay
        return "resumed" if went_back else "new"

    def resumed_line(self) -> str | None:
        """``progress: resumed at step 31 after reaching step 37 (6 steps lost)``: the latest resumption."""
        if not self.resumptions:
            return None
        last = self.resumptions[-1]
        lost = last["reached"] - last["resumed"]
        steps = f"{_number(lost)} step{'s' if lost != 1 else ''} lost"
        at, reached = _number(last["resumed"]), _number(last["reached"])
        return f"progress: resumed at step {at} after reaching step {reached} ({steps})"

    def rate(self) -> float | None:
        """Steps per second over the recent reports since the training last resumed; None until two reports
        apart in time."""
        since = self.resumptions[-1]["time"] if self.resumptions else float("-inf")
        recent = [h for h in self.history if h["time"] >= since][-RATE_WINDOW:]
        if len(recent) < 2 or recent[-1]["time"] <= recent[0]["time"]:
            return None
        return (recent[-1]["step"] - recent[0]["step"]) / (recent[-1]["time"] - recent[0]["time"])

    def eta(self) -> float | None:
        """Seconds until ``total`` at the current rate; None when unknown."""
        rate = self.rate()
        if self.total is None or self.step is None or not rate or rate <= 0:
            return None
        return max(0.0, (self.total - self.step) / rate)

    def line(self) -> str:
        """``progress: step 30/100 (30.0%), 2.10 steps/s, ETA 0:00:33, loss=0.41 acc=0.9``."""
        parts = [f"step {_number(self.step)}" + (f"/{_number(self.total)}" if self.total else "")]
        if self.total and self.step is not None:
            parts[0] += f" ({100.0 * self.step / self.total:.1f}%)"
        rate, eta = self.rate(), self.eta()
        if rate is not None:
            parts.append(f"{rate:.3g} steps/s")
        if eta is not None:
            parts.append(f"ETA {duration(eta)}")
        text = "progress: " + ", ".join(parts)
        if self.metrics:
            text += ", " + " ".join(f"{name}={_number(value)}" for name, value in self.metrics.items())
        return text

    def due(self, now: float) -> bool:
        """Whether a progress line may be written now (one every ``LOG_EVERY_SECONDS``)."""
        return self.at is not None and (self.logged_at is None or now - self.logged_at >= LOG_EVERY_SECONDS)

    def latest(self, now: float) -> str:
        """The latest report for a message: ``step 3/10 at 10:00:03 UTC (65s ago)``, or ``no report``."""
        if self.at is None:
            return "no report"
        when = datetime.fromtimestamp(self.at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        ago = f" ({duration(now - self.at)} ago)"
        total = f"/{_number(self.total)}" if self.total else ""
        return f"step {_number(self.step)}{total} at {when}{ago}"


def _number(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def duration(seconds: float) -> str:
    """``H:MM:SS``, rounded to the second (an ETA, a wait)."""
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
