"""Runtime pieces against the real local API server: informer 410 relist, leader election, status writes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from t9k_provider.controller.runtime.leader import LeaderElector
from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import Informer
from t9k_provider.kube.resources import CONFIGMAPS, LEASES, SECRETS, ResourceType
from t9k_provider.testing import LocalCluster, wait_for_async
from tests.support.clusters import cluster_fixture

pytestmark = pytest.mark.cluster

NS = "default"


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


class GatedApi(KubeApi):
    """The real API; watch requests wait while the gate is closed (to let the server compact meanwhile)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = asyncio.Event()
        self.watch_from: list[str] = []

    async def watch(
        self, rt: ResourceType, namespace: str | None, rv: str, timeout: int
    ) -> AsyncIterator[dict]:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        self.watch_from.append(rv)
        async for event in super().watch(rt, namespace, rv, timeout):
            yield event


cluster = cluster_fixture(kubelet="simulated")


async def test_informer_resumes_and_relists_after_compaction(cluster: LocalCluster) -> None:
    async with cluster.kube_session() as client:
        metrics = Metrics()
        api = GatedApi(client, metrics)
        await api.create(CONFIGMAPS, NS, configmap("keep-a"))
        informer = Informer(api, CONFIGMAPS, NS, watch_timeout=1)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 10)
            assert informer.get(NS, "keep-a") is not None
            await api.create(CONFIGMAPS, NS, configmap("live-b"))
            await wait_for_async(
                "watch delivers live-b", lambda: informer.get(NS, "live-b") is not None, 10, 0.05
            )

            api.gate.clear()  # the next reconnect (after timeoutSeconds=1) waits at the gate
            await asyncio.wait_for(api.waiting.wait(), 10)
            await api.delete(CONFIGMAPS, NS, "keep-a")
            await api.create(CONFIGMAPS, NS, configmap("late-c"))
            for i in range(3):  # unrelated writes move the global revision past anything the informer saw
                await api.create(SECRETS, NS, {"metadata": {"name": f"s-{i}"}, "stringData": {"a": "b"}})
            status, _, body = await asyncio.to_thread(cluster.request, "POST", "/_embedded/compact")
            assert status == 200, body
            relists_before = metrics.relists.labels(resource="configmaps", cause="expired")._value.get()
            api.gate.set()

            await wait_for_async("relist after 410", lambda: informer.get(NS, "late-c") is not None, 10, 0.05)
            assert informer.get(NS, "keep-a") is None, "the delete that happened during the gap is applied"
            assert (
                metrics.relists.labels(resource="configmaps", cause="expired")._value.get()
                == relists_before + 1
            )
            assert len(api.watch_from) >= 3, "the informer resumed watches from its last version in between"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_two_electors_never_lead_at_once(cluster: LocalCluster) -> None:
    timing = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.25}
    async with cluster.kube_session() as client_a, cluster.kube_session() as client_b:
        a = LeaderElector(
            KubeApi(client_a, Metrics()), Metrics(), namespace=NS, name="le", identity="a", **timing
        )
        b = LeaderElector(
            KubeApi(client_b, Metrics()), Metrics(), namespace=NS, name="le", identity="b", **timing
        )
        overlaps = 0
        leaders: list[str] = []

        async def sample() -> None:
            nonlocal overlaps
            while True:
                if a.is_leader() and b.is_leader():
                    overlaps += 1
                current = "a" if a.is_leader() else "b" if b.is_leader() else "-"
                if not leaders or leaders[-1] != current:
                    leaders.append(current)
                await asyncio.sleep(0.01)

        sampler = asyncio.create_task(sample())
        await asyncio.wait_for(a.acquire(), 5)
        a_hold = asyncio.create_task(a.hold())
        b_acquire = asyncio.create_task(b.acquire())
        await asyncio.sleep(3.0)  # longer than the lease: a keeps renewing, so b must still wait
        assert not b_acquire.done() and a.is_leader()

        a_hold.cancel()  # a "crashes": it stops renewing without releasing
        crashed = time.monotonic()
        await asyncio.wait_for(b_acquire, 10)
        took = time.monotonic() - crashed
        assert not a.is_leader()
        assert took >= 1.5, "b must not take over before a's lease can have expired"
        b_hold = asyncio.create_task(b.hold())
        await asyncio.sleep(0.3)
        assert b.is_leader()

        lease = await KubeApi(client_a, Metrics()).get(LEASES, NS, "le")
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] == 1

        b_hold.cancel()
        await b.release()  # clean shutdown: a takes over without waiting for expiry
        released = time.monotonic()
        await asyncio.wait_for(a.acquire(), 5)
        assert time.monotonic() - released < 1.5
        sampler.cancel()
        await asyncio.gather(sampler, a_hold, b_hold, return_exceptions=True)
        assert overlaps == 0
        assert leaders[:1] == ["-"] and "a" in leaders and "b" in leaders


async def test_lease_writes_are_optimistic(cluster: LocalCluster) -> None:
    """A stale lease update is refused (409), so two candidates cannot both win the same round."""
    async with cluster.kube_session() as client:
        api = KubeApi(client, Metrics())
        lease = await api.create(
            LEASES,
            NS,
            {"metadata": {"name": "race"}, "spec": {"holderIdentity": "x", "leaseDurationSeconds": 1}},
        )
        first = dict(lease, spec={**lease["spec"], "holderIdentity": "y"})
        second = dict(lease, spec={**lease["spec"], "holderIdentity": "z"})
        await api.replace(LEASES, NS, "race", first)
        with pytest.raises(ApiError) as exc:
            await api.replace(LEASES, NS, "race", second)
        assert exc.value.conflict


class TroubledApi(KubeApi):
    """The real API, except that every read is answered ``delay`` seconds late (a loaded API server) and the
    first ``failures`` fail like a dropped connection."""

    def __init__(self, *args: Any, failures: int = 0, delay: float = 0.0) -> None:
        super().__init__(*args)
        self.failures = failures
        self.delay = delay
        self.reads = 0

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        await asyncio.sleep(self.delay)
        if self.failures:
            self.failures -= 1
            raise ConnectionResetError("connection reset by peer")
        self.reads += 1
        return await super().get(rt, namespace, name)


async def test_a_candidate_survives_api_errors_while_waiting(cluster: LocalCluster) -> None:
    async with cluster.kube_session() as client:
        api = TroubledApi(client, Metrics(), failures=2)
        elector = LeaderElector(
            api, Metrics(), namespace=NS, name="flaky", identity="f",
            lease_duration=2.0, renew_deadline=1.5, retry_period=0.1,
        )  # fmt: skip
        await asyncio.wait_for(elector.acquire(), 10)
        assert elector.is_leader() and api.failures == 0


async def test_a_leader_keeps_its_lease_while_every_renewal_is_slow(cluster: LocalCluster) -> None:
    """Renewals that each take 0.8 s fit a 2.5 s deadline when each starts a retry period (1 s) after the
    previous one's start (1.5 s left); started a retry period after the previous one's end, the first had
    0.7 s left and leadership was lost."""
    async with cluster.kube_session() as client:
        api = TroubledApi(client, Metrics(), delay=0.8)
        elector = LeaderElector(
            api, Metrics(), namespace=NS, name="slow", identity="s",
            lease_duration=3.5, renew_deadline=2.5, retry_period=1.0,
        )  # fmt: skip
        await asyncio.wait_for(elector.acquire(), 10)
        holding = asyncio.create_task(elector.hold())
        try:
            await asyncio.sleep(5)
            assert not holding.done() and elector.is_leader(), f"lost after {api.reads} reads"
            assert api.reads >= 4, "renewed about once a second"
        finally:
            holding.cancel()
            await elector.release()
