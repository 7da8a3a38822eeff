"""Lease-based leader election (coordination.k8s.io/v1), the same protocol as client-go's leaderelection.

Safety argument: a candidate takes over only after it has watched the lease record stay unchanged for
``lease_duration`` on its own monotonic clock (no wall-clock comparison across machines). The holder stops
acting as soon as ``renew_deadline`` (< ``lease_duration``) has passed since the start of its last successful
renewal, and every write the controller makes is fenced by ``is_leader()``. So two instances never act at
once, provided a single write completes within ``lease_duration - renew_deadline``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from datetime import datetime, timezone
from typing import Any

from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import LEASES
from t9k_provider.kube.timeouts import within
from t9k_provider.kube.timestamps import micro_rfc3339

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        metrics: Metrics,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs 0 < retry_period < renew_deadline < lease_duration")
        self.identity = identity
        self._api = api
        self._metrics = metrics
        self._namespace = namespace
        self._name = name
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None

    def is_leader(self) -> bool:
        """True only while the last successful renewal started less than ``renew_deadline`` ago."""
        return self._renewed_at is not None and time.monotonic() - self._renewed_at < self._renew_deadline

    async def acquire(self) -> None:
        """Block until this instance holds the lease."""
        log.info("waiting for leader lease %s/%s as %s", self._namespace, self._name, self.identity)
        while True:
            try:
                if await self._try_acquire_or_renew():
                    break
            except Exception as exc:  # API down or forbidden: a standby keeps waiting, it does not crash
                log.warning("leader lease attempt failed: %s", exc)
            await asyncio.sleep(self._retry_period * (1 + 0.2 * random.random()))
        log.info("acquired leader lease %s/%s", self._namespace, self._name)
        self._metrics.leader.set(1)

    async def hold(self) -> None:
        """Renew the lease ``retry_period`` after the start of the previous try, so that a slow renewal does
        not push the next one towards the deadline; return as soon as leadership is lost."""
        assert self._renewed_at is not None
        tried = self._renewed_at
        while True:
            await asyncio.sleep(max(0.0, tried + self._retry_period - time.monotonic()))
            tried = time.monotonic()
            assert self._renewed_at is not None
            remaining = self._renewed_at + self._renew_deadline - tried
            renewed = False
            if remaining > 0:
                try:
                    renewed = await within(self._try_acquire_or_renew(), remaining)
                except Exception as exc:  # the API may be down or slow: keep trying until the deadline
                    log.warning("lease renewal failed: %s", exc)
            if not renewed and (not self.is_leader() or self._held_by_other()):
                self._renewed_at = None
                self._metrics.leader.set(0)
                log.error("lost leader lease %s/%s", self._namespace, self._name)
                return

    async def release(self) -> None:
        """Give the lease up on clean shutdown so a standby takes over without waiting for expiry."""
        if not self.is_leader():
            return
        self._renewed_at = None
        self._metrics.leader.set(0)
        try:
            lease = await self._api.get(LEASES, self._namespace, self._name)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = micro_rfc3339(datetime.now(timezone.utc))
            lease["spec"] = {**spec, "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": now}
            await self._api.replace(LEASES, self._namespace, self._name, lease)
        except Exception as exc:
            log.warning("could not release the leader lease: %s", exc)

    def _held_by_other(self) -> bool:
        return self._observed is not None and self._observed[0] not in (None, "", self.identity)

    async def _try_acquire_or_renew(self) -> bool:
        started = time.monotonic()
        now = micro_rfc3339(datetime.now(timezone.utc))
        try:
            lease = await self._api.get(LEASES, self._namespace, self._name)
        except ApiError as exc:
            if not exc.not_found:
                raise
            body = {
                "apiVersion": LEASES.api_version,
                "kind": LEASES.kind,
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": self._spec(now, now, 0),
            }
            write = self._api.create(LEASES, self._namespace, body)
        else:
            spec = lease.get("spec") or {}
            record = self._record(lease)
            if record != self._observed:
                self._observed, self._observed_at = record, time.monotonic()
            holder = spec.get("holderIdentity")
            duration = float(spec.get("leaseDurationSeconds") or self._lease_duration)
            if holder and holder != self.identity and time.monotonic() < self._observed_at + duration:
                return False
            mine = holder == self.identity
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
            acquired = spec.get("acquireTime") if mine else now
            lease["spec"] = self._spec(acquired or now, now, transitions)
            write = self._api.replace(LEASES, self._namespace, self._name, lease)
        try:
            written = await write
        except ApiError as exc:
            if exc.status == 409:  # another candidate wrote first
                return False
            raise
        self._see(written, started)
        self._renewed_at = started
        return True

    def _spec(self, acquired: str, renewed: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self._lease_duration)),
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    def _see(self, lease: dict[str, Any], at: float) -> None:
        self._observed, self._observed_at = self._record(lease), at

    @staticmethod
    def _record(lease: dict[str, Any]) -> tuple[Any, ...]:
        spec = lease.get("spec") or {}
        return (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
