"""The process kubelet (`run_node_agents` in this process, against a cluster without agents of its own) under
a failure of one of its loops: a start that fails is run again, a hosts file that could not be written is
written again, and a pod worker whose teardown fails is started again until the pod's directory is gone.
Each failure is logged with what failed (the agent, or the pod's key).

The failures are injected into one call (monkeypatching a function to raise once): an unexpected error of the
kubelet's own code cannot be produced otherwise. Pods, processes, the API server and the informers are real.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.kube.api import KubeApi
from t9k_provider.kube.resources import PODS, SERVICES
from t9k_provider.local.agents import run_node_agents
from t9k_provider.local.kubelet import hosts
from t9k_provider.local.kubelet.kubelet import ProcessKubelet
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.kubelet.podworker import PodWorker
from t9k_provider.local.machinery import workloop
from t9k_provider.testing import LocalCluster, wait_for_async
from tests.support.gates import py_gate

pytestmark = pytest.mark.cluster


def fail_once(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, when: Callable[..., bool]) -> list[str]:
    """Make ``owner.name`` (a function or method) raise the first time ``when(*args)`` holds; returns what it
    raised, once it did."""
    real = getattr(owner, name)
    raised: list[str] = []

    def patched(*args: Any) -> Any:
        if not raised and when(*args):
            raised.append(f"injected failure of {name}")
            raise OSError(raised[0])
        return real(*args)

    monkeypatch.setattr(owner, name, patched)
    return raised


@pytest.fixture(autouse=True)
def fast_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloop, "RESTART_BASE_DELAY", 0.05)


@pytest.fixture
async def kube(cluster: LocalCluster) -> AsyncIterator[KubeApi]:
    async with cluster.kube_session() as client:
        yield KubeApi(client)


@pytest.fixture
async def agents(cluster: LocalCluster) -> AsyncIterator[Callable[[], None]]:
    """``start()`` runs the process kubelet's node agents in this test's loop (after the test injected its
    fault); they are stopped, with their containers, at the end of the test."""
    tasks: list[asyncio.Task[None]] = []

    def start() -> None:
        net = {"network": "auto", "subnet": cluster.subnet.index}  # the cluster's own bridge
        tasks.append(
            asyncio.create_task(run_node_agents(cluster.kubeconfig, cluster.state_dir, "process", **net))
        )

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def pod(name: str, script: str, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, **meta},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "python", "command": ["python", "-c", script]}],
        },
    }


def phase_is(kube: KubeApi, ns: str, name: str, want: str) -> Callable[[], Any]:
    async def probe() -> dict[str, Any] | None:
        current = await kube.get(PODS, ns, name)
        return current if (current.get("status") or {}).get("phase") == want else None

    return probe


def messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def test_a_kubelet_whose_start_fails_starts_again(
    kube: KubeApi,
    agents: Callable[[], None],
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    raised = fail_once(monkeypatch, ProcessKubelet, "_cleanup_orphans", lambda _kubelet: True)
    agents()
    await kube.create(PODS, ns, pod("after-restart", "print('ran')"))
    await wait_for_async("the pod ran", phase_is(kube, ns, "after-restart", "Succeeded"), 60)
    assert raised
    said = messages(caplog, "kubelet failed; starting it again in")
    assert len(said) == 1


async def test_a_hosts_file_that_could_not_be_written_is_written_again(
    cluster: LocalCluster,
    kube: KubeApi,
    agents: Callable[[], None],
    ns: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    agents()
    go = tmp_path / f"go-{uuid.uuid4().hex[:6]}"
    try:
        await kube.create(PODS, ns, pod("web", f"{py_gate(go)}print('done')", labels={"app": "web"}))
        running = await wait_for_async("web Running", phase_is(kube, ns, "web", "Running"), 60)
        etc_hosts = PodDir.of(cluster.state_dir, running).etc_hosts
        await wait_for_async("web's hosts file", etc_hosts.exists, 30)
        raised = fail_once(monkeypatch, hosts, "write_in_place", lambda _path, content: "svc-one" in content)
        service = {
            "metadata": {"name": "svc-one"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        }
        await kube.create(SERVICES, ns, service)
        await wait_for_async("svc-one in web's hosts file", lambda: "svc-one" in etc_hosts.read_text(), 30)
        assert raised
        assert messages(caplog, f"pod {ns}/web: writing its hosts file failed")
    finally:
        go.touch()


async def test_a_pod_worker_whose_teardown_fails_is_started_again(
    cluster: LocalCluster,
    kube: KubeApi,
    agents: Callable[[], None],
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    agents()
    await kube.create(PODS, ns, pod("doomed", "print('bye')"))
    done = await wait_for_async("doomed Succeeded", phase_is(kube, ns, "doomed", "Succeeded"), 60)
    pod_dir = PodDir.of(cluster.state_dir, done).path
    assert pod_dir.is_dir()
    real = PodWorker.teardown
    raised: list[str] = []

    async def teardown(worker: PodWorker) -> None:
        if not raised and worker.name == f"{ns}/doomed":
            raised.append("injected failure of teardown")
            raise OSError(raised[0])
        await real(worker)

    monkeypatch.setattr(PodWorker, "teardown", teardown)
    await kube.delete(PODS, ns, "doomed")
    await wait_for_async("doomed's directory removed", lambda: not pod_dir.exists(), 30)
    assert raised
    assert messages(caplog, f"pod worker {ns}/doomed failed; starting it again in")
