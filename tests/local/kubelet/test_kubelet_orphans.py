"""The kubelet's cleanup after a crash removes what belongs to pods that are gone, never to pods that arrive
while it runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from t9k_provider.kube.informer import NODE_INDEX
from t9k_provider.local.kubelet import runtime
from t9k_provider.local.kubelet.kubelet import ProcessKubelet
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.machinery.nodes import FIRST_NODE


class _Pods:
    """The pod informer's node index, as the kubelet reads it."""

    def __init__(self) -> None:
        self.pods: list[dict[str, Any]] = []

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        assert (index, value) == (NODE_INDEX, FIRST_NODE)
        return list(self.pods)


class _Network:
    def __init__(self) -> None:
        self.kept: list[set[str]] = []

    async def cleanup_stale(self, live_uids: set[str]) -> None:
        self.kept.append(set(live_uids))


async def test_a_pod_arriving_during_the_cleanup_keeps_its_directory_and_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pods, network = _Pods(), _Network()
    kubelet = ProcessKubelet(
        SimpleNamespace(host="https://127.0.0.1:6443"),  # type: ignore[arg-type]
        tmp_path,
        network,  # type: ignore[arg-type]
        pods,  # type: ignore[arg-type]
        SimpleNamespace(),  # type: ignore[arg-type]
    )
    orphan = tmp_path / "pods" / "default_old_uid-old"
    orphan.mkdir(parents=True)
    arrived = tmp_path / "pods" / "default_new_uid-new"

    def kill_all(pod_dir: PodDir) -> None:
        # The informer delivers a new pod while the orphan is being removed; its worker sets it up.
        assert pod_dir.path == orphan
        pods.pods.append({"metadata": {"uid": "uid-new", "name": "new", "namespace": "default"}})
        arrived.mkdir()

    monkeypatch.setattr(runtime, "kill_all", kill_all)
    await kubelet._cleanup_orphans()
    assert not orphan.exists()
    assert arrived.is_dir()
    assert network.kept == [{"uid-new"}]
