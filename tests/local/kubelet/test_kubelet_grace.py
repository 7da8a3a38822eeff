"""Graceful pod deletion timing, without a cluster: the grace period counts from when the kubelet sees
the deletion, because `deletionTimestamp` has whole-second precision (a deadline taken from it is up to 1 s
early).
"""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.local.kubelet import podworker, runtime
from t9k_provider.local.kubelet.poddir import AttemptFiles
from t9k_provider.local.kubelet.runtime import Attempt
from t9k_provider.local.kubelet.status import ContainerView
from t9k_provider.local.machinery import events


class FakeKubelet:
    """What a PodWorker needs from its kubelet here; records the wake-ups it asks for."""

    def __init__(self, state_dir: Path) -> None:
        self.kube: Any = None
        self.state_dir = state_dir
        self.node = "n1"
        self.wakeups: list[float] = []

    def queue_wakeup(self, worker: Any, delay: float) -> None:
        self.wakeups.append(delay)


def whole_seconds(epoch: float) -> str:
    """An RFC 3339 timestamp truncated to the second, as the API server writes `deletionTimestamp`."""
    return datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def deleting_pod(grace: int, deletion_timestamp: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "deletionTimestamp": deletion_timestamp,
            "deletionGracePeriodSeconds": grace,
        },
        "spec": {"containers": [{"name": "main", "image": "python"}]},
    }


@pytest.fixture
def signals(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    sent: list[tuple[str, int, int]] = []

    def signal_container(files: AttemptFiles, sig: int) -> bool:
        sent.append((files.directory.name, files.n, sig))
        return True

    async def record(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(runtime, "signal_container", signal_container)
    monkeypatch.setattr(events, "record", record)
    return sent


def running_main(pod: dict[str, Any]) -> list[ContainerView]:
    return [ContainerView(spec=pod["spec"]["containers"][0], attempts=[Attempt(n=0, running=True)])]


async def test_grace_period_counts_from_when_the_deletion_is_seen(
    tmp_path: Path, signals: list[tuple[str, int, int]]
) -> None:
    fake = FakeKubelet(tmp_path)
    # The server computed now + 3 s and truncated it; by the time the kubelet sees it, a second has passed.
    pod = deleting_pod(3, whole_seconds(time.time() + 3 - 1))
    worker = podworker.PodWorker(fake, pod)  # type: ignore[arg-type]
    await worker._terminate(running_main(pod))
    assert signals == [("main", 0, signal.SIGTERM)]
    assert fake.wakeups[-1] > 2.9  # the SIGKILL is due a full grace period from now

    worker.update(pod)  # a later pass (e.g. a status update) does not move the deadline
    await worker._terminate(running_main(pod))
    assert signals == [("main", 0, signal.SIGTERM)]
    assert 2.5 < fake.wakeups[-1] <= fake.wakeups[0]


async def test_second_delete_may_only_shorten_the_grace_period(
    tmp_path: Path, signals: list[tuple[str, int, int]]
) -> None:
    fake = FakeKubelet(tmp_path)
    pod = deleting_pod(30, whole_seconds(time.time() + 30))
    worker = podworker.PodWorker(fake, pod)  # type: ignore[arg-type]
    await worker._terminate(running_main(pod))
    longer = deleting_pod(60, pod["metadata"]["deletionTimestamp"])
    worker.update(longer)
    await worker._terminate(running_main(longer))
    assert fake.wakeups[-1] <= 30
    now = deleting_pod(0, whole_seconds(time.time()))
    worker.update(now)
    await worker._terminate(running_main(now))
    assert signals == [("main", 0, signal.SIGTERM), ("main", 0, signal.SIGKILL)]
    assert fake.wakeups[-1] == 0.0


async def test_a_change_during_a_sync_pass_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pod's deletion often arrives while a pass is writing its status: the worker must act on it at
    once, not after the idle tick."""
    fake = FakeKubelet(tmp_path)
    worker = podworker.PodWorker(fake, deleting_pod(0, whole_seconds(time.time())))  # type: ignore[arg-type]
    passes: list[float] = []

    async def sync() -> bool:
        passes.append(time.monotonic())
        if len(passes) == 1:
            worker.update(worker.pod)  # e.g. the status write's own watch event
        elif len(passes) == 2:
            worker.mark_gone()
        return False  # idle: the next pass would wait for IDLE_TICK without a wake-up

    async def teardown() -> None:
        passes.append(time.monotonic())

    monkeypatch.setattr(worker, "sync", sync)
    monkeypatch.setattr(worker, "teardown", teardown)
    started = time.monotonic()
    await asyncio.wait_for(worker.run(), podworker.IDLE_TICK * 2)
    assert len(passes) == 3  # pass, pass (woken by the update), teardown
    assert passes[-1] - started < podworker.IDLE_TICK / 2
