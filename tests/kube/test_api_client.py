"""KubeApi beyond what the controller asks of it, on the local API server: label-selected and limited lists,
uid-guarded foreground deletes, the answer's headers on ApiError; and api_client's options (a parsed
kubeconfig and a context, in-cluster only when asked, TLS verification, the connection cap)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from t9k_provider.kube.api import ApiError, KubeApi, api_client
from t9k_provider.kube.kubeconfig import KubeconfigError
from t9k_provider.kube.resources import CONFIGMAPS
from t9k_provider.testing import LocalCluster
from tests.support.clusters import cluster_fixture

NS = "default"


def kubeconfig() -> dict[str, Any]:
    clusters = [("c", "https://127.0.0.1:6443"), ("d", "https://127.0.0.1:7443")]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in clusters],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n, _ in clusters],
        "current-context": "c",
    }


async def test_a_client_from_a_parsed_kubeconfig_and_context() -> None:
    client = await api_client(kubeconfig(), context="d", verify_ssl=False, connection_limit=0)
    try:
        assert client.endpoint.host == "https://127.0.0.1:7443"
        assert client.endpoint.verify is False
        assert client.http.connector is not None and client.http.connector.limit == 0  # many watch streams
        assert not client.http.trust_env
    finally:
        await client.close()
    default = await api_client(kubeconfig())
    try:
        assert default.endpoint.host == "https://127.0.0.1:6443"
        assert default.endpoint.verify is True
        assert default.http.connector is not None and default.http.connector.limit == 100
    finally:
        await default.close()


async def test_in_cluster_is_never_replaced_by_a_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeconfigError, match="not running in a pod"):
        await api_client(kubeconfig(), in_cluster=True)


cluster = cluster_fixture(node_agents=False)


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[KubeApi]:
    api = KubeApi(await api_client(cluster.kubeconfig))
    yield api
    await api.close()


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


@pytest.mark.cluster
async def test_lists_by_label_and_by_page(api: KubeApi) -> None:
    for name, team in (("sel-a", "x"), ("sel-b", "x"), ("sel-c", "y")):
        await api.create(CONFIGMAPS, NS, configmap(name, team=team))
    selected, version = await api.list(CONFIGMAPS, NS, label_selector="team=x")
    assert sorted(o["metadata"]["name"] for o in selected) == ["sel-a", "sel-b"]
    assert all(o["kind"] == "ConfigMap" for o in selected)
    page, current = await api.list(CONFIGMAPS, NS, limit=1)
    assert len(page) == 1 and int(current) >= int(version)  # a page still carries the collection's version


@pytest.mark.cluster
async def test_a_uid_guarded_foreground_delete(api: KubeApi) -> None:
    created = await api.create(CONFIGMAPS, NS, configmap("guarded"))
    with pytest.raises(ApiError) as other:
        await api.delete(CONFIGMAPS, NS, "guarded", uid="not-its-uid", propagation="Foreground")
    assert other.value.conflict and other.value.headers.get("Content-Type", "").startswith("application/json")
    deleting = await api.delete(
        CONFIGMAPS, NS, "guarded", uid=created["metadata"]["uid"], propagation="Foreground"
    )
    assert "foregroundDeletion" in deleting["metadata"]["finalizers"]  # the policy reached the server
    deadline = time.monotonic() + 10
    while True:  # a foreground delete finishes once the (absent) dependents are gone
        try:
            await api.get(CONFIGMAPS, NS, "guarded")
        except ApiError as exc:
            assert exc.not_found
            break
        assert time.monotonic() < deadline, "the foreground delete did not finish"
        await asyncio.sleep(0.1)
    with pytest.raises(ApiError) as gone:
        await api.delete(CONFIGMAPS, NS, "guarded", propagation="Foreground")
    assert gone.value.not_found


@pytest.mark.cluster
async def test_follow_log_streams_lines_as_written_and_ends_with_the_container(
    api: KubeApi, cluster: LocalCluster
) -> None:
    """Lines arrive while the container writes them, a runaway line is cut at MAX_LOG_LINE_BYTES without
    losing the next one, ``sinceTime`` starts at that second, and the stream ends once the container has."""
    from t9k_provider.kube.api import MAX_LOG_LINE_BYTES
    from t9k_provider.kube.resources import PODS
    from t9k_provider.local.kubelet.crilog import CriLogWriter
    from t9k_provider.local.kubelet.poddir import PodDir

    spec = {"containers": [{"name": "main", "image": "img:1"}]}
    pod = await api.create(
        PODS, NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "talker"}, "spec": spec}
    )
    running = {"name": "main", "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
    await api.patch(PODS, NS, "talker", {"status": {"phase": "Running", "containerStatuses": [running]}},
                    subresource="status")  # fmt: skip
    attempt = PodDir.of(cluster.state_dir, pod).container("main").attempt(0)
    attempt.directory.mkdir(parents=True, exist_ok=True)
    writer = CriLogWriter(attempt.log, clock=lambda: 1_767_225_600_000_000_000)  # 2026-01-01T00:00:00Z
    writer.write("stdout", b"before\n")
    writer = CriLogWriter(attempt.log, clock=lambda: 1_767_225_610_000_000_000)  # 10 s later
    writer.write("stdout", b"first\n")

    got: list[str] = []

    async def follow() -> None:
        async for line in api.follow_log(NS, "talker", "main", since_time="2026-01-01T00:00:10Z"):
            got.append(line)

    reader = asyncio.ensure_future(follow())
    deadline = time.monotonic() + 10
    while len(got) < 1:
        assert time.monotonic() < deadline and not reader.done(), got
        await asyncio.sleep(0.05)
    writer.write("stdout", b"x" * (MAX_LOG_LINE_BYTES * 2) + b"\nafter the long one\n")
    while len(got) < 3:
        assert time.monotonic() < deadline and not reader.done(), got
        await asyncio.sleep(0.05)
    assert not reader.done()  # still following: the container runs
    writer.close()
    attempt.write_exit_code(0)
    await asyncio.wait_for(reader, 10)
    texts = [line.split(" ", 1)[1] for line in got]
    assert texts[0] == "first" and texts[2] == "after the long one", texts
    assert len(got[1]) == MAX_LOG_LINE_BYTES and set(texts[1]) == {"x"}  # cut, timestamp included
    assert got[0].startswith("2026-01-01T00:00:10")  # timestamps=true


@pytest.mark.cluster
async def test_a_watch_delivers_an_object_larger_than_aiohttps_default_buffer(api: KubeApi) -> None:
    """A watch event is one line: a ConfigMap of 600 KB (Kubernetes takes up to 1 MiB) arrives whole."""
    _, version = await api.list(CONFIGMAPS, NS, limit=1)
    big = {**configmap("big"), "data": {"blob": "x" * 600_000}}
    await api.create(CONFIGMAPS, NS, big)
    async for event in api.watch(CONFIGMAPS, NS, version, 5, field_selector="metadata.name=big"):
        if event["type"] == "ADDED":
            assert len(event["object"]["data"]["blob"]) == 600_000
            return
    raise AssertionError("the watch ended without the ConfigMap")
