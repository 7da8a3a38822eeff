"""The glue between caches, the pure reconcile and the API: one reconcile of one job.

Order (docs/architecture.md §3): observe from the caches -> ``reconcile`` -> write status (merge patch
on ``/status``, only when changed, fenced on the resourceVersion it was computed from; on 409 re-read the job
and recompute; a change that only mirrors pods' progress waits up to ``PROGRESS_BATCH_SECONDS`` for more) ->
execute the actions run by run (``action_runs``: consecutive creates, or deletes, of one kind go out
together, at most ``RUN_CONCURRENCY`` in flight; runs follow each other in the engine's order) -> record the
events. A crash between any two steps, or after any subset of a run, is repaired by the next
reconcile, because the engine derives everything from observed state and the status it wrote.

Create failures the API reports as permanent for this request (403 quota/forbidden, 422 invalid, AlreadyExists
owned by someone else) are surfaced as a Warning event and as condition ``ReplicaFailure=True`` (reason
``FailedCreate`` / ``ResourceExists``) and retried with per-job exponential backoff, never in a hot loop.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from t9k_provider.controller.engine.decision import Create, Decision, Delete, Observed, Patch
from t9k_provider.controller.engine.status import condition, merge_conditions
from t9k_provider.controller.runtime.cache import Caches
from t9k_provider.controller.runtime.events import EventRecorder
from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.controller.runtime.status_writer import (
    PROGRESS_BATCH_SECONDS,
    merge_patch,
    progress_only,
    status_patch,
)
from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import controller_ref

log = logging.getLogger(__name__)

JobKey = tuple[str, str, str]  # (kind, namespace, name)
Engine = Callable[[Observed], Decision]

STATUS_ATTEMPTS = 5
RUN_CONCURRENCY = 8  # requests of one run in flight at once, per reconcile

Action = Create | Delete | Patch


class NotLeader(Exception):
    """Raised before any write once this instance may no longer act."""


@dataclass(frozen=True)
class Outcome:
    requeue_after: float | None = None
    retry: bool = False  # back off and try again (a create failed)


@dataclass(frozen=True)
class _Failure:
    reason: str
    message: str


class JobSync:
    """Syncs one job at a time: the runtime's side of ``reconcile``, which only decides."""

    def __init__(
        self,
        api: KubeApi,
        caches: Caches,
        recorder: EventRecorder,
        metrics: Metrics,
        engine: Engine,
        *,
        may_act: Callable[[], bool] = lambda: True,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self._api = api
        self._caches = caches
        self._recorder = recorder
        self._metrics = metrics
        self._engine = engine
        self._may_act = may_act
        self._clock = clock
        self._failures: dict[str, dict[str, _Failure]] = {}  # job uid -> child name -> last create failure
        self._held: dict[str, datetime] = {}  # job uid -> since when a progress-only change waits

    async def reconcile(self, key: JobKey) -> Outcome:
        kind, namespace, name = key
        job = self._caches.job(kind, namespace, name)
        if job is None or (job.get("metadata") or {}).get("deletionTimestamp"):
            return Outcome()  # gone or going: ownerReference GC removes the children
        uid = job["metadata"]["uid"]
        decision: Decision | None = None
        held: float | None = None
        for _ in range(STATUS_ATTEMPTS):
            decision = self._decide(job)
            try:
                job, held = await self._write_status(job, decision.status)
                break
            except ApiError as exc:
                if exc.not_found:
                    self.forget(uid)
                    return Outcome()
                if not (exc.conflict or exc.expired):
                    raise
                self._metrics.status_writes.labels(outcome="conflict").inc()
                job = await self._api.get(self._caches.job_types[kind], namespace, name)
                self._caches.observe(job)
                if job["metadata"].get("uid") != uid or job["metadata"].get("deletionTimestamp"):
                    return Outcome()
        else:
            raise RuntimeError(f"status of {kind} {namespace}/{name} kept conflicting; will retry")
        assert decision is not None
        failed = False
        for run in action_runs(decision.actions):
            failed |= not await self._execute_run(job, run)
        for event in decision.events:
            await self._recorder.record(job, event.type, event.reason, event.message)
        if not failed:
            self._failures.pop(uid, None)
        requeue = [t for t in (decision.requeue_after, held) if t is not None]
        return Outcome(requeue_after=min(requeue, default=None), retry=failed)

    def forget(self, uid: str) -> None:
        """Drop what is remembered about a deleted job."""
        self._failures.pop(uid, None)
        self._held.pop(uid, None)

    def _decide(self, job: dict[str, Any]) -> Decision:
        meta = job["metadata"]
        children = self._caches.children_of(meta.get("namespace") or "", meta["uid"])
        observed = Observed(job=copy.deepcopy(job), children=copy.deepcopy(children), now=self._clock())
        decision = self._engine(observed)
        failures = self._failures.get(meta["uid"])
        if failures:
            status = _with_failure_condition(job.get("status") or {}, decision.status, failures, observed.now)
            decision = replace(decision, status=status)
        return decision

    async def _write_status(
        self, job: dict[str, Any], status: dict[str, Any]
    ) -> tuple[dict[str, Any], float | None]:
        """Write ``status`` unless unchanged or held: the job now known, and how long a held change waits."""
        uid = job["metadata"]["uid"]
        body = status_patch(job, status)
        if body is None:
            self._held.pop(uid, None)
            self._metrics.status_writes.labels(outcome="unchanged").inc()
            return job, None
        if progress_only(job.get("status") or {}, status):
            now = self._clock()
            wait = PROGRESS_BATCH_SECONDS - (now - self._held.setdefault(uid, now)).total_seconds()
            if wait > 0:
                self._metrics.status_writes.labels(outcome="held").inc()
                return job, wait
        self._fence()
        meta = job["metadata"]
        rt = self._caches.job_types[job["kind"]]
        updated = await self._api.patch(rt, meta.get("namespace"), meta["name"], body, subresource="status")
        self._metrics.status_writes.labels(outcome="written").inc()
        self._caches.observe(updated)
        lost = merge_patch(updated.get("status") or {}, status)
        if lost:
            log.warning("the server dropped status fields (CRD schema?): %s", sorted(lost), extra=_ctx(job))
        self._held.pop(uid, None)
        return updated, None

    async def _execute_run(self, job: dict[str, Any], run: Sequence[Action]) -> bool:
        """Send a run's actions together; each is attempted and observed before an error propagates."""
        if len(run) == 1:
            return await self._execute(job, run[0])
        slots = asyncio.Semaphore(RUN_CONCURRENCY)

        async def bounded(action: Action) -> bool:
            async with slots:
                return await self._execute(job, action)

        results = await asyncio.gather(*(bounded(action) for action in run), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return all(results)

    async def _execute(self, job: dict[str, Any], action: Action) -> bool:
        """Run one action; False when it failed in a way the user must see (already surfaced)."""
        self._fence()
        namespace = job["metadata"].get("namespace") or ""
        if isinstance(action, Create):
            return await self._create(job, namespace, action.obj)
        rt = self._caches.resource_type(action.api_version, action.kind)
        if isinstance(action, Delete):
            try:
                result = await self._api.delete(
                    rt,
                    namespace,
                    action.name,
                    uid=action.uid,
                    grace_period_seconds=action.grace_period_seconds,
                )
            except ApiError as exc:
                if exc.not_found or exc.status == 409:  # already gone, or another object (uid precondition)
                    self._metrics.actions.labels(action="delete", kind=action.kind, outcome="gone").inc()
                    if exc.not_found:
                        self._caches.observe_deleted(rt, namespace, action.name, None)
                    return True
                raise
            self._metrics.actions.labels(action="delete", kind=action.kind, outcome="ok").inc()
            if result.get("kind") == action.kind and (result.get("metadata") or {}).get("deletionTimestamp"):
                self._caches.observe(result)  # graceful deletion in progress
            else:
                self._caches.observe_deleted(rt, namespace, action.name, _int_rv(result))
            return True
        try:
            patched = await self._api.patch(rt, namespace, action.name, action.patch)
        except ApiError as exc:
            if not exc.not_found:
                raise
            self._metrics.actions.labels(action="patch", kind=action.kind, outcome="gone").inc()
            return True  # deleted meanwhile: its delete event brings the next reconcile
        self._metrics.actions.labels(action="patch", kind=action.kind, outcome="ok").inc()
        self._caches.observe(patched)
        return True

    async def _create(self, job: dict[str, Any], namespace: str, obj: dict[str, Any]) -> bool:
        uid = job["metadata"]["uid"]
        name = (obj.get("metadata") or {}).get("name") or ""
        kind = obj.get("kind", "")
        rt = self._caches.resource_type(obj.get("apiVersion", ""), kind)
        ns = (obj.get("metadata") or {}).get("namespace") or namespace
        try:
            created = await self._api.create(rt, ns, obj)
        except ApiError as exc:
            if exc.already_exists:
                existing = await self._api.get(rt, ns, name)
                ref = controller_ref(existing)
                if ref is not None and ref.get("uid") == uid:
                    self._metrics.actions.labels(action="create", kind=kind, outcome="exists").inc()
                    self._caches.observe(existing)
                    self._clear_failure(uid, name)
                    return True
                message = f"{kind} {name!r} already exists and is not owned by this job"
                return await self._create_failed(job, name, kind, "ResourceExists", message)
            if exc.status in (400, 403, 404, 422):
                message = f"cannot create {kind} {name!r}: {exc.message}"
                return await self._create_failed(job, name, kind, "FailedCreate", message)
            raise
        self._metrics.actions.labels(action="create", kind=kind, outcome="ok").inc()
        self._caches.observe(created)
        self._clear_failure(uid, name)
        return True

    async def _create_failed(
        self, job: dict[str, Any], name: str, kind: str, reason: str, message: str
    ) -> bool:
        self._metrics.actions.labels(action="create", kind=kind, outcome=reason).inc()
        log.warning("%s: %s", reason, message, extra=_ctx(job))
        self._failures.setdefault(job["metadata"]["uid"], {})[name] = _Failure(reason, message)
        await self._recorder.record(job, "Warning", reason, message)
        return False

    def _clear_failure(self, uid: str, name: str) -> None:
        failures = self._failures.get(uid)
        if failures is not None:
            failures.pop(name, None)

    def _fence(self) -> None:
        if not self._may_act():
            raise NotLeader("this instance no longer holds the leader lease")


def action_runs(actions: Sequence[Action]) -> list[list[Action]]:
    """Split into maximal runs of consecutive creates (or deletes) of one kind; a patch is a run of its own.

    The engine orders what depends on what (PodGroup, Secret, ConfigMap, Service before the Pods using them),
    and objects of one kind in one decision never depend on each other, so a run may go out concurrently.
    """
    runs: list[list[Action]] = []
    for action in actions:
        previous = runs[-1][-1] if runs else None
        if previous is not None and not isinstance(action, Patch) and _run_key(previous) == _run_key(action):
            runs[-1].append(action)
        else:
            runs.append([action])
    return runs


def _run_key(action: Action) -> tuple[type, str, str]:
    if isinstance(action, Create):
        return Create, action.obj.get("apiVersion", ""), action.obj.get("kind", "")
    return type(action), action.api_version, action.kind


def _with_failure_condition(
    current: dict[str, Any], desired: dict[str, Any], failures: dict[str, _Failure], now: datetime
) -> dict[str, Any]:
    """``desired`` plus ReplicaFailure=True describing the create failures (true since ``current`` says)."""
    first = failures[sorted(failures)[0]]
    message = "; ".join(failures[name].message for name in sorted(failures))
    previous = condition(current, "ReplicaFailure")
    wanted = {"ReplicaFailure": ("True", first.reason, message)}
    [failure] = merge_conditions([previous] if previous else [], wanted, now)
    conditions = [c for c in desired.get("conditions") or [] if c.get("type") != "ReplicaFailure"]
    return {**desired, "conditions": [*conditions, failure]}


def _int_rv(obj: dict[str, Any]) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


def _ctx(job: dict[str, Any]) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    return {"job": f"{meta.get('namespace')}/{meta.get('name')}", "kind": job.get("kind")}
