"""The watch hub in-process: selector transitions and closing watchers that fall too far behind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from t9k_provider.local.apiserver import hub as hub_module
from t9k_provider.local.apiserver.handlers import Handlers
from t9k_provider.local.apiserver.hub import Hub, Watcher
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.kubelet.streaming import ContainerStreams
from t9k_provider.local.storage.store import Store


def cm(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name, "labels": labels}}


def test_slow_watcher_is_closed_after_its_backlog(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(hub_module, "MAX_PENDING", 3)
    store = Store(tmp_path / "s.db")
    hub = Hub(store)
    slow = Watcher("", "configmaps", "ns", lambda o: o is not None)
    assert hub.open(slow, None) == []
    for i in range(5):
        store.create("", "configmaps", cm(f"c{i}"))
    frames = [slow.queue.get_nowait() for _ in range(slow.queue.qsize())]
    assert [f[1]["metadata"]["name"] for f in frames[:3]] == ["c0", "c1", "c2"] and frames[3] is None
    store.create("", "configmaps", cm("late"))
    assert slow.queue.empty()  # no longer registered


def test_selector_transitions(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    hub = Hub(store)
    w = Watcher(
        "",
        "configmaps",
        "ns",
        lambda o: o is not None and (o["metadata"].get("labels") or {}).get("a") == "1",
    )
    hub.open(w, None)
    store.create("", "configmaps", cm("x", a="0"))
    store.update("", "configmaps", cm("x", a="1"))
    store.update("", "configmaps", cm("x", a="0"))
    kinds = [w.queue.get_nowait()[0] for _ in range(w.queue.qsize())]
    assert kinds == ["ADDED", "DELETED"]


def test_every_watcher_of_a_write_gets_its_committed_text(tmp_path: Path) -> None:
    """The object is encoded once, at commit; transitions that send another object carry no text."""
    store = Store(tmp_path / "s.db")
    hub = Hub(store)
    store.create("", "configmaps", cm("before"))
    everything = Watcher("", "configmaps", "ns", lambda o: o is not None)
    labelled = Watcher(
        "",
        "configmaps",
        "ns",
        lambda o: o is not None and (o["metadata"].get("labels") or {}).get("a") == "1",
    )
    [initial] = hub.open(everything, None)
    assert initial.text == json.dumps(initial.obj, separators=(",", ":"))
    hub.open(labelled, None)
    store.create("", "configmaps", cm("x", a="1"))
    first, second = everything.queue.get_nowait(), labelled.queue.get_nowait()
    assert first.text is not None and first.text is second.text
    assert json.loads(first.text) == first.obj
    store.update("", "configmaps", cm("x", a="0"))
    assert everything.queue.get_nowait().type == "MODIFIED"
    left = labelled.queue.get_nowait()
    assert (left.type, left.text) == ("DELETED", None)  # the previous state, not the committed object


async def test_a_watch_closed_for_its_backlog_ends_after_the_queued_frames(
    tmp_path: Path, monkeypatch
) -> None:
    """The stream ends at once (the client re-watches from its last version), not at its timeout."""
    monkeypatch.setattr(hub_module, "MAX_PENDING", 3)
    registry = ServedResources()
    objects = Objects(Store(tmp_path / "s.db"), registry)
    namespaces, configmaps = registry.lookup("", "v1", "namespaces"), registry.lookup("", "v1", "configmaps")
    assert namespaces is not None and configmaps is not None
    objects.create(namespaces, "", {"metadata": {"name": "default"}})
    handlers = Handlers(objects, Hub(objects.store), registry, tmp_path, ContainerStreams(tmp_path))
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handlers.dispatch)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=60")
        assert response.status == 200
        for i in range(5):  # in one pass of the loop: the watcher falls 3 frames behind and is closed
            objects.create(configmaps, "default", {"metadata": {"name": f"c{i}"}})
        body = await asyncio.wait_for(response.content.read(), 10)
    names = [json.loads(line)["object"]["metadata"]["name"] for line in body.splitlines()]
    assert names == ["c0", "c1", "c2"]
