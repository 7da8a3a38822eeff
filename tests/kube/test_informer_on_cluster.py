"""An informer against the real local API server whose watch is cut (the server restarted) or expired (410
Gone after the store was compacted) while objects were created, updated and deleted: its handlers get every
one of those changes once the watch is back, resumed from the last version or relisted.

Writes happen while the informer cannot watch: its next watch request waits at a gate the test opens (the
only thing not real here); the cut, the restart, the compaction and the 410 are the server's own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.kube.api import KubeApi
from t9k_provider.kube.informer import Informer
from t9k_provider.kube.resources import CONFIGMAPS, SECRETS, ResourceType
from t9k_provider.testing import LocalCluster, wait_for_async

pytestmark = pytest.mark.cluster

NS = "default"
Change = tuple[str, str]  # ("added" | "updated" | "deleted", name)


class GatedApi(KubeApi):
    """The real API; a watch request waits while the gate is closed, and says so."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = asyncio.Event()

    async def watch(
        self, rt: ResourceType, namespace: str | None, rv: str, timeout: int
    ) -> AsyncIterator[dict]:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        async for event in super().watch(rt, namespace, rv, timeout):
            yield event


def configmap(name: str, value: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A cluster of this test's own, the API server alone: every change in it is the test's."""
    with LocalCluster(tmp_path / "cluster", node_agents=False) as started:
        yield started


OURS = ("stays", "changes", "goes", "comes")


@contextlib.asynccontextmanager
async def watching(
    cluster: LocalCluster, watch_timeout: int
) -> AsyncIterator[tuple[GatedApi, Informer, list]]:
    """An informer of the namespace's ConfigMaps that has delivered the adds of ``stays``, ``changes`` and
    ``goes``; the list it yields gets each change of those (and ``comes``) its handler is called with."""
    async with cluster.kube_session() as client:
        api = GatedApi(client, Metrics())
        informer = Informer(api, CONFIGMAPS, NS, watch_timeout=watch_timeout)
        changes: list[Change] = []

        def record(old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            what = "added" if old is None else "deleted" if new is None else "updated"
            name = (new or old or {})["metadata"]["name"]
            if name in OURS:  # not the namespace's kube-root-ca.crt
                changes.append((what, name))

        informer.add_handler(record)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 30)
            for name in ("stays", "changes", "goes"):
                await api.create(CONFIGMAPS, NS, configmap(name))
            await wait_for_async("the three adds delivered", lambda: len(changes) == 3, 30, 0.05)
            yield api, informer, changes
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def change_meanwhile(api: GatedApi) -> None:
    """What happens while the informer waits at the gate: one update, one delete, one create."""
    await asyncio.wait_for(api.waiting.wait(), 30)
    await api.patch(CONFIGMAPS, NS, "changes", {"data": {"v": "2"}})
    await api.delete(CONFIGMAPS, NS, "goes")
    await api.create(CONFIGMAPS, NS, configmap("comes"))


MEANWHILE = [("updated", "changes"), ("deleted", "goes"), ("added", "comes")]


async def test_a_watch_cut_by_a_server_restart_resumes_and_delivers_what_changed_meanwhile(
    cluster: LocalCluster,
) -> None:
    async with watching(cluster, watch_timeout=300) as (api, informer, changes):
        seen = len(changes)
        api.gate.clear()
        await asyncio.to_thread(cluster.restart)  # the server goes: the watch's connection is cut
        await change_meanwhile(api)
        api.gate.set()
        await wait_for_async("the changes made meanwhile", lambda: len(changes) >= seen + 3, 60, 0.05)
        assert sorted(changes[seen:]) == sorted(MEANWHILE)
        assert informer.get(NS, "goes") is None and informer.get(NS, "comes") is not None
        relists = api.metrics.relists.labels(resource="configmaps", cause="expired")._value.get()
        assert relists == 0, "resumed from its last version: nothing had expired"


async def test_an_expired_watch_relists_and_delivers_what_changed_meanwhile(cluster: LocalCluster) -> None:
    async with watching(cluster, watch_timeout=1) as (api, informer, changes):
        seen = len(changes)
        api.gate.clear()  # the watch ends after its timeoutSeconds=1; the next one waits at the gate
        await change_meanwhile(api)
        for i in range(3):  # unrelated writes move the revision on, past every event the informer saw
            await api.create(SECRETS, NS, {"metadata": {"name": f"s-{i}"}, "stringData": {"a": "b"}})
        status, _, body = await asyncio.to_thread(cluster.request, "POST", "/_embedded/compact", {})
        assert status == 200, body
        api.gate.set()
        await wait_for_async("the changes made meanwhile", lambda: len(changes) >= seen + 3, 60, 0.05)
        assert sorted(changes[seen:]) == sorted(MEANWHILE), "the delete found by the relist is delivered too"
        assert informer.get(NS, "goes") is None and informer.get(NS, "stays") is not None
        relists = api.metrics.relists.labels(resource="configmaps", cause="expired")._value.get()
        assert relists == 1, "the watch answered 410 Gone and the informer relisted"
