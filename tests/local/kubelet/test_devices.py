"""The GPU allocator on its own (`t9k_provider.local.kubelet.devices`): inventory, allocation in the device
manager's order, release, rebuild from the records in pod directories, and what containers see."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.local.kubelet import devices
from t9k_provider.local.kubelet.devices import DeviceInventory, DevicesUnavailable, NodeDevices
from t9k_provider.local.kubelet.poddir import PodDir
from tests.support.builders import make_container, make_pod


def gpus(name: str, count: int | str, **fields: Any) -> dict[str, Any]:
    return make_container(name, resources={"limits": {"nvidia.com/gpu": str(count)}}, **fields)


def pod(*containers: dict[str, Any], uid: str = "u1", **spec: Any) -> dict[str, Any]:
    out = make_pod("p", *containers, **spec)
    out["metadata"].update(uid=uid, namespace="default")
    return out


def test_containers_get_distinct_devices_lowest_first() -> None:
    inventory = DeviceInventory(4)
    assert inventory.allocate("a", pod(gpus("x", 1), make_container("cpu"), gpus("y", 2))) == {
        "x": [0],
        "y": [1, 2],
    }
    assert inventory.free() == [3]
    assert inventory.allocate("b", pod(gpus("z", 1), uid="b")) == {"z": [3]}
    assert inventory.free() == []


def test_an_allocation_is_stable_and_freed_by_release() -> None:
    inventory = DeviceInventory(2)
    first = inventory.allocate("a", pod(gpus("x", 1)))
    assert inventory.allocate("a", pod(gpus("x", 1))) == first  # asked again (a restart, a retry): the same
    inventory.release("a")
    assert inventory.free() == [0, 1]
    inventory.release("never-held")


def test_too_few_free_devices_raise_and_hold_nothing() -> None:
    inventory = DeviceInventory(2)
    inventory.allocate("a", pod(gpus("x", 1)))
    with pytest.raises(DevicesUnavailable, match=r"Requested: 2, Available: 1") as caught:
        inventory.allocate("b", pod(gpus("y", 2), uid="b"))
    assert (caught.value.requested, caught.value.available) == (2, 1)
    assert "b" not in inventory.held and inventory.free() == [1]


def test_app_containers_reuse_the_init_containers_devices() -> None:
    """max(init, sum of apps) devices: the init containers share theirs, the apps split them."""
    spec = pod(gpus("a", 1), gpus("b", 1), initContainers=[gpus("i1", 2), gpus("i2", 1)])
    assert devices.assign(spec, range(8)) == {"i1": [0, 1], "i2": [0], "a": [0], "b": [1]}
    assert devices.pod_device_count(spec) == 2
    bigger_apps = pod(gpus("a", 2), gpus("b", 1), initContainers=[gpus("i", 1)])
    assert devices.assign(bigger_apps, [5, 6, 7]) == {"i": [5], "a": [5, 6], "b": [7]}


def test_a_sidecar_keeps_its_devices() -> None:
    sidecar = gpus("side", 1, restartPolicy="Always")
    spec = pod(gpus("a", 1), initContainers=[gpus("i", 1), sidecar])
    # the sidecar may take what the init container before it held (that one has finished), but not give it on
    assert devices.assign(spec, range(4)) == {"i": [0], "side": [0], "a": [1]}
    assert devices.pod_device_count(spec) == 2
    with pytest.raises(DevicesUnavailable):
        devices.assign(spec, [0])


def test_pods_without_gpus_need_nothing() -> None:
    spec = pod(make_container("cpu", resources={"limits": {"cpu": "1"}}), gpus("zero", 0))
    assert not devices.needs_devices(spec)
    assert devices.assign(spec, []) == {}


def test_rebuilt_inventory_never_hands_out_a_held_device() -> None:
    inventory = DeviceInventory(2, {"a": {"x": [1]}, "shrunk": {"y": [5]}})
    assert inventory.in_use() == {1, 5}
    assert inventory.allocate("b", pod(gpus("z", 1), uid="b")) == {"z": [0]}
    with pytest.raises(DevicesUnavailable):
        inventory.allocate("c", pod(gpus("w", 1), uid="c"))


def test_visible_env() -> None:
    assert devices.visible_env([0, 1]) == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NVIDIA_VISIBLE_DEVICES": "0,1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    assert devices.visible_env([]) == {"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}


def test_node_gpus() -> None:
    assert devices.node_gpus({"status": {"allocatable": {"nvidia.com/gpu": "3"}}}) == 3
    assert devices.node_gpus({"status": {"capacity": {"nvidia.com/gpu": 2}}}) == 2
    assert devices.node_gpus({"status": {"allocatable": {"cpu": "2"}}}) == 0
    assert devices.node_gpus({}) == 0


def test_records_in_pod_directories_survive_a_new_manager(tmp_path: Path) -> None:
    """What a restarted kubelet does: the records on disk hold their devices before anything is allocated."""

    async def scenario() -> None:
        first = NodeDevices(kube=None, state_dir=tmp_path)  # type: ignore[arg-type]  # the API is not asked
        first.start(2)
        held = pod(gpus("x", 1), uid="held")
        held_dir = PodDir.of(tmp_path, held)
        held_dir.path.mkdir(parents=True)
        assert await first.allocate(held, held_dir) == {"x": [0]}
        assert devices.read_record(held_dir) == {"x": [0]}
        plain = pod(make_container("cpu"), uid="plain")
        assert await first.allocate(plain, PodDir.of(tmp_path, plain)) == {}  # no record, no wait

        second = NodeDevices(kube=None, state_dir=tmp_path)  # type: ignore[arg-type]
        second.start(2)
        assert second.inventory.held == {"held": {"x": [0]}}
        other = pod(gpus("y", 1), uid="other")
        other_dir = PodDir.of(tmp_path, other)
        other_dir.path.mkdir(parents=True)
        assert await second.allocate(other, other_dir) == {"y": [1]}
        second.release("held", held_dir)
        assert not held_dir.devices.exists() and second.inventory.free() == [0]

    asyncio.run(scenario())


def test_an_unreadable_record_is_ignored(tmp_path: Path) -> None:
    pod_dir = PodDir(tmp_path / "default_p_u1")
    pod_dir.path.mkdir()
    pod_dir.devices.write_text('{"nvidia.com/gpu": {"x": ["zero"]}}')
    assert devices.read_record(pod_dir) is None
    pod_dir.devices.write_text("not json")
    assert devices.read_record(pod_dir) is None
