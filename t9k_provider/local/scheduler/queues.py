"""T9k Scheduler Queues, enforced (pure): which PodGroups a Queue admits, and where the others stand
(docs/local-cluster.md#queues).

A PodGroup names its Queue (``spec.queue``); its pods are placed only once the Queue admitted it, whole: its
members' requests, summed, must fit what the Queue's ``spec.quota.requests`` leaves free (resources the
quota does not name are not limited), as Volcano's enqueue step and Kueue's admission do. Admission goes in
the Queue's order, higher PodGroup priority first, then the earlier one (Kueue's StrictFIFO): while the head
of the line does not fit, the PodGroups behind it wait too, so a large job is never starved by smaller ones
and every waiting one has a position. A Queue that is missing or ``closed`` admits nothing new; one whose
``namespaceSelector`` does not match the PodGroup's namespace never admits it (it does not hold up the line).
An admitted PodGroup keeps its admission (and its charge on the quota) until it is deleted, through a whole
restart of its job, a closed Queue or a smaller quota: what runs goes on.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from t9k_provider.local.machinery.quantity import parse_quantity
from t9k_provider.local.machinery.selectors import SelectorError, label_selector_from_spec
from t9k_provider.local.scheduler import fit

ADMITTED = "Admitted"
QUEUE_NOT_FOUND = "QueueNotFound"
QUEUE_CLOSED = "QueueClosed"
NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
QUOTA_EXCEEDED = "QuotaExceeded"
WAITING = "WaitingInQueue"


@dataclass(frozen=True)
class Queue:
    """What a Queue object says, parsed (its schema already refused what does not parse)."""

    name: str
    quota: fit.Requests | None  # None: no quota
    closed: bool = False
    priority: int = 0
    preemptible: bool = True
    max_duration: float | None = None  # seconds
    namespace_selector: dict[str, Any] | None = None
    node_selector: dict[str, Any] | None = None

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Queue:
        spec = obj.get("spec") or {}
        requests = ((spec.get("quota") or {}).get("requests")) if spec.get("quota") is not None else None
        quota = None
        if requests is not None:
            quota = Counter({k: parse_quantity(v) or Decimal(0) for k, v in requests.items()})
        return cls(
            name=obj["metadata"]["name"],
            quota=quota,
            closed=bool(spec.get("closed")),
            priority=int(spec.get("priority") or 0),
            preemptible=spec.get("preemptible", True) is not False,
            max_duration=(parse_duration(spec["maxDuration"]) or None) if spec.get("maxDuration") else None,
            namespace_selector=spec.get("namespaceSelector"),
            node_selector=spec.get("nodeSelector"),
        )

    def allows_namespace(self, labels: dict[str, str]) -> bool:
        if self.namespace_selector is None:
            return True
        try:
            return label_selector_from_spec(self.namespace_selector).matches(labels)
        except SelectorError:
            return False

    def allows_node(self, node: dict[str, Any]) -> bool:
        if self.node_selector is None:
            return True
        try:
            return label_selector_from_spec(self.node_selector).matches(node["metadata"].get("labels") or {})
        except SelectorError:
            return False


@dataclass
class Group:
    """A PodGroup as admission sees it: ``key`` (namespace/name), its priority and age, what its members
    request together, whether it is admitted already, and whether its namespace may use the Queue."""

    key: str
    priority: int
    created: str
    requests: fit.Requests
    admitted: bool = False
    allowed: bool = True


@dataclass
class Verdict:
    """A PodGroup's standing in its Queue: admitted (now or before), or why not and its place in the line
    (1: next; None for one that can never be admitted as things are)."""

    admitted: bool
    reason: str
    message: str
    position: int | None = None


@dataclass
class Standing:
    """Every PodGroup's verdict, and what the admitted ones hold of the quota."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    allocated: fit.Requests = field(default_factory=Counter)


def decide(name: str, queue: Queue | None, groups: list[Group]) -> Standing:
    """Admission of the PodGroups of Queue ``name`` (``queue`` None: it does not exist)."""
    out = Standing()
    for group in groups:
        if group.admitted:
            out.allocated.update(group.requests)
            out.verdicts[group.key] = Verdict(True, ADMITTED, f"admitted by queue {name}")
    line = sorted((g for g in groups if not g.admitted), key=lambda g: (-g.priority, g.created, g.key))
    position = 0
    blocked: str | None = None
    for group in line:
        if queue is None or queue.closed:
            position += 1
            reason = QUEUE_NOT_FOUND if queue is None else QUEUE_CLOSED
            said = f"queue {name} does not exist" if queue is None else f"queue {name} is closed"
            out.verdicts[group.key] = Verdict(False, reason, f"{said}: it admits no new job", position)
            continue
        if not group.allowed:
            said = f"namespace {group.key.split('/')[0]} may not use queue {name} (its namespaceSelector)"
            out.verdicts[group.key] = Verdict(False, NAMESPACE_NOT_ALLOWED, said)
            continue
        position += 1
        if blocked is None:
            short = _short(group.requests, out.allocated, queue.quota)
            if not short:
                out.allocated.update(group.requests)
                out.verdicts[group.key] = Verdict(True, ADMITTED, f"admitted by queue {name}")
                position -= 1
                continue
            blocked = group.key
            out.verdicts[group.key] = Verdict(False, QUOTA_EXCEEDED, f"queue {name}: {short}", position)
            continue
        message = f"queue {name}: waiting behind {position - 1} job(s), the first of them {blocked}"
        out.verdicts[group.key] = Verdict(False, WAITING, message, position)
    return out


def _short(requests: fit.Requests, allocated: fit.Requests, quota: fit.Requests | None) -> str:
    """What the quota lacks for ``requests`` (``needs nvidia.com/gpu 2, 0 of 2 free``), empty when it fits."""
    if quota is None:
        return ""
    lacking = [
        f"needs {name} {_text(amount)}, {_text(max(quota[name] - allocated[name], Decimal(0)))} of "
        f"{_text(quota[name])} free"
        for name, amount in sorted(requests.items())
        if name in quota and amount > 0 and allocated[name] + amount > quota[name]
    ]
    return "quota exceeded: " + "; ".join(lacking) if lacking else ""


def _text(amount: Decimal) -> str:
    return str(amount.normalize()) if amount == amount.to_integral_value() else f"{amount:f}"


#: T9k's ``maxDuration`` grammar (its user manual: units y, w, d, h, m, s, ms, each at most once, in that
#: order, e.g. ``3w``, ``2h45m``; ``0``: no limit), as the Queue schema's pattern has it.
_DURATION = re.compile(
    r"(?:(?P<y>[0-9]+)y)?(?:(?P<w>[0-9]+)w)?(?:(?P<d>[0-9]+)d)?(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?"
    r"(?:(?P<s>[0-9]+)s)?(?:(?P<ms>[0-9]+)ms)?"
)
_UNITS = {"y": 365 * 86400.0, "w": 7 * 86400.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3}


def parse_duration(text: str) -> float:
    """A T9k duration (``3w``, ``2h45m``, ``90s``) in seconds (0: none); ValueError for anything else."""
    found = _DURATION.fullmatch(text) if text != "0" else None
    if text != "0" and found is None:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _UNITS[unit] for unit, n in (found.groupdict() if found else {}).items() if n)
