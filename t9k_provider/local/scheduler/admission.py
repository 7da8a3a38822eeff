"""Queue admission's reads and writes: the scheduler asks `Admission.admit` whether a PodGroup's Queue admits
it (`queues.decide` over every PodGroup of that Queue, from the informers), and what was decided goes into
the PodGroups' status (phase Pending / Inqueue / Running, ``queuePosition``, the ``Admitted`` condition, what
the admission charged the quota: ``allocated``) and the Queue's (``allocated``, ``admitted``, ``pending``), so
that a client (the Airflow task waiting on a job, ``kubectl describe``) can tell where a job stands. A Queue's
``maxDuration`` is checked every second: a PodGroup running longer gets the condition MaxDurationExceeded,
which the T9k controller ends its job for (docs/controller.md#t9k-scheduler).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from t9k_provider.jobs.contract import T9K_SCHEDULER_NAME
from t9k_provider.kube.api import KubeApi
from t9k_provider.kube.informer import Informer
from t9k_provider.kube.resources import PODGROUPS, QUEUES
from t9k_provider.kube.timestamps import now_rfc3339, parse_time
from t9k_provider.local.machinery import events
from t9k_provider.local.machinery.statuswrites import patch_status
from t9k_provider.local.scheduler import fit, queues

GROUP_INDEX = "pod-group"  # pods by "<namespace>/<PodGroup name>" (the scheduler's index)
MAX_DURATION_EXCEEDED = "MaxDurationExceeded"
CHECK_PERIOD = 1.0


def queue_name(podgroup: dict[str, Any]) -> str:
    return str((podgroup.get("spec") or {}).get("queue") or "")


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"


def _quantities(requests: fit.Requests) -> dict[str, str]:
    return {name: queues._text(amount) for name, amount in sorted(requests.items()) if amount}


class Admission:
    def __init__(
        self,
        kube: KubeApi,
        pods: Informer,
        podgroups: Informer,
        queue_objects: Informer,
        namespaces: Informer,
    ) -> None:
        self.kube = kube
        self.pods = pods
        self.podgroups = podgroups
        self.queues = queue_objects
        self.namespaces = namespaces

    def queue(self, name: str) -> queues.Queue | None:
        obj = self.queues.get("", name)
        return queues.Queue.of(obj) if obj is not None else None

    async def admit(self, podgroup: dict[str, Any]) -> queues.Verdict:
        """Decide the PodGroup's whole Queue again, write what changed, and return this PodGroup's verdict."""
        name = queue_name(podgroup)
        queue = self.queue(name)
        groups = [pg for pg in self.podgroups.items() if queue_name(pg) == name and pg is not podgroup]
        groups = [podgroup, *(pg for pg in groups if _key(pg) != _key(podgroup) and self._whole(pg))]
        standing = queues.decide(name, queue, [self._group(pg, queue) for pg in groups])
        for pg in groups:
            await self._write_group(pg, standing.verdicts[_key(pg)])
        await self._write_queue(name, standing)
        return standing.verdicts[_key(podgroup)]

    def _whole(self, pg: dict[str, Any]) -> bool:
        """Whether the PodGroup takes part in admission: admitted already, or all ``minMember`` of its pods
        exist (a gang requests what its pods request: one still being created is not judged on a part)."""
        if (pg.get("status") or {}).get("phase") in ("Inqueue", "Running"):
            return True
        return len(self._members(pg)) >= int((pg.get("spec") or {}).get("minMember") or 0)

    def _members(self, pg: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            p for p in self.pods.by_index(GROUP_INDEX, _key(pg)) if not p["metadata"].get("deletionTimestamp")
        ]

    def _group(self, pg: dict[str, Any], queue: queues.Queue | None) -> queues.Group:
        status = pg.get("status") or {}
        members = self._members(pg)
        admitted = status.get("phase") in ("Inqueue", "Running") or any(fit.occupies_node(p) for p in members)
        if admitted and status.get("allocated"):  # what its admission charged, through restarts of its pods
            requests = fit.parse_requests(status["allocated"])
        else:
            requests = Counter()
            for pod in members:
                requests.update(fit.pod_requests(pod))
        namespace = self.namespaces.get("", pg["metadata"].get("namespace", "default")) or {}
        allowed = queue is None or queue.allows_namespace(namespace.get("metadata", {}).get("labels") or {})
        return queues.Group(
            key=_key(pg),
            priority=int((pg.get("spec") or {}).get("priority") or 0),
            created=pg["metadata"].get("creationTimestamp", ""),
            requests=requests,
            admitted=admitted,
            allowed=allowed,
        )

    async def _write_group(self, pg: dict[str, Any], verdict: queues.Verdict) -> None:
        """The PodGroup's status as the verdict says, when it changed (an event when its reason changes)."""
        status = dict(pg.get("status") or {})
        members = self._members(pg)
        running = any(fit.occupies_node(p) for p in members)
        phase = ("Running" if running else "Inqueue") if verdict.admitted else "Pending"
        current = next((c for c in status.get("conditions") or () if c.get("type") == queues.ADMITTED), {})
        condition = {
            "type": queues.ADMITTED,
            "status": "True" if verdict.admitted else "False",
            "reason": verdict.reason,
            "message": verdict.message,
            "lastTransitionTime": current.get("lastTransitionTime") or now_rfc3339(),
        }
        if current.get("status") != condition["status"]:
            condition["lastTransitionTime"] = now_rfc3339()
        others = [c for c in status.get("conditions") or () if c.get("type") != queues.ADMITTED]
        allocated = status.get("allocated")
        if verdict.admitted and not allocated:
            requests: fit.Requests = Counter()
            for pod in members:
                requests.update(fit.pod_requests(pod))
            allocated = _quantities(requests)
        wanted = {
            **status,
            "phase": phase,
            "queuePosition": verdict.position,
            "conditions": [*others, condition],
            "allocated": allocated if verdict.admitted else None,
            "startTime": status.get("startTime") or (now_rfc3339() if running else None),
        }
        wanted = {k: v for k, v in wanted.items() if v is not None}
        if wanted == status:
            return
        written = await self._patch_group(pg, {**wanted, **{k: None for k in status if k not in wanted}})
        if written is None:
            return
        if current.get("reason") != verdict.reason:
            kind = "Normal" if verdict.admitted else "Warning"
            reason = "Admitted" if verdict.admitted else verdict.reason
            await events.record(
                self.kube,
                {**written, "kind": "PodGroup", "apiVersion": PODGROUPS.api_version},
                reason,
                verdict.message,
                component=T9K_SCHEDULER_NAME,
                event_type=kind,
            )

    async def _write_queue(self, name: str, standing: queues.Standing) -> None:
        obj = self.queues.get("", name)
        if obj is None:
            return
        status = obj.get("status") or {}
        wanted = {
            "allocated": _quantities(standing.allocated),
            "admitted": sum(v.admitted for v in standing.verdicts.values()),
            "pending": sum(not v.admitted for v in standing.verdicts.values()),
        }
        if all(status.get(k) == v for k, v in wanted.items()):
            return
        await patch_status(self.kube, QUEUES, obj, wanted, self.queues)

    async def check_durations(self) -> None:
        """Every second: an admitted PodGroup whose pods now run is marked Running (its ``startTime``), and
        one running longer than its Queue's ``maxDuration`` is marked MaxDurationExceeded."""
        while True:
            for pg in self.podgroups.items():
                status = pg.get("status") or {}
                if status.get("phase") == "Inqueue" and any(fit.occupies_node(p) for p in self._members(pg)):
                    await self._patch_group(pg, {"phase": "Running", "startTime": now_rfc3339()})
                else:
                    await self._check_duration(pg)
            await asyncio.sleep(CHECK_PERIOD)

    async def _patch_group(self, pg: dict[str, Any], status: dict[str, Any]) -> dict[str, Any] | None:
        return await patch_status(self.kube, PODGROUPS, pg, status, self.podgroups)

    async def _check_duration(self, pg: dict[str, Any]) -> None:
        status = pg.get("status") or {}
        queue = self.queue(queue_name(pg))
        started = parse_time(status.get("startTime"))
        if queue is None or queue.max_duration is None or started is None:
            return
        if any(c.get("type") == MAX_DURATION_EXCEEDED for c in status.get("conditions") or ()):
            return
        if time.time() - started.timestamp() < queue.max_duration:
            return
        message = f"ran longer than queue {queue.name}'s maxDuration ({queue.max_duration:g}s)"
        condition = {
            "type": MAX_DURATION_EXCEEDED,
            "status": "True",
            "reason": MAX_DURATION_EXCEEDED,
            "message": message,
            "lastTransitionTime": now_rfc3339(),
        }
        written = await self._patch_group(pg, {"conditions": [*(status.get("conditions") or []), condition]})
        if written is None:
            return
        await events.record(
            self.kube,
            {**written, "kind": "PodGroup", "apiVersion": PODGROUPS.api_version},
            MAX_DURATION_EXCEEDED,
            message,
            component=T9K_SCHEDULER_NAME,
            event_type="Warning",
        )
