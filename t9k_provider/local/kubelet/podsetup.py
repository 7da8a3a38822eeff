"""What a pod needs before its containers start: its devices (GPUs, see `devices`), its network, its
volumes (ConfigMaps, Secrets, projected ServiceAccount tokens, memory-backed emptyDirs as tmpfs mounts) and
the context its containers' environment is expanded in, as the kubelet's volume and device managers prepare
them. A missing object is a FailedMount or a CreateContainerConfigError, retried every
``CONFIG_RETRY_SECONDS`` as the kubelet retries it; too few free devices keep the pod waiting
(`DevicesUnavailable`), retried every ``DEVICE_RETRY_SECONDS``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Protocol

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import CONFIGMAPS, SECRETS, SERVICEACCOUNTS, ResourceType
from t9k_provider.local.kubelet import hosts, poddir, podenv, tmpfs, volumes
from t9k_provider.local.kubelet.devices import DevicesUnavailable, NodeDevices, PodDevices, visible_env
from t9k_provider.local.kubelet.network import HostNetwork, NetnsNetwork, PodNet
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.kubelet.podenv import ContainerConfigError, PodContext

CONFIG_RETRY_SECONDS = 2.0
DEVICE_RETRY_SECONDS = 1.0


class EventRecorder(Protocol):
    """Records an event about the pod (or one of its containers) as the kubelet."""

    async def __call__(
        self, reason: str, message: str, container: str = "", *, warning: bool = False
    ) -> None: ...


class SetupHost(Protocol):
    """What preparing a pod needs of its kubelet."""

    kube: KubeApi
    network: HostNetwork | NetnsNetwork
    node_memory: int  # bytes: what a memory-backed emptyDir may hold at most
    devices: NodeDevices

    def hosts_changed(self) -> None:
        """Pod addresses changed: rewrite the hosts files."""
        ...


class PodSetup:
    """One pod's preparation: what it holds (network, volumes, devices, context) and why it waits."""

    def __init__(self, host: SetupHost, pod_dir: PodDir, record: EventRecorder) -> None:
        self.host = host
        self.dir = pod_dir
        self.record = record
        self.net: PodNet | None = None
        self.volume_paths: dict[str, Path] = {}
        self.ctx: PodContext | None = None  # set once the pod is prepared
        self.config_error: str | None = None  # CreateContainerConfigError's message, while it holds
        self.mount_error: str | None = None  # the last FailedMount event recorded
        self.device_error: str | None = None  # the last DevicesUnavailable event recorded
        self.devices: PodDevices | None = None  # container -> the GPUs it holds, once allocated
        self.retry_at = 0.0  # monotonic time of the next try after a failed one
        self.warned_volumes: set[str] = set()  # memory volumes left on disk, said once each

    def due(self) -> bool:
        return self.ctx is None and time.monotonic() >= self.retry_at

    async def network(self, pod: dict[str, Any], uid: str) -> PodNet:
        """The pod's address and network namespace (set up once)."""
        if self.net is None:
            if pod["spec"].get("hostNetwork"):
                network = self.host.network
                self.net = PodNet(ip=network.host_ip, netns=None, isolate=isinstance(network, NetnsNetwork))
            else:
                self.net = await self.host.network.setup(uid)
                poddir.write_json(self.dir.network, {"ip": self.net.ip, "netns": self.net.netns})
                self.host.hosts_changed()
        return self.net

    async def network_and_prepare(
        self, pod: dict[str, Any], uid: str, due: bool
    ) -> tuple[PodNet, float | None]:
        """The pod's network and, when ``due``, the rest prepared meanwhile (``prepare``'s answer; None when
        not due): both are on the pod's way to its start, and only its context waits for the address."""
        network = asyncio.ensure_future(self.network(pod, uid))
        if not due:
            return await network, None
        net, retry = await asyncio.gather(network, self.prepare(pod, uid, network))
        return net, retry

    async def prepare(self, pod: dict[str, Any], uid: str, network: Awaitable[PodNet]) -> float | None:
        """Devices, objects, volumes and context (``network``: the pod's, being set up meanwhile); None once
        prepared, else the seconds after which to try again (the reason is recorded: an event, and
        `config_error` for the containers' waiting state)."""
        if (wait := await self._allocate_devices(pod)) is not None:
            return wait
        namespace = pod["metadata"].get("namespace", "default")
        cm_names, secret_names = podenv.referenced_names(pod)
        configmaps = {n: o for n in cm_names if (o := await self._fetch(CONFIGMAPS, namespace, n))}
        secrets = {n: o for n in secret_names if (o := await self._fetch(SECRETS, namespace, n))}
        tokens = {}
        for source in volumes.token_sources(pod):
            try:
                tokens[source.key] = await self._request_token(pod, uid, source)
            except ApiError as exc:
                return await self._mount_failed(source.volume, f"failed to fetch token: {exc.message}")
        try:
            await self._mount_memory_volumes(pod)
            self.volume_paths = await asyncio.to_thread(
                volumes.materialize, pod, self.dir, configmaps, secrets, tokens
            )
        except volumes.MountError as exc:
            return await self._mount_failed(exc.volume, str(exc))
        except ContainerConfigError as exc:
            return await self.config_failed(str(exc))
        self.mount_error = None
        net = await network
        self.ctx = PodContext(
            configmaps=configmaps, secrets=secrets, pod_ip=net.ip, host_ip=self.host.network.host_ip
        )
        self.config_error = None
        self.dir.resolv_conf.write_text(hosts.RESOLV_CONF)
        return None

    async def _allocate_devices(self, pod: dict[str, Any]) -> float | None:
        """The pod's GPUs, chosen (or found, after a kubelet restart) before anything else is prepared, as the
        device manager allocates them when it admits the pod. Where too few are free (their pods are still
        ending, or the Node shrank) the containers wait in ContainerCreating, a Warning event says why, and
        the worker tries again: the pod is not failed, as the kubelet's admission would fail it."""
        try:
            self.devices = await self.host.devices.allocate(pod, self.dir)
        except DevicesUnavailable as exc:
            if self.device_error != str(exc):
                self.device_error = str(exc)
                await self.record("DevicesUnavailable", str(exc), warning=True)
            self.retry_at = time.monotonic() + DEVICE_RETRY_SECONDS
            return DEVICE_RETRY_SECONDS
        self.device_error = None
        return None

    def device_env(self, container: dict[str, Any]) -> dict[str, str]:
        """The container's CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES: they override its own env."""
        return visible_env((self.devices or {}).get(container["name"], []))

    def release_devices(self, uid: str) -> None:
        """The pod ended (or is being deleted) and runs nothing: its GPUs are free for other pods."""
        self.host.devices.release(uid, self.dir)
        self.devices = None

    async def _mount_memory_volumes(self, pod: dict[str, Any]) -> None:
        """Memory-backed emptyDirs become tmpfs mounts before any container starts; one the kubelet cannot
        mount stays on disk, which a Warning event says (once per volume)."""
        on_disk = await asyncio.to_thread(
            tmpfs.ensure_memory_volumes, pod, self.dir.volumes, self.host.node_memory
        )
        for volume, why in on_disk.items():
            if volume not in self.warned_volumes:
                self.warned_volumes.add(volume)
                message = (
                    f'emptyDir volume "{volume}" (medium: Memory) is a directory on disk, not a tmpfs: '
                    f"{why}; its sizeLimit is not enforced and what is written there is not counted as memory"
                )
                await self.record("MemoryMediumUnavailable", message, warning=True)

    async def release_memory_volumes(self, pod: dict[str, Any]) -> None:
        """A finished pod's tmpfs volumes are unmounted, as the kubelet tears down a terminated pod's volumes:
        their memory is freed."""
        if tmpfs.memory_volumes(pod):
            await asyncio.to_thread(tmpfs.unmount_under, self.dir.volumes)

    async def _fetch(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.host.kube.get(rt, namespace, name)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def _request_token(self, pod: dict[str, Any], uid: str, source: volumes.TokenSource) -> str:
        """A token of the pod's ServiceAccount bound to the pod, from the API server's TokenRequest."""
        meta = pod["metadata"]
        spec: dict[str, Any] = {
            "expirationSeconds": source.expiration_seconds,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": uid},
        }
        if source.audience:
            spec["audiences"] = [source.audience]
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        account = pod["spec"].get("serviceAccountName") or "default"
        namespace = meta.get("namespace", "default")
        response = await self.host.kube.create(
            SERVICEACCOUNTS, namespace, request, name=account, subresource="token"
        )
        return str(response["status"]["token"])

    async def _mount_failed(self, volume: str, message: str) -> float:
        """A volume cannot be set up yet: the containers wait (ContainerCreating) and the kubelet retries."""
        text = f'MountVolume.SetUp failed for volume "{volume}" : {message}'
        self.config_error = None
        if self.mount_error != text:
            self.mount_error = text
            await self.record("FailedMount", text, warning=True)
        self.retry_at = time.monotonic() + CONFIG_RETRY_SECONDS
        return CONFIG_RETRY_SECONDS

    async def config_failed(self, message: str) -> float:
        """A container cannot be configured (CreateContainerConfigError): said once per message, retried."""
        if self.config_error != message:
            await self.record("Failed", f"Error: {message}", warning=True)
        self.config_error = message
        self.ctx = None
        self.retry_at = time.monotonic() + CONFIG_RETRY_SECONDS
        return CONFIG_RETRY_SECONDS
