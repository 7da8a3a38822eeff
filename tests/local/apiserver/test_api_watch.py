"""Acceptance: watch semantics with the sync and asyncio clients and raw HTTP."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from t9k_provider.testing import LocalCluster

pytestmark = pytest.mark.cluster


def stream_lines(cluster: LocalCluster, path: str, *, max_seconds: float = 10) -> list[dict]:
    """Read a watch response to its end (the server must close it) as parsed lines."""
    conn = cluster.connection(max_seconds)
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token}"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Transfer-Encoding") == "chunked"
    lines = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    conn.close()
    return lines


def test_watch_without_rv_sends_synthetic_adds_then_closes_on_timeout(
    core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "b"}})
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=1))
    assert 0.8 < time.monotonic() - started < 5
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("ADDED", "kube-root-ca.crt"),  # every namespace has it
    ]


def test_negative_timeout_seconds_ends_the_watch_at_once(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    """kube-apiserver does not reject it: its watch timer starts already expired, so the stream ends right
    after what it had ready (it used to run for the 5-10 minute default here)."""
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    started = time.monotonic()
    path = f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=-5"
    assert stream_lines(cluster, path) == []
    assert time.monotonic() - started < 5


def test_watch_from_list_rv_yields_exactly_later_changes(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "before"}})
    listed = core.list_namespaced_config_map(ns)
    rv = listed.metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "after"}})
    core.patch_namespaced_config_map("before", ns, {"data": {"k": "v"}})
    deleted = core.delete_namespaced_config_map("after", ns)
    lines = stream_lines(
        cluster, f"/api/v1/namespaces/{ns}/configmaps?watch=True&resourceVersion={rv}&timeoutSeconds=1"
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [
        ("ADDED", "after"),
        ("MODIFIED", "before"),
        ("DELETED", "after"),
    ]
    assert all(e["object"]["kind"] == "ConfigMap" and e["object"]["apiVersion"] == "v1" for e in lines)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in lines]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    # the DELETED event carries the deletion's own revision, newer than the last state's
    assert rvs[2] > rvs[0]
    assert deleted.details.uid == lines[2]["object"]["metadata"]["uid"]


def test_live_events_are_delivered_while_streaming(core: client.CoreV1Api, ns: str) -> None:
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    seen: list[tuple[str, str]] = []

    def consume() -> None:
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                w.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(0.3)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "live"}})
    core.delete_namespaced_config_map("live", ns)
    thread.join(10)
    assert seen == [("ADDED", "live"), ("DELETED", "live")]


def test_bookmarks_carry_a_resource_version(cluster: LocalCluster, ns: str) -> None:
    lines = stream_lines(
        cluster, f"/api/v1/namespaces/{ns}/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=2"
    )
    bookmarks = [e for e in lines if e["type"] == "BOOKMARK"]
    assert bookmarks, lines
    for b in bookmarks:
        assert b["object"]["kind"] == "Pod" and b["object"]["metadata"]["resourceVersion"].isdigit()


def test_compacted_resource_version_gets_410_in_stream(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    old = core.create_namespaced_config_map(ns, {"metadata": {"name": "old"}}).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "newer"}})
    cluster.request("POST", "/_embedded/compact", {})
    lines = stream_lines(cluster, f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={old}")
    assert len(lines) == 1 and lines[0]["type"] == "ERROR"
    status = lines[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith(f"too old resource version: {old} (")
    # the sync client surfaces it as ApiException(410) after its single retry
    with pytest.raises(ApiException) as gone:
        list(
            watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=old, timeout_seconds=2)
        )
    assert gone.value.status == 410


def test_selector_transitions_become_added_and_deleted(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "s", "labels": {"app": "no"}}})
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.patch_namespaced_config_map("s", ns, {"metadata": {"labels": {"app": "yes"}}})
    core.patch_namespaced_config_map("s", ns, {"data": {"x": "1"}})
    last = core.patch_namespaced_config_map("s", ns, {"metadata": {"labels": {"app": "no"}}})
    lines = stream_lines(
        cluster,
        f"/api/v1/namespaces/{ns}/configmaps?watch=true&labelSelector=app%3Dyes"
        f"&resourceVersion={rv}&timeoutSeconds=1",
    )
    assert [e["type"] for e in lines] == ["ADDED", "MODIFIED", "DELETED"]
    gone = lines[2]["object"]
    assert gone["metadata"]["labels"] == {"app": "yes"}  # the previous content ...
    assert gone["metadata"]["resourceVersion"] == last.metadata.resource_version  # ... with the event's RV


def test_kubectl_style_single_object_watch(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "one"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "two"}})
    _, _, listed = cluster.request(
        "GET", f"/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name%3Done"
    )
    core.patch_namespaced_config_map("two", ns, {"data": {"a": "1"}})
    core.patch_namespaced_config_map("one", ns, {"data": {"a": "1"}})
    lines = stream_lines(
        cluster,
        f"/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name%3Done"
        f"&resourceVersion={listed['metadata']['resourceVersion']}&watch=true"
        "&timeoutSeconds=1",
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("MODIFIED", "one")]


def test_errors_before_streaming_are_plain_status_responses(cluster: LocalCluster, ns: str) -> None:
    status, headers, body = cluster.request(
        "GET", f"/api/v1/namespaces/{ns}/pods?watch=true&labelSelector=a+in+("
    )
    assert (
        status == 400 and body["kind"] == "Status" and "chunked" not in headers.get("transfer-encoding", "")
    )
    status, _, body = cluster.request("GET", "/api/v1/namespaces/x/widgets?watch=true")
    assert status == 404


async def test_asyncio_client_watch_and_resume(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import watch as awatch

    core.create_namespaced_config_map(ns, {"metadata": {"name": "x", "labels": {"app": "a"}}})
    async with cluster.async_api_client() as api:
        v1 = aclient.CoreV1Api(api)
        listed = await v1.list_namespaced_config_map(ns, label_selector="app in (a,b),!missing")
        assert [i.metadata.name for i in listed.items] == ["x"]
        core.patch_namespaced_config_map("x", ns, {"data": {"k": "v"}})
        seen = []
        async with awatch.Watch() as w:
            async for event in w.stream(
                v1.list_namespaced_config_map,
                ns,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=1,
                allow_watch_bookmarks=True,
            ):
                if event["type"] == "BOOKMARK":  # the raw object; it must carry a resourceVersion
                    assert event["raw_object"]["metadata"]["resourceVersion"].isdigit()
                    continue
                seen.append((event["type"], event["object"].metadata.name))
        assert seen == [("MODIFIED", "x")]


def test_watch_list_sends_initial_state_then_an_end_marker(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "present"}})
    lines = stream_lines(
        cluster,
        f"/api/v1/namespaces/{ns}/configmaps?watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    )
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in lines[:3]] == [
        ("ADDED", "kube-root-ca.crt"),  # every namespace has it
        ("ADDED", "present"),
        ("BOOKMARK", None),
    ]
    assert lines[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_from_a_future_revision_gets_504(cluster: LocalCluster, ns: str) -> None:
    status, _, body = cluster.request(
        "GET", f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion=999999999"
    )
    assert (status, body["reason"]) == (504, "Timeout")
    assert body["message"].startswith("Too large resource version: 999999999")
    assert body["details"]["retryAfterSeconds"] == 1


def test_many_watchers_see_every_write_in_revision_order(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    writes = 150
    results: list[list[int]] = []

    def watch_all() -> None:
        conn = cluster.connection(30)
        conn.request(
            "GET",
            f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=20",
            headers={"Authorization": f"Bearer {cluster.token}"},
        )
        resp = conn.getresponse()
        seen: list[int] = []
        while len(seen) < writes:
            line = resp.readline()
            if not line:
                break
            seen.append(int(json.loads(line)["object"]["metadata"]["resourceVersion"]))
        conn.close()
        results.append(seen)

    watchers = [threading.Thread(target=watch_all) for _ in range(12)]
    for w in watchers:
        w.start()
    for i in range(writes // 3):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"m{i}"}})
        core.patch_namespaced_config_map(f"m{i}", ns, {"data": {"v": "1"}})
        core.delete_namespaced_config_map(f"m{i}", ns)
    for w in watchers:
        w.join(30)
    assert len(results) == 12
    for seen in results:
        assert len(seen) == writes and seen == sorted(seen) and len(set(seen)) == writes


def test_a_bookmark_at_the_timeout_never_skips_an_event_still_queued(cluster: LocalCluster, ns: str) -> None:
    """A watch whose client reads slowly: its stream is still writing big events when its timeout passes,
    and later writes wait in its queue. The stream may end there, but its closing bookmark must not name a
    revision beyond them: a client resumes from the last resourceVersion it saw (informers do), so it would
    never see them. It did: the likely way section 9's benchmark watch once lost a job's Running."""
    rv = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps")[2]["metadata"]["resourceVersion"]
    conn = cluster.connection(30)
    conn.request(
        "GET",
        f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        "&allowWatchBookmarks=true",
        headers={"Authorization": f"Bearer {cluster.token}"},
    )
    resp = conn.getresponse()
    assert resp.status == 200
    big = "x" * 900_000
    names = [f"big-{i}" for i in range(12)] + [f"small-{i}" for i in range(5)]
    for name in names:  # ~11 MB of events for a client that reads none yet: the stream's writes wait
        data = {"v": big} if name.startswith("big") else {}
        status, _, body = cluster.request(
            "POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": name}, "data": data}
        )
        assert status == 201, body
    time.sleep(1.5)  # past the watch's timeout
    seen, last = [], rv
    for line in resp.read().splitlines():
        event = json.loads(line)
        last = event["object"]["metadata"]["resourceVersion"]
        if event["type"] == "ADDED":
            seen.append(event["object"]["metadata"]["name"])
    conn.close()
    # what a resuming client gets next: everything after the last resourceVersion this stream named
    resumed = stream_lines(
        cluster, f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={last}&timeoutSeconds=1"
    )
    seen += [e["object"]["metadata"]["name"] for e in resumed if e["type"] == "ADDED"]
    assert seen == names
