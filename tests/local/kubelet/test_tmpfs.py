"""Memory-backed emptyDir volumes without a cluster: the size rule, mountinfo, mounting and the fallback."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from t9k_provider.local.kubelet import cgroups, podworker, tmpfs, volumes
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.machinery import events
from t9k_provider.testing.cluster import unavailable

MI = 1024 * 1024
NODE = 8 * 1024 * MI


def container(name: str, memory: str | None = None) -> dict[str, Any]:
    resources = {"limits": {"memory": memory}} if memory else {}
    return {"name": name, "image": "python", "command": ["true"], "resources": resources}


def pod(*containers: dict[str, Any], size_limit: str | None = None, **spec: Any) -> dict[str, Any]:
    empty_dir = {"medium": "Memory", **({"sizeLimit": size_limit} if size_limit else {})}
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": list(containers), "volumes": [{"name": "shm", "emptyDir": empty_dir}], **spec},
    }


def size(p: dict[str, Any]) -> int:
    return tmpfs.size_of(p, p["spec"]["volumes"][0], NODE)


def test_the_size_is_the_smallest_of_size_limit_pod_limit_and_node_memory() -> None:
    assert size(pod(container("a"), size_limit="64Mi")) == 64 * MI
    assert size(pod(container("a"))) == NODE  # no limit anywhere: the node's memory
    assert size(pod(container("a", "32Mi"), size_limit="64Mi")) == 32 * MI  # the pod's memory limit
    assert size(pod(container("a", "1Gi"), size_limit="64Mi")) == 64 * MI
    assert size(pod(container("a"), size_limit="64Gi")) == NODE  # never more than the node has
    two = pod(container("a", "32Mi"), container("b", "48Mi"), size_limit="1Gi")
    assert size(two) == 80 * MI  # the pod's limit is the sum of its containers'
    partial = pod(container("a", "32Mi"), container("b"), size_limit="1Gi")
    assert size(partial) == 1024 * MI  # a container without a limit: the pod has none
    init = pod(container("a", "32Mi"), size_limit="1Gi", initContainers=[container("i", "100Mi")])
    assert size(init) == 100 * MI  # ... or the largest init container's, when larger
    overhead = pod(container("a", "32Mi"), overhead={"memory": "1Mi"})
    assert size(overhead) == 33 * MI
    assert tmpfs.memory_volumes({"spec": {"volumes": [{"name": "d", "emptyDir": {}}]}}) == []


def test_mounts_under_a_path_come_from_mountinfo_deepest_first(tmp_path: Path) -> None:
    root = os.path.realpath(tmp_path)
    info = "\n".join(
        [
            "22 1 8:1 / / rw - ext4 /dev/sda1 rw",
            f"40 22 0:50 / {root}/pods/a/volumes/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=65536k",
            f"41 22 0:51 / {root}/pods/b\\040c/volumes/x rw - tmpfs tmpfs rw",
            f"42 22 0:52 / {root}/podsx rw - tmpfs tmpfs rw",
        ]
    )
    under = tmpfs.mounts_under(tmp_path / "pods", info)
    assert under == [f"{root}/pods/b c/volumes/x", f"{root}/pods/a/volumes/shm"]
    assert tmpfs.mounts_under(tmp_path / "pods" / "a" / "volumes" / "shm", info) == under[1:]


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        unavailable("mounting a tmpfs", "not root")


def test_a_tmpfs_is_mounted_once_sized_and_unmounted(tmp_path: Path, as_root: None) -> None:
    p = pod(container("a", "32Mi"), size_limit="64Mi")
    pod_dir = PodDir(tmp_path / "pods" / "ns_p_u1")
    target = pod_dir.volumes / "shm"
    try:
        assert tmpfs.ensure_memory_volumes(p, pod_dir.volumes, NODE) == {}
        paths = volumes.materialize(p, pod_dir, {}, {})
        assert paths["shm"] == target and os.path.ismount(target)
        st = os.statvfs(target)
        assert st.f_blocks * st.f_frsize == 32 * MI
        assert oct(target.stat().st_mode & 0o7777) == oct(tmpfs.MEMORY_MODE)
        (target / "data").write_text("kept")
        # A restarted kubelet prepares the pod again: the same tmpfs, not a second one over it.
        assert tmpfs.ensure_memory_volumes(p, pod_dir.volumes, NODE) == {}
        assert tmpfs.mounts_under(target) == [str(os.path.realpath(target))]
        assert (target / "data").read_text() == "kept"
        line = next(x for x in Path("/proc/self/mountinfo").read_text().splitlines() if str(target) in x)
        assert {"nosuid", "nodev"} <= set(line.split()[5].split(","))
    finally:
        cgroups.remove_leftovers(tmp_path)  # the stopped cluster's cleanup: nothing under pods/ stays
    assert tmpfs.mounts_under(tmp_path) == []
    assert not os.path.ismount(target) and not (target / "data").exists()


def test_where_mounting_is_impossible_the_volume_stays_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = pod(container("a"), size_limit="64Mi")
    pod_dir = PodDir(tmp_path / "pods" / "ns_p_u1")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "not root" in tmpfs.ensure_memory_volumes(p, pod_dir.volumes, NODE)["shm"]
    monkeypatch.setattr(os, "geteuid", lambda: 0)

    def refuse(target: Path, size: int) -> None:
        target.mkdir(parents=True, exist_ok=True)
        raise OSError(errno.EPERM, "mount: Operation not permitted")

    monkeypatch.setattr(tmpfs, "mount", refuse)
    why = tmpfs.ensure_memory_volumes(p, pod_dir.volumes, NODE)["shm"]
    assert why == "mounting a tmpfs failed: mount: Operation not permitted"
    paths = volumes.materialize(p, pod_dir, {}, {})
    assert paths["shm"].is_dir() and not os.path.ismount(paths["shm"])
    assert paths["shm"].stat().st_mode & 0o777 == volumes.EMPTY_DIR_MODE
    (paths["shm"] / "written").write_text("on disk")
    # A directory that already holds files is never covered by a tmpfs (a kubelet that can mount again).
    assert "already holds files" in tmpfs.ensure_memory_volumes(p, pod_dir.volumes, NODE)["shm"]
    assert tmpfs.mounts_under(tmp_path) == []


async def test_a_volume_left_on_disk_gets_one_warning_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded: list[tuple[str, str, str]] = []

    async def record(kube: Any, obj: Any, reason: str, message: str, **kwargs: Any) -> None:
        recorded.append((reason, message, kwargs["event_type"]))

    monkeypatch.setattr(events, "record", record)
    monkeypatch.setattr(tmpfs, "ensure_memory_volumes", lambda *args: {"shm": "the kubelet is not root"})
    kubelet = SimpleNamespace(kube=None, state_dir=tmp_path, node_memory=NODE, node="n1")
    p = pod(container("a"), size_limit="64Mi")
    worker = podworker.PodWorker(kubelet, p)  # type: ignore[arg-type]
    await worker.setup._mount_memory_volumes(p)
    await worker.setup._mount_memory_volumes(p)  # prepared again (a FailedMount retry): no second event
    assert recorded == [
        (
            "MemoryMediumUnavailable",
            'emptyDir volume "shm" (medium: Memory) is a directory on disk, not a tmpfs: the kubelet is not '
            "root; its sizeLimit is not enforced and what is written there is not counted as memory",
            "Warning",
        )
    ]
