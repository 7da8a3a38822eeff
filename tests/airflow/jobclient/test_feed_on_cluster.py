"""The job's states (``jobclient.feed``) from the local cluster's watch, opened the way the worker's wait
opens it: a read of the job's pods first (``read_pods``), then the next state."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from t9k_provider.hooks.t9k import T9kHook
from t9k_provider.jobclient.feed import JobFeed
from t9k_provider.kube.resources import ResourceType
from t9k_provider.testing import LocalCluster
from tests.support.clusters import cluster_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

cluster = cluster_fixture(node_agents=False)
GENERIC = ResourceType("batch.tensorstack.dev/v1beta1", "GenericJob", "genericjobs")
JOBS = "/apis/batch.tensorstack.dev/v1beta1/namespaces/default/genericjobs"
#: The window of the wait's next look: far longer than the change takes to arrive by the watch.
WINDOW = 20.0


def create(cluster: LocalCluster, name: str) -> None:
    body = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "template": {"spec": {"containers": [
                {"name": "m", "image": "x", "command": ["true"]}]}}}]}}  # fmt: skip
    status, _, answer = cluster.request("POST", JOBS, body)
    assert status == 201, answer


def succeed_later(cluster: LocalCluster, name: str, after: float) -> None:
    def write() -> None:
        time.sleep(after)
        patch = {"status": {"phase": "Succeeded"}}
        headers = {"Content-Type": "application/merge-patch+json"}
        cluster.request("PATCH", f"{JOBS}/{name}/status", patch, headers=headers)

    threading.Thread(target=write, daemon=True).start()


@pytest.mark.parametrize("pods_first", [True, False])
def test_the_jobs_end_comes_by_the_watch_even_when_pods_were_read_first(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, pods_first: bool
) -> None:
    """The worker's wait starts from the job as created and reads its pods before its next look: the feed
    is open then, and its next state must still come by the watch, not after the look's whole window
    (a job that ended at once waited a poll interval: 10 s without logs, 0.5 s with)."""
    name = f"feed-{str(pods_first).lower()}"
    create(cluster, name)
    conn = f'{{"conn_type": "kubernetes", "extra": {{"kube_config_path": "{cluster.kubeconfig}"}}}}'
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", conn)
    hook = T9kHook()

    async def wait() -> tuple[Any, float]:
        feed = JobFeed(
            hook.async_client, hook.credentials, GENERIC, "default", name, uid=None, pod_selector="a=b",
            poll_interval=WINDOW, execution_deadline=None, log=logging.getLogger(__name__), alone=True,
        )  # fmt: skip
        try:
            job: Any = {"metadata": {"name": name}}  # the state the worker starts from, as created
            if pods_first:
                await feed.pods()
            else:
                job = await feed.next_state(None, 0.0)
            succeed_later(cluster, name, 0.5)
            started = time.monotonic()
            while (job.get("status") or {}).get("phase") != "Succeeded":
                job = await feed.next_state(job, WINDOW)
            return job, time.monotonic() - started
        finally:
            await feed.close()

    job, took = asyncio.run(wait())
    assert job["status"]["phase"] == "Succeeded"
    assert took < 5.0, f"the end came {took:.1f}s after the wait began (the change was written at 0.5 s)"
