"""A pod's teardown leaves nothing of its directory, also when the hosts files are rewritten meanwhile; a
stopping kubelet starts no pod and stops the ones still starting."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from t9k_provider.local.kubelet import poddir, podworker
from t9k_provider.local.kubelet.kubelet import ProcessKubelet
from t9k_provider.local.kubelet.network import PodNet
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.kubelet.podworker import PodWorker
from t9k_provider.local.kubelet.shim import process_start_time
from t9k_provider.local.machinery.nodes import FIRST_NODE


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


async def test_a_pod_that_arrives_while_the_kubelet_stops_is_left_to_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopping kubelet stops its containers while its informers still deliver (they stop after it): a pod
    bound to the node meanwhile got a worker that set it up and started its container while the stop tore
    down cgroups and networks, and it ended `StartError` (found by `make soak`). The next kubelet starts
    it."""
    kubelet = ProcessKubelet(
        SimpleNamespace(host="https://127.0.0.1:6443"),  # type: ignore[arg-type]
        tmp_path,
        _Network(),  # type: ignore[arg-type]
        _Items(),  # type: ignore[arg-type]
        _Items(),  # type: ignore[arg-type]
    )
    kubelet._started = True  # its start is not what this is about
    arrived = {"metadata": {"uid": "uid-2", "name": "late", "namespace": "default"}}
    arrived["spec"] = {"nodeName": FIRST_NODE, "containers": [{"name": "c", "command": ["true"]}]}
    workers_then: list[list[str]] = []

    async def stop_everything() -> None:
        kubelet.on_pod(None, arrived)  # the pod informer delivers while the containers are being stopped
        workers_then.append(sorted(kubelet.workers))

    monkeypatch.setattr(kubelet, "_stop_everything", stop_everything)
    running = asyncio.create_task(kubelet.run(stop_pods_on_exit=True))
    await asyncio.sleep(0.05)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    for task in list(kubelet.tasks.values()):  # what a worker started without the fix
        task.cancel()
    assert workers_then == [[]]


class _StoppingNetwork(_Network):
    def __init__(self) -> None:
        self.torn_down: list[str] = []
        self.swept = False

    async def teardown(self, uid: str) -> None:
        self.torn_down.append(uid)

    async def cleanup_stale(self, live_uids: set[str]) -> None:
        self.swept = not live_uids

    async def close(self) -> None:
        pass


async def test_a_stopping_kubelet_removes_the_networks_even_when_a_step_before_fails(tmp_path: Path) -> None:
    """The networks are the stop's last step: a failure before it (the cgroups' removal here) must not
    leave the pods' namespaces behind, nor must a namespace set up after the pods were listed (a CI run
    found one left after a clean stop)."""
    network = _StoppingNetwork()
    kubelet = ProcessKubelet(
        SimpleNamespace(host="https://127.0.0.1:6443"),  # type: ignore[arg-type]
        tmp_path,
        network,  # type: ignore[arg-type]
        _Items(),  # type: ignore[arg-type]
        _Items(),  # type: ignore[arg-type]
    )
    pod = {"metadata": {"uid": "uid-4", "name": "stopped", "namespace": "default"}}
    PodDir.of(tmp_path, pod).container("main").attempt(0).directory.mkdir(parents=True)

    class _FailingCgroups:
        def remove(self) -> None:
            raise OSError("cgroup busy")

    kubelet.cgroups = _FailingCgroups()  # type: ignore[assignment]
    with pytest.raises(OSError, match="cgroup busy"):
        await kubelet._stop_everything()
    assert network.torn_down == ["uid-4"] and network.swept


async def test_a_stopping_kubelet_waits_for_a_container_still_starting(tmp_path: Path) -> None:
    """A container whose shim is still starting it (no pid written yet) when the kubelet stops is stopped
    once it runs, before the kubelet removes the cgroups and networks it is joining: else it started into
    them as they went, and ended `StartError` ('Exception occurred in preexec_fn', found by `make soak`)."""
    kubelet = ProcessKubelet(
        SimpleNamespace(host="https://127.0.0.1:6443"),  # type: ignore[arg-type]
        tmp_path,
        _StoppingNetwork(),  # type: ignore[arg-type]
        _Items(),  # type: ignore[arg-type]
        _Items(),  # type: ignore[arg-type]
    )
    pod = {"metadata": {"uid": "uid-3", "name": "starting", "namespace": "default"}}
    files = PodDir.of(tmp_path, pod).container("main").attempt(0)
    files.directory.mkdir(parents=True)
    files.spec.write_text("{}")  # launched: its shim has not started the process yet
    container = subprocess.Popen(["sleep", "30"])
    try:

        async def started() -> None:  # the shim gets there while the kubelet stops
            await asyncio.sleep(0.3)
            ids = {"shim": os.getpid(), "container": container.pid}
            poddir.write_json(files.pid, {**ids, "containerStart": process_start_time(container.pid)})

        await asyncio.gather(kubelet._stop_everything(), started())
        assert container.wait(5) == -signal.SIGTERM
    finally:
        container.kill()
        container.wait()
