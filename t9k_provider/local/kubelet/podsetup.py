"""What a pod needs before its containers start: its devices (GPUs, see `devices`), its network, its
volumes (ConfigMaps, Secrets, projected ServiceAccount tokens, memory-backed emptyDirs as tmpfs mounts) and
the context its containers' environment is expanded in. Part of the pod worker (`PodWorker` inherits it): a
missing object is a FailedMount or a CreateContainerConfigError, retried every ``CONFIG_RETRY_SECONDS`` as
the kubelet retries it; too few free devices keep the pod waiting (`DevicesUnavailable`), retried every
``DEVICE_RETRY_SECONDS``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import CONFIGMAPS, SECRETS, SERVICEACCOUNTS, ResourceType
from t9k_provider.local.kubelet import hosts, poddir, podenv, tmpfs, volumes
from t9k_provider.local.kubelet.devices import DevicesUnavailable, PodDevices, visible_env
from t9k_provider.local.kubelet.network import NetnsNetwork, PodNet
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.kubelet.podenv import ContainerConfigError, PodContext

CONFIG_RETRY_SECONDS = 2.0
DEVICE_RETRY_SECONDS = 1.0


class PodSetup:
    """The pod worker's preparation (its attributes are the worker's)."""

    pod: dict[str, Any]
    uid: str
    dir: PodDir
    kube: KubeApi
    kubelet: Any  # PodHost
    net: PodNet | None
    volume_paths: dict[str, Path]
    ctx: PodContext | None
    config_error: str | None
    mount_error: str | None
    prepare_after: float
    reported: set[tuple[str, str, int]]
    devices: PodDevices | None = None  # container -> the GPUs it holds, once allocated (`_allocate_devices`)
    device_error: str | None = None  # the last DevicesUnavailable event recorded

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"].get("namespace", "default"))

    async def _event(self, reason: str, message: str, container: str = "", *, warning: bool = False) -> None:
        raise NotImplementedError  # the worker's

    async def _setup_network(self) -> PodNet:
        spec = self.pod["spec"]
        network = self.kubelet.network
        if spec.get("hostNetwork"):
            return PodNet(ip=network.host_ip, netns=None, isolate=isinstance(network, NetnsNetwork))
        pod_net = await network.setup(self.uid)
        poddir.write_json(self.dir.network, {"ip": pod_net.ip, "netns": pod_net.netns})
        self.kubelet.hosts_changed()
        return pod_net

    async def _prepare(self) -> None:
        if not await self._allocate_devices():
            return
        cm_names, secret_names = podenv.referenced_names(self.pod)
        configmaps = {n: o for n in cm_names if (o := await self._fetch(CONFIGMAPS, n))}
        secrets = {n: o for n in secret_names if (o := await self._fetch(SECRETS, n))}
        assert self.net is not None
        tokens = {}
        for source in volumes.token_sources(self.pod):
            try:
                tokens[source.key] = await self._request_token(source)
            except ApiError as exc:
                await self._mount_failed(source.volume, f"failed to fetch token: {exc.message}")
                return
        try:
            await self._mount_memory_volumes()
            self.volume_paths = await asyncio.to_thread(
                volumes.materialize, self.pod, self.dir, configmaps, secrets, tokens
            )
        except volumes.MountError as exc:
            await self._mount_failed(exc.volume, str(exc))
            return
        except ContainerConfigError as exc:
            await self._config_failed(str(exc))
            return
        self.mount_error = None
        self.ctx = PodContext(
            configmaps=configmaps, secrets=secrets, pod_ip=self.net.ip, host_ip=self.kubelet.network.host_ip
        )
        self.config_error = None
        self.dir.resolv_conf.write_text(hosts.RESOLV_CONF)
        self.kubelet.write_hosts(self)

    async def _allocate_devices(self) -> bool:
        """The pod's GPUs, chosen (or found, after a kubelet restart) before anything else is prepared, as the
        device manager allocates them when it admits the pod. Where too few are free (their pods are still
        ending, or the Node shrank) the containers wait in ContainerCreating, a Warning event says why, and
        the worker tries again: the pod is not failed, as the kubelet's admission would fail it."""
        try:
            self.devices = await self.kubelet.devices.allocate(self.pod, self.dir)
        except DevicesUnavailable as exc:
            if self.device_error != str(exc):
                self.device_error = str(exc)
                await self._event("DevicesUnavailable", str(exc), warning=True)
            self.prepare_after = time.monotonic() + DEVICE_RETRY_SECONDS
            self.kubelet.queue_wakeup(self, DEVICE_RETRY_SECONDS)
            return False
        self.device_error = None
        return True

    def device_env(self, container: dict[str, Any]) -> dict[str, str]:
        """The container's CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES: they override its own env."""
        return visible_env((self.devices or {}).get(container["name"], []))

    def release_devices(self) -> None:
        """The pod ended (or is being deleted) and runs nothing: its GPUs are free for other pods."""
        self.kubelet.devices.release(self.uid, self.dir)
        self.devices = None

    async def _mount_memory_volumes(self) -> None:
        """Memory-backed emptyDirs become tmpfs mounts before any container starts; one the kubelet cannot
        mount stays on disk, which a Warning event says (once per volume)."""
        node_memory = self.kubelet.node_memory
        on_disk = await asyncio.to_thread(
            tmpfs.ensure_memory_volumes, self.pod, self.dir.volumes, node_memory
        )
        for volume, why in on_disk.items():
            if ("MemoryMediumUnavailable", volume, 0) not in self.reported:
                self.reported.add(("MemoryMediumUnavailable", volume, 0))
                message = (
                    f'emptyDir volume "{volume}" (medium: Memory) is a directory on disk, not a tmpfs: '
                    f"{why}; its sizeLimit is not enforced and what is written there is not counted as memory"
                )
                await self._event("MemoryMediumUnavailable", message, warning=True)

    async def release_memory_volumes(self) -> None:
        """A finished pod's tmpfs volumes are unmounted, as the kubelet tears down a terminated pod's volumes:
        their memory is freed."""
        if tmpfs.memory_volumes(self.pod):
            await asyncio.to_thread(tmpfs.unmount_under, self.dir.volumes)

    async def _fetch(self, rt: ResourceType, name: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get(rt, self.namespace, name)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def _request_token(self, source: volumes.TokenSource) -> str:
        """A token of the pod's ServiceAccount bound to the pod, from the API server's TokenRequest."""
        meta = self.pod["metadata"]
        spec: dict[str, Any] = {
            "expirationSeconds": source.expiration_seconds,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": self.uid},
        }
        if source.audience:
            spec["audiences"] = [source.audience]
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        account = self.pod["spec"].get("serviceAccountName") or "default"
        response = await self.kube.create(
            SERVICEACCOUNTS, self.namespace, request, name=account, subresource="token"
        )
        return str(response["status"]["token"])

    async def _mount_failed(self, volume: str, message: str) -> None:
        """A volume cannot be set up yet: the containers wait (ContainerCreating) and the kubelet retries."""
        text = f'MountVolume.SetUp failed for volume "{volume}" : {message}'
        self.config_error = None
        if self.mount_error != text:
            self.mount_error = text
            await self._event("FailedMount", text, warning=True)
        self.prepare_after = time.monotonic() + CONFIG_RETRY_SECONDS
        self.kubelet.queue_wakeup(self, CONFIG_RETRY_SECONDS)

    async def _config_failed(self, message: str) -> None:
        if self.config_error != message:
            await self._event("Failed", f"Error: {message}", warning=True)
        self.config_error = message
        self.ctx = None
        self.prepare_after = time.monotonic() + CONFIG_RETRY_SECONDS
        self.kubelet.queue_wakeup(self, CONFIG_RETRY_SECONDS)
