"""The SQLite store: revisions, restart, event history, compaction, indexes."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from t9k_provider.local.storage import store as store_module
from t9k_provider.local.storage.store import ADDED, DELETED, MODIFIED, Compacted, Conflict, Store
from t9k_provider.testing import wait_for


def _obj(name: str, ns: str = "default", **extra: object) -> dict:
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", **extra}, "data": {"v": name}}


def test_every_write_gets_the_next_revision_as_a_string(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    a = store.create("", "configmaps", _obj("a"))
    b = store.create("", "configmaps", _obj("b"))
    a2 = store.update("", "configmaps", {**_obj("a"), "data": {"v": "2"}})
    gone = store.delete(("", "configmaps", "default", "b"))
    assert [a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"]] == ["1", "2"]
    assert a2["metadata"]["resourceVersion"] == "3"
    assert gone["metadata"]["resourceVersion"] == "4"  # DELETED carries the deletion's revision
    assert store.revision == 4
    assert [o["metadata"]["name"] for o in store.list("", "configmaps")] == ["a"]


def test_create_of_existing_and_update_of_missing_conflict(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create("", "configmaps", _obj("a"))
    with pytest.raises(Conflict):
        store.create("", "configmaps", _obj("a"))
    with pytest.raises(Conflict):
        store.update("", "configmaps", _obj("missing"))
    with pytest.raises(Conflict):
        store.delete(("", "configmaps", "default", "missing"))
    assert store.revision == 1


def test_restart_keeps_objects_revision_and_history(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    for i in range(5):
        store.create("", "configmaps", _obj(f"c{i}"))
    store.delete(("", "configmaps", "default", "c0"))
    store.close()
    again = Store(tmp_path / "s.db")
    assert again.revision == 6
    assert [o["metadata"]["name"] for o in again.list("", "configmaps")] == ["c1", "c2", "c3", "c4"]
    events = list(again.events_since(4, "", "configmaps"))
    assert [(e.type, e.revision) for e in events] == [(ADDED, 5), (DELETED, 6)]
    assert events[1].prev is not None and events[1].prev["metadata"]["name"] == "c0"
    assert again.create("", "configmaps", _obj("c9"))["metadata"]["resourceVersion"] == "7"


def test_events_since_filters_by_resource_and_compaction_expires(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create("", "configmaps", _obj("a"))
    store.create("", "secrets", _obj("s"))
    store.update("", "configmaps", _obj("a"))
    assert [(e.type, e.revision) for e in store.events_since(0, "", "configmaps")] == [
        (ADDED, 1),
        (MODIFIED, 3),
    ]
    assert store.compact(2) == 2
    with pytest.raises(Compacted) as info:
        list(store.events_since(1, "", "configmaps"))
    assert str(info.value) == "too old resource version: 1 (2)"
    assert [e.revision for e in store.events_since(2, "", "configmaps")] == [3]
    store.close()
    assert Store(tmp_path / "s.db").compacted == 2


def test_automatic_compaction_keeps_the_configured_history(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", history=100)
    for i in range(1000):
        store.create("", "configmaps", _obj(f"c{i}"))
    assert store.compacted == 900
    assert len(list(store.events_since(900, "", "configmaps"))) == 100


def test_listeners_see_commits_in_revision_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    seen = []
    unsubscribe = store.subscribe(lambda e: seen.append((e.type, e.revision)))
    store.create("", "configmaps", _obj("a"))
    store.delete(("", "configmaps", "default", "a"))
    unsubscribe()
    store.create("", "configmaps", _obj("b"))
    assert seen == [(ADDED, 1), (DELETED, 2)]


def test_uid_and_owner_indexes_follow_writes(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create("", "configmaps", _obj("owner"))
    child = _obj("child", ownerReferences=[{"uid": "uid-owner", "name": "owner"}])
    store.create("", "configmaps", child)
    assert store.key_of_uid("uid-owner") == ("", "configmaps", "default", "owner")
    assert store.dependents("uid-owner") == [("", "configmaps", "default", "child")]
    store.update("", "configmaps", _obj("child"))
    assert store.dependents("uid-owner") == []
    store.delete(("", "configmaps", "default", "owner"))
    assert store.key_of_uid("uid-owner") is None


def test_a_failed_commit_changes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create("", "configmaps", _obj("a"))
    bad = _obj("b")
    bad["data"] = {"v": object()}  # not JSON-serialisable: fails before the transaction
    with pytest.raises(TypeError):
        store.create("", "configmaps", bad)
    assert store.revision == 1
    assert store.get(("", "configmaps", "default", "b")) is None


def test_list_at_an_older_revision_undoes_later_events(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create("", "configmaps", _obj("a"))
    store.create("", "configmaps", _obj("b", ns="other"))
    at = store.revision
    store.update("", "configmaps", {**_obj("a"), "data": {"v": "changed"}})
    store.delete(("", "configmaps", "other", "b"))
    store.create("", "configmaps", _obj("c"))
    past = store.list_at("", "configmaps", None, at)
    assert [(o["metadata"]["name"], o["data"]["v"]) for o in past] == [("a", "a"), ("b", "b")]
    assert [o["metadata"]["name"] for o in store.list_at("", "configmaps", "default", at)] == ["a"]
    assert store.list_at("", "configmaps", None, store.revision) == store.list("", "configmaps")
    store.compact(at + 1)
    with pytest.raises(Compacted):
        store.list_at("", "configmaps", None, at)


def test_committed_text_is_kept_for_the_stored_object_only(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    events = []
    store.subscribe(events.append)
    key = ("", "configmaps", "default", "a")
    created = store.create("", "configmaps", _obj("a"))
    text = store.text(key, created)
    assert text == json.dumps(created, separators=(",", ":")) and events[-1].text is text
    updated = store.update("", "configmaps", {**_obj("a"), "data": {"v": "2"}})
    assert store.text(key, created) is None  # no longer the stored object
    assert json.loads(store.text(key, updated) or "") == updated == json.loads(events[-1].text)
    history = list(store.events_since(0, "", "configmaps"))
    assert [json.loads(e.text) for e in history] == [e.obj for e in history]
    store.close()
    store = Store(tmp_path / "s.db")
    reloaded = store.get(key)
    assert reloaded is not None and store.text(key, reloaded) == json.dumps(updated, separators=(",", ":"))
    gone = store.delete(key)
    assert store.text(key, gone) is None and gone["metadata"]["resourceVersion"] == str(store.revision)


def test_checkpoints_run_in_the_background(tmp_path: Path) -> None:
    """Commits never checkpoint inline (a 10-30 ms stall); the checkpointer thread copies the WAL instead."""
    store = Store(tmp_path / "s.db")
    assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    empty = (tmp_path / "s.db").stat().st_size
    for i in range(300):
        store.create("", "configmaps", {**_obj(f"c{i}"), "data": {"v": "x" * 2000}})
    deadline = time.monotonic() + 10
    while (tmp_path / "s.db").stat().st_size < empty + 300 * 2000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "s.db").stat().st_size >= empty + 300 * 2000
    store.close()
    reopened = Store(tmp_path / "s.db")
    assert reopened.revision == 300 and len(reopened.list("", "configmaps")) == 300


def test_the_checkpointer_survives_a_failed_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any exception in one checkpoint is logged and the next writes are checkpointed again: a thread that
    ended would let the WAL grow without bound."""
    calls: list[str] = []
    path = tmp_path / "store.db"

    def flaky(db: sqlite3.Connection) -> None:
        # the patch reaches every Checkpointer in this process: count only this test's store's checkpoints
        if db.execute("PRAGMA database_list").fetchone()[2] == str(path):
            calls.append("called")
            if len(calls) == 1:
                raise RuntimeError("injected")
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    monkeypatch.setattr(store_module, "CHECKPOINT_SECONDS", 0.01)
    monkeypatch.setattr(store_module.Checkpointer, "checkpoint", staticmethod(flaky))
    sqlite3.connect(str(path)).execute("PRAGMA journal_mode=WAL").fetchall()
    checkpointer = store_module.Checkpointer(path)
    try:
        for _ in range(2):
            checkpointer.wrote()
            wait_for("a checkpoint after the writes", lambda n=len(calls): len(calls) > n, 5)
    finally:
        checkpointer.stop()
    assert calls == ["called", "called"]
