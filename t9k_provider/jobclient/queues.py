"""Where a waited-for job stands in its T9k Queue, read for the wait (``waiting.queueing.QueueState``): the
I/O behind ``JobFeed.queue``.

First the job's PodGroup (one GET): once its Queue admitted it, that is all (``Inqueue``/``Running``, the
local scheduler's ``Admitted`` condition, or T9k's ``GroupScheduled``). While it waits, the Queue (a GET),
the Queue's PodGroups and its pods (two LISTs, of every namespace where the connection may, else of the
job's: the pods carry their Queue's label, and what a gang asks is what its pods ask), and the progress of
the admitted jobs' leaders (``replicalogs.ahead``). What is read of a Queue is kept per event loop for a
read interval, so the waits of one triggerer that wait in one Queue share each read. A read that fails
(a connection that may not read PodGroups, say) is None: the wait then knows nothing of the Queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from t9k_provider.jobs.contract import LABEL_GROUP_NAME, LABEL_QUEUE
from t9k_provider.kube.resources import PODGROUPS, PODS, QUEUES, parse_quantity
from t9k_provider.kube.timestamps import parse_time
from t9k_provider.replicalogs import ahead
from t9k_provider.waiting.placement import pod_requests
from t9k_provider.waiting.queueing import Other, QueueState, Standing

if TYPE_CHECKING:
    from t9k_provider.kube.api import KubeApi

#: The admitted jobs whose leaders' progress one read takes (the first to end matter most).
PROGRESS_READS = 4
#: Share of the read interval a shared read of a Queue is reused for (so each wait's next read is new).
SHARED_FOR = 0.9
#: The scheduler's reasons of a PodGroup not admitted, as the local cluster writes them
#: (docs/local-cluster.md#queues).
STANDING_OF_REASON: dict[str, Standing] = {
    "QueueClosed": "closed",
    "QueueNotFound": "deleted",
    "NamespaceNotAllowed": "refused",
}


@dataclass
class _Shared:
    at: float
    queue: dict[str, Any] | None  # None: not found
    readable: bool  # False: the Queue could not be read (its quota is unknown)
    groups: list[dict[str, Any]]
    pods: list[dict[str, Any]]


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, str, str], _Shared]] = (
    weakref.WeakKeyDictionary()
)


def _key(obj: Mapping[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"


def _quantities(amounts: Mapping[str, Any] | None) -> dict[str, Decimal]:
    out = {}
    for name, value in (amounts or {}).items():
        amount = parse_quantity(value)
        if amount is not None:
            out[str(name)] = amount
    return out


def admitted_at(podgroup: Mapping[str, Any]) -> float | None:
    """When the PodGroup's Queue admitted it (its admission condition's time, else its start); None: not
    admitted."""
    status = podgroup.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)}
    for kind in ("Admitted", "GroupScheduled"):
        condition = conditions.get(kind) or {}
        if condition.get("status") == "True":
            when = parse_time(condition.get("lastTransitionTime"))
            return when.timestamp() if when else time.time()
    if status.get("phase") in ("Inqueue", "Running"):
        when = parse_time(status.get("startTime"))
        return when.timestamp() if when else time.time()
    return None


def _reason(podgroup: Mapping[str, Any]) -> tuple[str, str]:
    for c in (podgroup.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "Admitted":
            return str(c.get("reason") or ""), str(c.get("message") or "")
    return "", ""


def _running(pods: list[dict[str, Any]]) -> bool:
    return any((p.get("status") or {}).get("phase") == "Running" for p in pods)


def _owner_kind(podgroup: Mapping[str, Any]) -> str:
    owners = podgroup["metadata"].get("ownerReferences") or []
    return str(next((o.get("kind") for o in owners if o.get("controller")), ""))


class QueueReader:
    """Reads where the job ``namespace/name`` (its PodGroup has the job's name) stands in its Queue."""

    def __init__(self, namespace: str, name: str, log: logging.Logger | Any) -> None:
        self.namespace = namespace
        self.name = name
        self.log = log
        #: Whether the connection may list every namespace (None: not tried yet).
        self._everywhere: bool | None = None

    async def read(self, api: KubeApi, queue: str, every: float) -> QueueState | None:
        """The job's standing in ``queue`` now (``every``: the wait's read interval)."""
        now = time.time()
        try:
            podgroup = await api.get(PODGROUPS, self.namespace, self.name)
        except Exception as exc:
            if getattr(exc, "not_found", False):
                return QueueState(queue, now, "unknown")
            self.log.debug("cannot read the PodGroup of job %s: %s", self.name, exc)
            return None
        admitted = admitted_at(podgroup)
        if admitted is not None:
            return QueueState(queue, now, "admitted", admitted_at=admitted)
        try:
            shared = await self._shared(api, queue, every * SHARED_FOR)
        except Exception as exc:
            self.log.debug("cannot read queue %s: %s", queue, exc)
            return None
        return await self._state(api, queue, podgroup, shared, now, every)

    async def _shared(self, api: KubeApi, queue: str, fresh_for: float) -> _Shared:
        """The Queue, its PodGroups and its pods, as a read less than ``fresh_for`` old found them."""
        reads = _SHARED.setdefault(asyncio.get_running_loop(), {})
        where = None if self._everywhere is not False else self.namespace
        key = (id(api), queue, where or "")
        known = reads.get(key)
        if known is not None and time.time() - known.at < fresh_for:
            return known
        readable = True
        try:
            found: dict[str, Any] | None = await api.get(QUEUES, None, queue)
        except Exception as exc:
            found = None
            readable = bool(getattr(exc, "not_found", False))
        try:
            groups, _ = await api.list(PODGROUPS, where)
            pods, _ = await api.list(PODS, where, label_selector=f"{LABEL_QUEUE}={queue}")
            self._everywhere = where is None
        except Exception as exc:
            if where is not None or getattr(exc, "status", None) != 403:
                raise
            self._everywhere = False  # this connection reads its own namespace only
            return await self._shared(api, queue, fresh_for)
        shared = _Shared(time.time(), found, readable, groups, pods)
        reads[key] = shared
        return shared

    async def _state(
        self,
        api: KubeApi,
        queue: str,
        podgroup: dict[str, Any],
        shared: _Shared,
        now: float,
        every: float,
    ) -> QueueState:
        reason, message = _reason(podgroup)
        spec = (shared.queue or {}).get("spec") or {}
        if not shared.readable:
            standing = STANDING_OF_REASON.get(reason, "waiting")
        elif shared.queue is None:
            standing = "deleted"
        elif spec.get("closed"):
            standing = "closed"
        else:
            standing = STANDING_OF_REASON.get(reason, "waiting")
        quota = _quantities((spec.get("quota") or {}).get("requests")) if spec.get("quota") else None
        members: dict[str, list[dict[str, Any]]] = {}
        for pod in shared.pods:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            group = (pod["metadata"].get("labels") or {}).get(LABEL_GROUP_NAME)
            members.setdefault(f"{pod['metadata'].get('namespace', 'default')}/{group}", []).append(pod)

        def requests(pg: dict[str, Any]) -> dict[str, Decimal]:
            allocated = (pg.get("status") or {}).get("allocated")
            if allocated and admitted_at(pg) is not None:
                return _quantities(allocated)
            total: dict[str, Decimal] = {}
            for pod in members.get(_key(pg), ()):
                for name, amount in pod_requests(pod).items():
                    total[name] = total.get(name, Decimal(0)) + amount
            return total

        mine = _key(podgroup)
        groups = [g for g in shared.groups if ((g.get("spec") or {}).get("queue") or "default") == queue]
        holders = [
            (pg, members.get(_key(pg), []))
            for pg in sorted((g for g in groups if admitted_at(g) is not None), key=_key)
            if _key(pg) != mine
        ]
        line = [g for g in groups if admitted_at(g) is None and _reason(g)[0] != "NamespaceNotAllowed"]
        if all(_key(g) != mine for g in line):
            line.append(podgroup)
        line.sort(key=_order)
        place = next(i for i, g in enumerate(line) if _key(g) == mine)
        others = [
            await self._holder(api, pg, pods, requests(pg), now, every if i < PROGRESS_READS else None)
            for i, (pg, pods) in enumerate(holders)
        ]
        used = _quantities(((shared.queue or {}).get("status") or {}).get("allocated"))
        if not used:
            for other in others:
                for name, amount in other.requests.items():
                    used[name] = used.get(name, Decimal(0)) + amount
        position = (podgroup.get("status") or {}).get("queuePosition")
        return QueueState(
            queue,
            now,
            standing,
            position=int(position) if position else (place + 1 if standing == "waiting" else None),
            reason=reason,
            message=message,
            quota=quota,
            used=used,
            needs=requests(podgroup),
            holders=tuple(sorted(others, key=lambda o: (o.ends_at is None, o.ends_at or 0.0, o.name))),
            ahead=tuple(Other(self._name(g), requests(g)) for g in line[:place]),
        )

    async def _holder(
        self,
        api: KubeApi,
        pg: dict[str, Any],
        pods: list[dict[str, Any]],
        requested: dict[str, Decimal],
        now: float,
        every: float | None,
    ) -> Other:
        """An admitted job of the Queue, with its leader's progress when it runs and reports (``every``
        None: not read)."""
        progress = None
        leader = ahead.leader_pod(_owner_kind(pg), pods) if _running(pods) and every is not None else None
        if leader is not None and every is not None:
            progress = await ahead.progress_of(api, leader, every * SHARED_FOR, self.log)
        if progress is None:
            return Other(self._name(pg), requested, running=_running(pods))
        return Other(
            self._name(pg),
            requested,
            running=True,
            ends_at=ahead.ends_at(progress),
            progress=ahead.summary(progress, now),
        )

    def _name(self, pg: Mapping[str, Any]) -> str:
        """A job's name in the line: bare in the waiting job's namespace, else with its namespace."""
        namespace = pg["metadata"].get("namespace", "default")
        return pg["metadata"]["name"] if namespace == self.namespace else _key(pg)


def _order(pg: Mapping[str, Any]) -> tuple[int, int, str, str]:
    """The line's order: the scheduler's ``queuePosition`` where it says one, else higher priority, then
    the earlier (T9k's PodGroup priority rule)."""
    status, spec = pg.get("status") or {}, pg.get("spec") or {}
    position = status.get("queuePosition")
    return (
        int(position) if position else 1 << 30,
        -int(spec.get("priority") or 0),
        str(pg["metadata"].get("creationTimestamp") or ""),
        _key(pg),
    )
