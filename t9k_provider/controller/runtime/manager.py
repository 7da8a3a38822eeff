"""Wires informers, work queue, workers, leader election and HTTP endpoints into one controller."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from t9k_provider.controller.runtime.cache import Caches
from t9k_provider.controller.runtime.events import EventRecorder
from t9k_provider.controller.runtime.health import health_app, metrics_app, serve
from t9k_provider.controller.runtime.jobsync import Engine, JobKey, JobSync, NotLeader
from t9k_provider.controller.runtime.leader import LeaderElector
from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.kube.api import ApiError, KubeApi, Session
from t9k_provider.kube.informer import OWNER_INDEX, Informer, by_owner, controller_ref
from t9k_provider.kube.resources import ResourceType
from t9k_provider.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 10.0
STALL_LIMIT = 120.0  # a worker stuck this long in one reconcile fails liveness


@dataclass
class Settings:
    namespaces: list[str] = field(default_factory=list)  # empty: all namespaces
    workers: int = 16  # a reconcile mostly waits on its requests; 4 made a burst of new jobs queue up
    leader_elect: bool = False
    lease_name: str = "t9k-controller"
    lease_namespace: str = "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""
    bind_address: str = "127.0.0.1"
    metrics_port: int = 0  # 0: off
    health_port: int = 0  # 0: off


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class Manager:
    def __init__(
        self,
        client: Session,
        settings: Settings,
        engine: Engine,
        job_types: list[ResourceType],
        child_types: list[ResourceType],
    ) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.identity = settings.identity or default_identity()
        self.api = KubeApi(client, self.metrics)
        self.queue: WorkQueue[JobKey] = WorkQueue(on_depth=self.metrics.queue_depth.set)
        self.caches = Caches(job_types, child_types)
        self.elector = (
            LeaderElector(
                self.api,
                self.metrics,
                namespace=settings.lease_namespace,
                name=settings.lease_name,
                identity=self.identity,
                lease_duration=settings.lease_duration,
                renew_deadline=settings.renew_deadline,
                retry_period=settings.retry_period,
            )
            if settings.leader_elect
            else None
        )
        self.reconciler = JobSync(
            self.api,
            self.caches,
            EventRecorder(self.api, self.metrics, self.identity),
            self.metrics,
            engine,
            may_act=self.elector.is_leader if self.elector is not None else (lambda: True),
        )
        self.metrics_port: int | None = None
        self.health_port: int | None = None
        self._job_kinds = set(self.caches.job_types)
        self._group_prefix = f"{job_types[0].group}/" if job_types else ""
        self._informer_tasks: list[asyncio.Task[None]] = []
        self._busy_since: dict[int, float] = {}
        self._reconciled = False  # a reconcile has finished (logged once: where a handover ends)
        self._runners: list[web.AppRunner] = []
        namespaces: list[str | None] = list(settings.namespaces) or [None]
        for ns in namespaces:
            for rt in job_types:
                jobs = Informer(self.api, rt, ns)
                jobs.add_handler(self._job_changed)
                self.caches.add(jobs)
            for rt in child_types:
                children = Informer(
                    self.api, rt, ns, keep=self._owned_by_job, indexers={OWNER_INDEX: by_owner}
                )
                children.add_handler(self._child_changed)
                self.caches.add(children)

    # -- event routing -----------------------------------------------------------------------------
    def _owned_by_job(self, obj: dict[str, Any]) -> bool:
        ref = controller_ref(obj)
        return (
            ref is not None
            and ref.get("kind") in self._job_kinds
            and str(ref.get("apiVersion", "")).startswith(self._group_prefix)
        )

    def _job_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            if old is not None:
                self.reconciler.forget((old.get("metadata") or {}).get("uid") or "")
            return
        meta = new.get("metadata") or {}
        self.queue.add((new["kind"], meta.get("namespace") or "", meta.get("name") or ""))

    def _child_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        ref = controller_ref(obj)
        if ref is not None:
            self.queue.add((ref["kind"], (obj.get("metadata") or {}).get("namespace") or "", ref["name"]))

    # -- probes ------------------------------------------------------------------------------------
    def live_problem(self) -> str | None:
        for task in self._informer_tasks:
            if task.done():
                return "an informer stopped"
        now = time.monotonic()
        stuck = [since for since in self._busy_since.values() if now - since > STALL_LIMIT]
        return f"{len(stuck)} worker(s) stuck in a reconcile" if stuck else None

    def ready_problem(self) -> str | None:
        waiting = [inf.rt.plural for inf in self.caches.informers if not inf.synced.is_set()]
        return f"caches not synced: {', '.join(sorted(set(waiting)))}" if waiting else None

    # -- lifecycle ---------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (exit code 0) or leadership is lost (exit code 1)."""
        await self._start_http()
        self._informer_tasks = [asyncio.create_task(inf.run()) for inf in self.caches.informers]
        workers: list[asyncio.Task[None]] = []
        holder: asyncio.Task[None] | None = None
        stopper = asyncio.create_task(stop.wait())
        code = 0
        try:
            synced = asyncio.gather(*(inf.synced.wait() for inf in self.caches.informers))
            await _first(stopper, synced)
            if stop.is_set():
                return 0
            log.info("caches synced", extra={"objects": sum(len(i) for i in self.caches.informers)})
            if self.elector is not None:
                await _first(stopper, asyncio.ensure_future(self.elector.acquire()))
                if stop.is_set():
                    return 0
                holder = asyncio.create_task(self.elector.hold())
            workers = [asyncio.create_task(self._worker(i)) for i in range(self.settings.workers)]
            log.info(
                "controller started", extra={"identity": self.identity, "workers": self.settings.workers}
            )
            watched = [stopper, *self._informer_tasks, *([holder] if holder else [])]
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if holder is not None and holder.done() and not stop.is_set():
                log.error("leadership lost: stopping at once")
                code = 1
            elif not stop.is_set():
                log.error("an informer stopped unexpectedly")
                code = 1
        finally:
            self.queue.shutdown()
            if workers:
                grace = SHUTDOWN_GRACE if code == 0 else 0.0
                _done, pending = (
                    await asyncio.wait(workers, timeout=grace) if grace else (set(), set(workers))
                )
                for task in pending:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
            for task in [*self._informer_tasks, *([holder] if holder else []), stopper]:
                task.cancel()
            await asyncio.gather(*self._informer_tasks, return_exceptions=True)
            if self.elector is not None and code == 0:
                await self.elector.release()
            for runner in self._runners:
                await runner.cleanup()
        return code

    async def _start_http(self) -> None:
        s = self.settings
        if s.metrics_port:
            runner, self.metrics_port = await serve(metrics_app(self.metrics), s.bind_address, s.metrics_port)
            self._runners.append(runner)
        if s.health_port:
            app = health_app(self.live_problem, self.ready_problem)
            runner, self.health_port = await serve(app, s.bind_address, s.health_port)
            self._runners.append(runner)

    async def _worker(self, index: int) -> None:
        while (key := await self.queue.get()) is not None:
            self._busy_since[index] = time.monotonic()
            try:
                await self._process(key)
            except NotLeader:
                log.error("worker stopped: not the leader any more")
                return
            finally:
                self._busy_since.pop(index, None)
                self.queue.done(key)

    async def _process(self, key: JobKey) -> None:
        kind = key[0]
        started = time.perf_counter()
        ctx = {"job": f"{key[1]}/{key[2]}", "kind": kind}
        try:
            outcome = await self.reconciler.reconcile(key)
        except NotLeader:
            raise
        except Exception as exc:
            self.metrics.reconcile_errors.labels(kind=kind).inc()
            self.metrics.reconciles.labels(kind=kind, result="error").inc()
            self.metrics.queue_retries.inc()
            delay = self.queue.add_rate_limited(key)
            log.warning(
                "reconcile failed, retrying in %.2fs: %s", delay, exc, extra=ctx, exc_info=_is_bug(exc)
            )
            return
        finally:
            self.metrics.reconcile_seconds.labels(kind=kind).observe(time.perf_counter() - started)
        if not self._reconciled:
            self._reconciled = True
            log.info("first reconcile done", extra={**ctx, "identity": self.identity})
        if outcome.retry:
            self.metrics.queue_retries.inc()
            self.queue.add_rate_limited(key)
            self.metrics.reconciles.labels(kind=kind, result="retry").inc()
        else:
            self.queue.forget(key)
            self.metrics.reconciles.labels(kind=kind, result="ok").inc()
        if outcome.requeue_after is not None:
            self.queue.add_after(key, outcome.requeue_after)


def _is_bug(exc: Exception) -> bool:
    """Tracebacks only for errors that are not plain API or network failures."""
    return not isinstance(exc, (ApiError, aiohttp.ClientError, OSError, asyncio.TimeoutError))


async def _first(stopper: asyncio.Future[Any], work: asyncio.Future[Any]) -> None:
    """Wait for ``work`` unless ``stopper`` finishes first (then ``work`` is cancelled)."""
    await asyncio.wait([stopper, work], return_when=asyncio.FIRST_COMPLETED)
    if not work.done():
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
    elif work.exception() is not None:
        raise work.exception()  # type: ignore[misc]
