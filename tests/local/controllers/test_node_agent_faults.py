"""The node agents (`run_node_agents`, simulated kubelet, in this process against a cluster without agents of
its own) under a failure of one of their loops: an agent whose start fails is started again, a sync that
raises for one object is retried while the others go on, and a change handler that raises for one object does
not make its controller forget it. Each failure is logged with the agent's name or the object's key.

The failures are injected into one call (monkeypatching a method to raise once): a bug cannot be produced
otherwise. Everything else is real: the API server, the informers, the scheduler, the controllers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from t9k_provider.kube.api import KubeApi
from t9k_provider.kube.resources import JOBS, PODS, REPLICASETS
from t9k_provider.local.agents import run_node_agents
from t9k_provider.local.controllers.jobs import JobController
from t9k_provider.local.controllers.replicasets import ReplicaSetController
from t9k_provider.local.machinery import workloop
from t9k_provider.local.scheduler.scheduler import Scheduler
from t9k_provider.testing import LocalCluster, wait_for_async

pytestmark = pytest.mark.cluster


def fail_once(
    monkeypatch: pytest.MonkeyPatch, cls: type, method: str, when: Callable[..., bool] = lambda *_: True
) -> list[str]:
    """Make ``cls.method`` raise the first time ``when(*args)`` holds; returns what it raised, once it did."""
    real = getattr(cls, method)
    raised: list[str] = []

    def patched(self: Any, *args: Any) -> Any:
        if not raised and when(*args):
            raised.append(f"injected failure of {cls.__name__}.{method}")
            raise RuntimeError(raised[0])
        return real(self, *args)

    monkeypatch.setattr(cls, method, patched)
    return raised


@pytest.fixture(autouse=True)
def fast_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloop, "RESTART_BASE_DELAY", 0.05)


@pytest.fixture
async def kube(cluster: LocalCluster) -> AsyncIterator[KubeApi]:
    async with cluster.kube_session() as client:
        yield KubeApi(client)


def start_agents(cluster: LocalCluster) -> asyncio.Task[None]:
    """The simulated node agents in this test's loop (started after the test injected its fault)."""
    return asyncio.create_task(run_node_agents(cluster.kubeconfig, cluster.state_dir, "simulated"))


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}}


async def phase(kube: KubeApi, ns: str, name: str) -> str | None:
    return ((await kube.get(PODS, ns, name)).get("status") or {}).get("phase")


async def test_an_agent_whose_start_fails_is_started_again(
    cluster: LocalCluster,
    kube: KubeApi,
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    raised = fail_once(monkeypatch, Scheduler, "run")
    task = start_agents(cluster)
    try:
        await kube.create(PODS, ns, pod("placed"))
        await wait_for_async("placed Running", lambda: _is(phase(kube, ns, "placed"), "Running"), 30)
        assert raised and not task.done(), "the other agents ran on meanwhile"
    finally:
        await stop(task)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("scheduler failed")]
    assert said and "starting it again in" in said[0]


async def _is(value: Any, want: Any) -> bool:
    return await value == want


def replicaset(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod("")["spec"]},
        },
    }


async def test_a_sync_that_fails_for_one_object_is_retried_and_holds_up_no_other(
    cluster: LocalCluster,
    kube: KubeApi,
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    raised = fail_once(
        monkeypatch, ReplicaSetController, "sync", lambda rs: rs["metadata"]["name"] == "flaky"
    )
    task = start_agents(cluster)
    try:
        for name in ("flaky", "steady"):
            await kube.create(REPLICASETS, ns, replicaset(name, 2))

        async def replicas(name: str) -> bool:
            rs = await kube.get(REPLICASETS, ns, name)
            return (rs.get("status") or {}).get("replicas") == 2

        await wait_for_async("steady has its 2 replicas", lambda: replicas("steady"), 30)
        await wait_for_async("flaky has its 2 replicas after its failure", lambda: replicas("flaky"), 30)
        assert raised
    finally:
        await stop(task)
    said = [r.getMessage() for r in caplog.records if f"replicaset {ns}/flaky: sync failed" in r.getMessage()]
    assert said and "retrying in" in said[0]


async def test_a_change_handler_that_fails_for_one_object_does_not_lose_it(
    cluster: LocalCluster,
    kube: KubeApi,
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    raised = fail_once(
        monkeypatch, JobController, "on_owner", lambda old, new: (new or old)["metadata"]["name"] == "once"
    )
    task = start_agents(cluster)
    try:
        job = {
            "metadata": {"name": "once"},
            "spec": {"template": {"spec": {**pod("")["spec"], "restartPolicy": "Never"}}},
        }
        await kube.create(JOBS, ns, job)

        async def has_pod() -> bool:
            items, _ = await kube.list(PODS, ns)
            return any(p["metadata"]["labels"].get("job-name") == "once" for p in items)

        await wait_for_async("the Job's pod, though its first notification failed", has_pod, 30)
        assert raised
    finally:
        await stop(task)
    assert any(f"change handler failed for {ns}/once" in r.getMessage() for r in caplog.records)
