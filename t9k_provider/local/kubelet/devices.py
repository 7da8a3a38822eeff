"""GPUs as the NVIDIA device plugin hands them out: which of the node's devices each container holds.

The node's GPUs are an inventory of device indices ``0..N-1``, N being the Node's allocatable
``nvidia.com/gpu`` (one per ``/dev/nvidiaN``, or what ``t9k-local up --gpus N`` advertises: on a machine
without GPUs, N simulated devices). Index i is the i-th GPU in PCI bus order, nvidia-smi's index.

A pod's devices are chosen once, before its first container starts (the kubelet's device manager allocates
them when it admits the pod), container by container in the upstream device manager's order
(``pkg/kubelet/cm/devicemanager/manager.go``): init containers first, each taking devices an earlier init
container of the pod held before free ones; then the app containers, which take the init containers' devices
first, each device going to one app container only. A restartable init container (a sidecar) keeps its
devices: they are never handed to another container. So a pod holds max(any init container, the app
containers together) devices, what the scheduler counts, and two containers that run at once never share one.

The choice is written to the pod's directory (``PodDir.devices``) before any container starts, so a
restarted kubelet rebuilds its inventory from the pods it finds there; a pod's devices are freed when it
ends (its containers stopped and its phase Succeeded or Failed), is deleted, or is gone, as the device
manager frees the devices of pods that are no longer active.

A container sees its devices through ``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES`` (`visible_env`);
these override the container's own ``env``, as the device plugin's Allocate response overrides the image
and pod spec in Kubernetes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import GPU, NODES
from t9k_provider.local.kubelet import poddir
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.local.machinery.quantity import parse_quantity

log = logging.getLogger(__name__)

# What a container without GPUs gets: CUDA sees no device; for the NVIDIA container toolkit, "void" (like
# unset or empty) means "not a GPU container": it injects neither devices nor driver libraries. ("none"
# would still inject the driver's libraries and nvidia-smi, with no device.)
NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}

PodDevices = dict[str, list[int]]  # container name -> the device indices it holds (sorted)


class DevicesUnavailable(Exception):
    """Fewer devices are free than the pod needs."""

    def __init__(self, requested: int, available: int) -> None:
        super().__init__(
            f"requested number of devices unavailable for {GPU}. Requested: {requested}, "
            f"Available: {available}: waiting until other pods free them"
        )
        self.requested = requested
        self.available = available


def container_gpus(container: Mapping[str, Any]) -> int:
    """The container's ``nvidia.com/gpu`` (its limit; the API makes a request equal to it)."""
    resources = container.get("resources") or {}
    raw = (resources.get("limits") or {}).get(GPU, (resources.get("requests") or {}).get(GPU))
    amount = parse_quantity(raw) if raw is not None else None
    return int(amount) if amount is not None and amount > 0 else 0


def needs_devices(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return any(container_gpus(c) for c in (spec.get("initContainers") or []) + (spec.get("containers") or []))


def _take(count: int, reuse: list[int], fresh: Iterator[int]) -> list[int]:
    got = reuse[:count]
    return sorted(got + [next(fresh) for _ in range(count - len(got))])


def _plan(pod: Mapping[str, Any], fresh: Iterator[int]) -> PodDevices:
    """Each GPU container's devices: reused ones first (see the module's docstring), then from ``fresh``."""
    spec = pod.get("spec") or {}
    reuse: list[int] = []  # devices the pod holds that the next container may take
    out: PodDevices = {}
    for c in spec.get("initContainers") or []:
        got = _take(container_gpus(c), reuse, fresh)
        if c.get("restartPolicy") == "Always":  # a sidecar runs on beside the others: keeps its devices
            reuse = [d for d in reuse if d not in got]
        else:
            reuse = sorted(set(reuse) | set(got))
        if got:
            out[c["name"]] = got
    for c in spec.get("containers") or []:
        got = _take(container_gpus(c), reuse, fresh)
        reuse = [d for d in reuse if d not in got]
        if got:
            out[c["name"]] = got
    return out


def pod_device_count(pod: Mapping[str, Any]) -> int:
    """How many distinct devices the pod holds: its effective ``nvidia.com/gpu`` request."""
    return len({d for devices in _plan(pod, itertools.count()).values() for d in devices})


def assign(pod: Mapping[str, Any], free: Iterable[int]) -> PodDevices:
    """The pod's containers' devices, the lowest free indices first; raises DevicesUnavailable."""
    available = sorted(free)
    requested = pod_device_count(pod)
    if requested > len(available):
        raise DevicesUnavailable(requested, len(available))
    return _plan(pod, iter(available))


def visible_env(devices: list[int]) -> dict[str, str]:
    """What a container holding ``devices`` sees. ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA number the
    GPUs as nvidia-smi and the inventory do (its default puts the fastest first)."""
    if not devices:
        return dict(NO_GPU_ENV)
    ids = ",".join(str(d) for d in devices)
    return {"CUDA_VISIBLE_DEVICES": ids, "NVIDIA_VISIBLE_DEVICES": ids, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


class DeviceInventory:
    """The node's devices ``first..first+count-1`` and the pods holding some (pure: no files, no API)."""

    def __init__(self, count: int = 0, held: Mapping[str, PodDevices] | None = None, first: int = 0) -> None:
        self.count = count
        self.first = first
        self.held: dict[str, PodDevices] = {uid: dict(devices) for uid, devices in (held or {}).items()}

    def in_use(self) -> set[int]:
        return {d for devices in self.held.values() for ds in devices.values() for d in ds}

    def free(self) -> list[int]:
        """Free devices; one a pod holds beyond ``count`` (the Node shrank) stays held, never handed out."""
        return sorted(set(range(self.first, self.first + self.count)) - self.in_use())

    def allocate(self, uid: str, pod: Mapping[str, Any]) -> PodDevices:
        """The pod's devices: those it holds already, else new ones (DevicesUnavailable if too few)."""
        if uid not in self.held:
            self.held[uid] = assign(pod, self.free())
        return self.held[uid]

    def release(self, uid: str) -> None:
        self.held.pop(uid, None)


def read_record(pod_dir: PodDir) -> PodDevices | None:
    """The devices recorded in the pod's directory, None where there is no record."""
    record = poddir.read_json(pod_dir.devices).get(GPU)
    if not isinstance(record, dict):
        return None
    try:
        return {str(name): sorted(int(d) for d in devices) for name, devices in record.items()}
    except (TypeError, ValueError):
        log.warning("ignoring the unreadable device record %s", pod_dir.devices)
        return None


def node_gpus(node: Mapping[str, Any]) -> int:
    """The Node's allocatable ``nvidia.com/gpu`` (capacity where allocatable is missing)."""
    status = node.get("status") or {}
    raw = (status.get("allocatable") or status.get("capacity") or {}).get(GPU)
    amount = parse_quantity(raw) if raw is not None else None
    return int(amount) if amount is not None and amount > 0 else 0


class NodeDevices:
    """The process kubelet's device manager: the inventory, its records in the pod directories, and the
    Node it counts from. Allocation waits until `start` has rebuilt the inventory from the records."""

    def __init__(self, kube: KubeApi, state_dir: Path, node: str = FIRST_NODE, first: int = 0) -> None:
        """``node``: the Node it counts from; ``first``: its first device's index on the machine (the nodes of
        a cluster hold disjoint shares of the machine's GPUs)."""
        self.kube = kube
        self.state_dir = Path(state_dir)
        self.node = node
        self.first = first
        self.inventory = DeviceInventory(first=first)
        self.ready = asyncio.Event()

    def start(self, count: int) -> None:
        """Before any pod gets a device: every record on disk holds its devices (a record whose pod is gone
        is freed by the orphan cleanup; one of a finished pod by its worker)."""
        records = {d.uid: rec for d in PodDir.all(self.state_dir) if (rec := read_record(d)) is not None}
        self.inventory = DeviceInventory(count, records, self.first)
        if records:
            log.info("devices held by the pods found on disk: %s", records)
        self.ready.set()

    async def allocate(self, pod: Mapping[str, Any], pod_dir: PodDir) -> PodDevices:
        """The pod's devices, recorded in its directory before they are returned; raises
        DevicesUnavailable, after checking whether the Node's count changed since it was read."""
        if not needs_devices(pod):
            return {}
        await self.ready.wait()
        uid = pod["metadata"]["uid"]
        try:
            return self._hold(uid, pod, pod_dir)
        except DevicesUnavailable:
            count = await self._node_count()
            if count is None or count == self.inventory.count:
                raise
            log.info("the Node's %s changed from %d to %d", GPU, self.inventory.count, count)
            self.inventory.count = count
            return self._hold(uid, pod, pod_dir)

    def _hold(self, uid: str, pod: Mapping[str, Any], pod_dir: PodDir) -> PodDevices:
        known = uid in self.inventory.held
        devices = self.inventory.allocate(uid, pod)
        if not known:
            try:
                poddir.write_json(pod_dir.devices, {GPU: devices})
            except OSError:
                self.inventory.release(uid)
                raise
        return devices

    def release(self, uid: str, pod_dir: PodDir | None = None) -> None:
        """The pod's devices are free again (its record removed)."""
        if pod_dir is not None:
            pod_dir.devices.unlink(missing_ok=True)
        self.inventory.release(uid)

    async def _node_count(self) -> int | None:
        try:
            return node_gpus(await self.kube.get(NODES, None, self.node))
        except ApiError as exc:
            log.warning("could not read the Node's %s: %s", GPU, exc)
            return None
