"""T9kJobTrigger's shared long watch and shared client against the embedded local cluster (API only).

The server counts every request by User-Agent (``GET /_embedded/requests``); the triggers' client (a
``KubeApi``) is the only one sending ``kube.api.USER_AGENT`` (the cluster runs no node agent or controller),
so the tests assert exactly which reads and watches a wait cost: per namespace, one LIST (the watch's starting
version) and one watch; per trigger, one GET.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_provider.hooks.async_t9k import AsyncT9kClient, shared_clients
from t9k_provider.jobs import API_VERSION
from t9k_provider.kube.api import USER_AGENT, KubeApi
from t9k_provider.testing import LocalCluster
from t9k_provider.triggers.job import T9kJobTrigger
from tests.airflow.fakes import api_error
from tests.support.clusters import cluster_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(90)]

NS = "default"


cluster = cluster_fixture(node_agents=False)


def call(cluster: LocalCluster, method: str, path: str, body: Any = None) -> Any:
    headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else None
    status, _, parsed = cluster.request(method, path, body, headers=headers)
    assert status in (200, 201), (method, path, status, parsed)
    return parsed


def jobs(ns: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{ns}/genericjobs"


def create_job(
    cluster: LocalCluster, name: str, phase: str | None = "Running", ns: str = NS
) -> dict[str, Any]:
    body = {
        "apiVersion": API_VERSION,
        "kind": "GenericJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicaSpecs": [{"type": "worker", "template": {"spec": {"containers": [
            {"name": "main", "image": "img:1"}]}}}]},
    }  # fmt: skip
    job = call(cluster, "POST", jobs(ns), body)
    if phase:
        job = set_phase(cluster, name, phase, ns)
    return job


def set_phase(cluster: LocalCluster, name: str, phase: str, ns: str = NS) -> dict[str, Any]:
    return call(cluster, "PATCH", f"{jobs(ns)}/{name}/status", {"status": {"phase": phase}})


def trigger_requests(cluster: LocalCluster) -> dict[str, int]:
    """Reads and watches the provider's clients (the triggers) made so far."""
    rows = call(cluster, "GET", "/_embedded/requests")["requests"]
    counts = {"read": 0, "watch": 0, "write": 0}
    for row in rows:
        if row["userAgent"] == USER_AGENT:
            counts[row["access"]] += int(row["count"])
    return counts


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def credentials(cluster: LocalCluster) -> dict[str, Any]:
    return {"kubeconfig": yaml.safe_load(cluster.kubeconfig.read_text())}


def trigger(
    cluster: LocalCluster, name: str, creds: dict[str, Any] | None = None, ns: str = NS, **kw: Any
) -> T9kJobTrigger:
    return T9kJobTrigger(
        credentials=creds or credentials(cluster), kind="GenericJob", plural="genericjobs", name=name,
        namespace=ns, **{"poll_interval": 30.0, **kw},
    )  # fmt: skip


async def first_event(t: T9kJobTrigger) -> dict[str, Any]:
    async for event in t.run():
        return {**event.payload, "at": time.time()}
    raise AssertionError("the trigger ended without an event")


async def until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def watching(cluster: LocalCluster, before: dict[str, int], watches: int) -> None:
    """Until the triggers hold ``watches`` watches opened since ``before``."""
    await until(lambda: delta(before, trigger_requests(cluster))["watch"] >= watches)
    await asyncio.sleep(0.1)  # the server has the watch registered before its first byte is read


async def test_a_change_arrives_through_the_watch_without_a_read(cluster: LocalCluster) -> None:
    create_job(cluster, "changes")
    before = trigger_requests(cluster)
    task = asyncio.ensure_future(first_event(trigger(cluster, "changes")))
    await watching(cluster, before, 1)
    await asyncio.sleep(1.0)  # quiet: nothing more is requested
    assert delta(before, trigger_requests(cluster)) == {"read": 2, "watch": 1, "write": 0}
    finished = (await asyncio.to_thread(set_phase, cluster, "changes", "Succeeded"), time.time())[1]
    event = await asyncio.wait_for(task, 10)
    assert event["status"] == "succeeded" and event["job"]["phase"] == "Succeeded"
    assert event["at"] - finished < 1.0  # event-driven, not the 30 s poll interval
    assert delta(before, trigger_requests(cluster)) == {"read": 2, "watch": 1, "write": 0}


async def test_a_quiet_job_renews_its_watch_without_reading(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("t9k_provider.jobclient.watch.WATCH_SECONDS", 1.0)
    monkeypatch.setattr("t9k_provider.jobclient.watch.WATCH_JITTER_SECONDS", 0.0)
    create_job(cluster, "quiet")
    before = trigger_requests(cluster)
    # deadlines are checked every 0.2 s on the state held, without a request
    task = asyncio.ensure_future(first_event(trigger(cluster, "quiet", poll_interval=0.2)))
    await asyncio.sleep(3.6)
    spent = delta(before, trigger_requests(cluster))
    assert spent["read"] == 2 and 3 <= spent["watch"] <= 5, spent
    set_phase(cluster, "quiet", "Failed")
    assert (await asyncio.wait_for(task, 10))["status"] == "failed"


async def test_deadlines_fire_while_watching(cluster: LocalCluster) -> None:
    create_job(cluster, "deadline")
    create_job(cluster, "startup", phase=None)  # Pending since its creation
    before = trigger_requests(cluster)
    started = time.monotonic()
    deadline = trigger(cluster, "deadline", limits={"execution_deadline": time.time() + 1.0})
    startup = trigger(cluster, "startup", limits={"startup_timeout": 1.5}, poll_interval=0.3)
    events = await asyncio.wait_for(asyncio.gather(first_event(deadline), first_event(startup)), 10)
    assert [e["status"] for e in events] == ["timeout", "timeout"]
    assert "execution_timeout" in events[0]["message"] and "startup_timeout" in events[1]["message"]
    assert time.monotonic() - started < 4
    assert delta(before, trigger_requests(cluster)) == {"read": 3, "watch": 1, "write": 0}


async def test_expired_watch_reads_once_and_watches_again(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """410 Expired needs a compacted event log to happen for real: the first watch is made to get it."""
    real_watch = KubeApi.watch
    expired = []

    def watch(self: KubeApi, *args: Any) -> AsyncIterator[dict[str, Any]]:
        if not expired:
            expired.append(args[2])
            raise api_error(410, "too old resource version")
        return real_watch(self, *args)

    monkeypatch.setattr(KubeApi, "watch", watch)
    create_job(cluster, "expired")
    before = trigger_requests(cluster)
    task = asyncio.ensure_future(first_event(trigger(cluster, "expired")))
    await watching(cluster, before, 1)
    assert len(expired) == 1
    set_phase(cluster, "expired", "Succeeded")
    assert (await asyncio.wait_for(task, 10))["status"] == "succeeded"
    # LIST + GET, then after the 410: LIST + GET + the watch that worked
    assert delta(before, trigger_requests(cluster)) == {"read": 4, "watch": 1, "write": 0}


async def test_many_triggers_share_one_client(cluster: LocalCluster) -> None:
    names = [f"shared-{i}" for i in range(20)]
    for name in names:
        create_job(cluster, name)
    creds = credentials(cluster)
    before = trigger_requests(cluster)
    tasks = [asyncio.ensure_future(first_event(trigger(cluster, n, creds))) for n in names]
    await watching(cluster, before, 1)
    await until(lambda: delta(before, trigger_requests(cluster))["read"] == len(names) + 1)
    assert shared_clients() == 1
    for name in names:
        await asyncio.to_thread(set_phase, cluster, name, "Succeeded")
    events = await asyncio.wait_for(asyncio.gather(*tasks), 20)
    assert {e["status"] for e in events} == {"succeeded"}
    assert delta(before, trigger_requests(cluster)) == {"read": 21, "watch": 1, "write": 0}
    assert shared_clients() == 0  # the last lease closed it


async def test_each_namespace_has_its_own_watch(cluster: LocalCluster) -> None:
    call(cluster, "POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
    create_job(cluster, "here")
    create_job(cluster, "there", ns="other")
    create_job(cluster, "unwatched")  # its events reach the shared watch and are dropped
    before = trigger_requests(cluster)
    tasks = [
        asyncio.ensure_future(first_event(trigger(cluster, "here"))),
        asyncio.ensure_future(first_event(trigger(cluster, "there", ns="other"))),
    ]
    await watching(cluster, before, 2)
    set_phase(cluster, "unwatched", "Failed")
    set_phase(cluster, "there", "Failed", ns="other")
    set_phase(cluster, "here", "Succeeded")
    events = await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert [e["status"] for e in events] == ["succeeded", "failed"]
    assert delta(before, trigger_requests(cluster)) == {"read": 4, "watch": 2, "write": 0}


async def test_a_client_that_cannot_be_built_is_not_cached(cluster: LocalCluster) -> None:
    broken = {
        "kubeconfig": {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    }
    for _ in range(2):
        with pytest.raises(Exception, match="context"):
            async with AsyncT9kClient(broken):
                pass
        assert shared_clients() == 0


async def test_unauthorized_replaces_the_shared_client_once(cluster: LocalCluster, tmp_path: Path) -> None:
    """An exec plugin whose first token is wrong: both triggers get 401 on the shared client, one new
    client (one more plugin run) replaces it for both."""
    runs = tmp_path / "runs"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib, sys\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "n = int(runs.read_text()) + 1 if runs.exists() else 1\n"
        "runs.write_text(str(n))\n"
        f"token = 'wrong' if n == 1 else {cluster.token!r}\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', 'kind': 'ExecCredential',"
        " 'status': {'token': token}}))\n"
    )
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    for user in kubeconfig["users"]:
        user["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                 "command": sys.executable, "args": [str(plugin)]}}  # fmt: skip
    creds = {"kubeconfig": json.loads(json.dumps(kubeconfig))}
    for name in ("auth-a", "auth-b"):
        create_job(cluster, name)
    before = trigger_requests(cluster)
    tasks = [asyncio.ensure_future(first_event(trigger(cluster, n, creds))) for n in ("auth-a", "auth-b")]
    await watching(cluster, before, 1)
    assert runs.read_text() == "2" and shared_clients() == 1
    for name in ("auth-a", "auth-b"):
        set_phase(cluster, name, "Succeeded")
    events = await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert [e["status"] for e in events] == ["succeeded", "succeeded"]
    assert shared_clients() == 0


async def test_a_dropped_stream_is_recovered(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API server restarts under a waiting trigger: its watch breaks, reads fail for a while, then the
    trigger reads again, watches again and still sees the job finish."""
    monkeypatch.setattr("t9k_provider.hooks.errors.BACKOFF_CAP_SECONDS", 1.0)
    create_job(cluster, "dropped")
    before = trigger_requests(cluster)
    task = asyncio.ensure_future(first_event(trigger(cluster, "dropped")))
    await watching(cluster, before, 1)
    await asyncio.to_thread(cluster.restart)
    restarted = {"read": 0, "watch": 0, "write": 0}  # the new server process counts from zero
    await watching(cluster, restarted, 1)
    assert trigger_requests(cluster)["read"] >= 1  # the trigger read the job again before watching it
    set_phase(cluster, "dropped", "Succeeded")
    assert (await asyncio.wait_for(task, 20))["status"] == "succeeded"
