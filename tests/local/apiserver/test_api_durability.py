"""Acceptance: SIGKILL mid-write loses no acknowledged write; watchers resume or get 410 and relist."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections.abc import Callable

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from t9k_provider.testing import LocalCluster

pytestmark = pytest.mark.cluster


def writer(cluster: LocalCluster, acknowledged: list[str], stop: threading.Event, limit: int = 3000) -> None:
    """Create configmaps until the server dies; remember every create answered 201."""
    conn = cluster.connection(5)
    headers = {"Authorization": f"Bearer {cluster.token}", "Content-Type": "application/json"}
    for i in range(limit):
        if stop.is_set():
            return
        body = json.dumps({"metadata": {"name": f"cm-{i}"}, "data": {"i": str(i)}})
        try:
            conn.request("POST", "/api/v1/namespaces/default/configmaps", body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException):
            return
        if resp.status == 201:
            acknowledged.append(f"cm-{i}")


def test_sigkill_mid_write_loses_no_acknowledged_write(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    cluster = cluster_factory(node_agents=False)
    core = client.CoreV1Api(cluster.api_client())
    list_rv = core.list_namespaced_config_map("default").metadata.resource_version
    acknowledged: list[str] = []
    stop = threading.Event()
    thread = threading.Thread(target=writer, args=(cluster, acknowledged, stop))
    thread.start()
    time.sleep(random.uniform(0.4, 1.2))
    cluster.kill()
    thread.join(10)
    stop.set()
    assert acknowledged, "the writer made no progress before the kill"

    cluster.start()
    stored = {c.metadata.name for c in core.list_namespaced_config_map("default").items}
    assert set(acknowledged) <= stored
    # the event history survived too: a watch from the pre-kill list RV replays every acknowledged create
    seen = []
    for event in watch.Watch().stream(
        core.list_namespaced_config_map, "default", resource_version=list_rv, timeout_seconds=2
    ):
        seen.append(event["object"].metadata.name)
    assert set(acknowledged) <= set(seen)
    # and writes continue with higher revisions
    fresh = core.create_namespaced_config_map("default", {"metadata": {"name": "after-restart"}})
    assert int(fresh.metadata.resource_version) > max(
        int(c.metadata.resource_version)
        for c in core.list_namespaced_config_map("default").items
        if c.metadata.name != "after-restart"
    )


def test_watcher_resumes_across_restart_or_relists_after_410(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    cluster = cluster_factory(node_agents=False)
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_config_map("default", {"metadata": {"name": "one"}})
    last_rv = core.list_namespaced_config_map("default").metadata.resource_version
    cluster.restart()
    core.create_namespaced_config_map("default", {"metadata": {"name": "two"}})
    resumed = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=last_rv, timeout_seconds=1
        )
    ]
    assert resumed == [("ADDED", "two")]

    cluster.kill()
    cluster.start()
    cluster.request("POST", "/_embedded/compact", {})
    try:
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=last_rv, timeout_seconds=1
            )
        )
        raise AssertionError("a compacted resourceVersion must give 410")
    except ApiException as exc:
        assert exc.status == 410
    relisted = core.list_namespaced_config_map("default")
    assert {"one", "two"} <= {c.metadata.name for c in relisted.items}
    core.create_namespaced_config_map("default", {"metadata": {"name": "three"}})
    after = [
        e["object"].metadata.name
        for e in watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=relisted.metadata.resource_version,
            timeout_seconds=1,
        )
    ]
    assert after == ["three"]


def test_stale_pid_file_after_a_crash_is_replaced(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(node_agents=False)
    pid = cluster.pid
    cluster.kill()
    assert cluster.state.pid_file.exists()  # left behind by the crash
    cluster.start()
    assert cluster.state.read_pid_file()[0] == cluster.pid != pid
