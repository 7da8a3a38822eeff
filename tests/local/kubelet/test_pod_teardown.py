"""A pod's teardown leaves nothing of its directory, also when the hosts files are rewritten meanwhile."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from t9k_provider.local.kubelet import podworker
from t9k_provider.local.kubelet.kubelet import ProcessKubelet
from t9k_provider.local.kubelet.network import PodNet
from t9k_provider.local.kubelet.podworker import PodWorker


class _Items:
    def items(self) -> list[dict[str, Any]]:
        return []


class _Network:
    async def teardown(self, uid: str) -> None:
        pass


async def test_a_hosts_rewrite_during_the_teardown_does_not_keep_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The teardown removes the directory in a thread while the event loop rewrites every worker's hosts
    file (pods come and go all the time): a rewrite between the removal of the files and of the directory
    recreated `etc-hosts` and the directory stayed for good (found by `make soak`)."""
    kubelet = ProcessKubelet(
        SimpleNamespace(host="https://127.0.0.1:6443"),  # type: ignore[arg-type]
        tmp_path,
        _Network(),  # type: ignore[arg-type]
        _Items(),  # type: ignore[arg-type]
        _Items(),  # type: ignore[arg-type]
    )
    pod = {"metadata": {"uid": "uid-1", "name": "p", "namespace": "default"}, "spec": {"containers": []}}
    worker = PodWorker(kubelet, pod)
    worker.setup.net = PodNet("10.251.9.2", None, False)
    worker.dir.path.mkdir(parents=True)
    kubelet.workers[worker.uid] = worker
    kubelet.write_hosts(worker)
    assert worker.dir.etc_hosts.exists()

    def rmtree(path: Path, ignore_errors: bool = False) -> None:
        for entry in Path(path).iterdir():
            entry.unlink()
        kubelet.write_hosts(worker)  # the hosts loop, between the files and the directory
        try:
            os.rmdir(path)
        except OSError:
            if not ignore_errors:
                raise

    monkeypatch.setattr(podworker.shutil, "rmtree", rmtree)
    worker.mark_gone()
    await worker.teardown()
    assert not worker.dir.path.exists()
