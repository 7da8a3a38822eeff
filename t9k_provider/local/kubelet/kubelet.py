"""The process kubelet: runs the pods bound to the node as local processes and reports their status.

It gives every pod bound to the node a `PodWorker` (one task each, see `podworker`), keeps the pods' hosts
files current as pods and services change, and after a crash removes what belongs to pods that are gone. A
stopping kubelet stops its containers, unless told to leave them to the next one.

No failure ends a loop of the kubelet: a pod worker that fails (its teardown, say) is started again for the
same pod, a hosts file that could not be written is written again after a backoff, and a start that failed
(the Node unreachable) is retried by the agents' supervisor, which runs ``run`` again.

Resource limits are enforced through the kubelet's cgroup (`cgroups`) where one can be created; the Node's
`RESOURCE_LIMITS_ANNOTATION` says which hierarchy enforces them, or why nothing does. GPUs are handed out by
`devices`, which counts them from the Node's allocatable ``nvidia.com/gpu``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import NODE_INDEX, Informer, object_key
from t9k_provider.kube.resources import NODES
from t9k_provider.local.kubelet import cgroups, hosts, podenv, runtime, tmpfs
from t9k_provider.local.kubelet.cgroups import KubeletCgroups
from t9k_provider.local.kubelet.devices import NodeDevices, node_gpus
from t9k_provider.local.kubelet.network import HostNetwork, NetnsNetwork
from t9k_provider.local.kubelet.poddir import PodDir, pods_root
from t9k_provider.local.kubelet.podworker import PodWorker
from t9k_provider.local.kubelet.status import TERMINAL_PHASES
from t9k_provider.local.machinery import workloop
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.local.machinery.quantity import parse_quantity

log = logging.getLogger(__name__)

RESOURCE_LIMITS_ANNOTATION = "t9k-local.tensorstack.dev/resource-limits"
#: A hosts file that could not be written is tried again after this long, doubling up to HOSTS_RETRY_MAX.
HOSTS_RETRY_BASE = 0.5
HOSTS_RETRY_MAX = 30.0


def machine_memory() -> int:
    """The machine's memory in bytes (the Node advertises it unless told otherwise)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class ProcessKubelet:
    """The kubelet of node ``node``: ``state_dir`` is that node's own directory (`nodes.node_root`), where its
    pods live; its devices are the machine's GPUs ``first_device`` on (a node's share of them)."""

    def __init__(
        self,
        kube: KubeApi,
        state_dir: Path,
        network: HostNetwork | NetnsNetwork,
        pods: Informer,
        services: Informer,
        node: str = FIRST_NODE,
        first_device: int = 0,
    ) -> None:
        self.kube = kube
        self.state_dir = Path(state_dir)
        self.node = node
        self.network = network
        self.pods = pods
        self.services = services
        self.workers: dict[str, PodWorker] = {}
        self.cgroups: KubeletCgroups | None = None
        self.node_memory = machine_memory()  # then the Node's allocatable memory (`_setup_cgroups`)
        self.devices = NodeDevices(kube, self.state_dir, node, first_device)  # counted from the Node, too
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._started = False  # the start (`_start`) is done: a run after a failure skips it
        self._stopping = False  # stopping its containers: a pod that arrives now is the next kubelet's
        self._hosts_dirty = asyncio.Event()
        self._hosts_failures = 0
        self._host_signatures: dict[tuple[str, str], tuple[Any, ...] | None] = {}
        server = urlparse(kube.host)
        self._api_host = server.hostname or "127.0.0.1"
        self._api_port = str(server.port or (443 if server.scheme == "https" else 80))

    def base_env(self, pod: dict[str, Any]) -> dict[str, str]:
        """Variables every container gets before its own: what the image/runtime would provide."""
        return {
            "PATH": podenv.pod_path(),
            "HOME": os.environ.get("HOME", "/root"),
            "HOSTNAME": hosts.pod_hostname(pod),
            # on the netns bridge the host (and the API server, which listens there too) is the bridge address
            "KUBERNETES_SERVICE_HOST": self.network.host_ip
            if self.network.mode == "netns"
            else self._api_host,
            "KUBERNETES_SERVICE_PORT": self._api_port,
        }

    # -- informer callbacks

    def on_pod(self, old: dict[str, Any] | None, pod: dict[str, Any] | None) -> None:
        key = object_key(pod or old or {})
        for uid, worker in list(self.workers.items()):
            wkey = (worker.pod["metadata"].get("namespace", ""), worker.pod["metadata"]["name"])
            if wkey == key and (pod is None or pod["metadata"]["uid"] != uid):
                worker.mark_gone()
        signature = hosts.signature(pod) if pod is not None else None
        if self._host_signatures.get(key) != signature:  # most pod updates do not change any hosts file
            self._host_signatures[key] = signature
            self.hosts_changed()
        if pod is None or pod["spec"].get("nodeName") != self.node:
            return
        uid = pod["metadata"]["uid"]
        if uid in self.workers:
            self.workers[uid].update(pod)
            return
        if self._stopping:
            return
        worker = PodWorker(self, pod)
        self.workers[uid] = worker
        task = asyncio.get_running_loop().create_task(self._run_worker(worker))
        self.tasks[uid] = task

    async def _run_worker(self, worker: PodWorker) -> None:
        try:
            await workloop.supervise(f"pod worker {worker.name}", worker.run, ends=True)
        finally:
            self.workers.pop(worker.uid, None)
            self.tasks.pop(worker.uid, None)

    def on_service(self, _old: dict[str, Any] | None, _new: dict[str, Any] | None) -> None:
        self.hosts_changed()

    def queue_wakeup(self, worker: PodWorker, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay + 0.01, worker.wakeup.set)

    # -- hosts files

    def hosts_changed(self) -> None:
        self._hosts_dirty.set()

    def _pod_ips(self) -> list[tuple[dict[str, Any], str]]:
        out = []
        for pod in self.pods.items():
            worker = self.workers.get(pod["metadata"]["uid"])
            ip = worker.net.ip if worker and worker.net else (pod.get("status") or {}).get("podIP", "")
            if ip and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                out.append((pod, ip))
        return out

    def write_hosts(self, worker: PodWorker, pod_ips: list[tuple[dict[str, Any], str]] | None = None) -> None:
        """Once its pod is gone, never: its teardown removes the directory in a thread, and a file written
        meanwhile would keep it for good."""
        if worker.gone or worker.net is None or not worker.dir.path.exists():
            return
        content = hosts.render(worker.pod, worker.net.ip, pod_ips or self._pod_ips(), self.services.items())
        hosts.write_in_place(worker.dir.etc_hosts, content)

    async def _hosts_loop(self) -> None:
        while True:
            await self._hosts_dirty.wait()
            await asyncio.sleep(0.05)  # coalesce bursts
            self._hosts_dirty.clear()
            pod_ips = self._pod_ips()
            failed = False
            for worker in list(self.workers.values()):
                try:
                    self.write_hosts(worker, pod_ips)
                except Exception:
                    failed = True
                    log.exception("pod %s: writing its hosts file failed", worker.name)
            if failed:  # every file is rewritten from the current pods and services, after a backoff
                delay = min(HOSTS_RETRY_BASE * 2**self._hosts_failures, HOSTS_RETRY_MAX)
                self._hosts_failures += 1
                log.warning("hosts files: writing again in %.1fs", delay)
                asyncio.get_running_loop().call_later(delay, self.hosts_changed)
            else:
                self._hosts_failures = 0

    # -- lifecycle

    async def run(self, stop_pods_on_exit: bool) -> None:
        """Start (once: a run after a failure skips a start that was done), then keep the hosts files
        current until cancelled; only cancellation (the agents stopping) stops the pods' workers, and their
        containers with ``stop_pods_on_exit``."""
        try:
            if not self._started:
                await self._start()
                self._started = True
            await self._hosts_loop()
        except asyncio.CancelledError:
            self._stopping = True  # the informers deliver until after this stop: no new pod starts now
            tasks = list(self.tasks.values())
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            if stop_pods_on_exit:
                await self._stop_everything()
            raise

    async def _start(self) -> None:
        node = await self._setup_cgroups()
        self.devices.start(node_gpus(node))  # before the first allocation, which waits for it
        await self.pods.synced.wait()
        await self.services.synced.wait()
        await self._cleanup_orphans()

    async def _setup_cgroups(self) -> dict[str, Any]:
        """Find where limits can be enforced, say so once (log and Node annotation); runs before any pod.
        Returns the Node ({} if it could not be written)."""
        self.cgroups, why = await asyncio.to_thread(cgroups.detect, self.state_dir)
        if self.cgroups is None:
            log.warning("resource limits are not enforced: %s", why)
            verdict = f"not enforced: {why}"
        else:
            log.info("resource limits are enforced through %s", self.cgroups.describe())
            verdict = f"enforced: {self.cgroups.describe()}"
        try:
            patch = {"metadata": {"annotations": {RESOURCE_LIMITS_ANNOTATION: verdict}}}
            node = await self.kube.patch(NODES, None, self.node, patch)
        except ApiError as exc:
            log.warning("could not record on the Node whether resource limits are enforced: %s", exc)
            return {}
        status = node.get("status") or {}
        memory = ((status.get("allocatable") or status.get("capacity") or {}).get("memory")) or ""
        if (parsed := parse_quantity(memory)) is not None and parsed > 0:
            self.node_memory = int(parsed)  # what `t9k-local up --memory` advertises, if given
        return node

    async def _cleanup_orphans(self) -> None:
        """After a crash: pod directories and networks whose pod no longer exists are removed.

        Pods keep arriving while this runs (their workers create directories and networks), so what exists
        is read after what is on disk was listed, and counts every pod with a worker: a pod is never taken
        for an orphan because it came after the check."""
        entries = PodDir.all(self.state_dir)
        live = self._live_uids()
        for entry in entries:
            if entry.uid not in live:
                log.info("removing pod directory %s: the pod no longer exists", entry.path.name)
                runtime.kill_all(entry)
                self.devices.release(entry.uid)
                await asyncio.to_thread(tmpfs.unmount_under, entry.path)
                await asyncio.to_thread(shutil.rmtree, entry.path, True)
        if self.cgroups is not None:
            await asyncio.to_thread(self.cgroups.remove_orphans, self._live_uids())
        await self.network.cleanup_stale(self._live_uids())

    def _live_uids(self) -> set[str]:
        return {p["metadata"]["uid"] for p in self.pods.by_index(NODE_INDEX, self.node)} | set(self.workers)

    async def _stop_everything(self) -> None:
        """Agents stopping: stop every container (SIGTERM, then SIGKILL after a short grace), unmount the
        memory-backed volumes (a next kubelet mounts them afresh) and remove the networks. A container its
        shim is still starting (no pid yet) is waited for within that grace and stopped once it runs: removed
        under it, its cgroups and network would fail its start (`StartError`)."""
        dirs = PodDir.all(self.state_dir)
        termed: set[Path] = set()
        deadline = time.monotonic() + 3.0
        try:
            while pending := [f for d in dirs for f in runtime.running(d)]:
                for files in pending:
                    if files.pid not in termed and runtime.signal_container(files, signal.SIGTERM):
                        termed.add(files.pid)
                if time.monotonic() >= deadline:
                    break
                await asyncio.sleep(0.1)
            for d in dirs:
                runtime.kill_all(d)
            await asyncio.to_thread(tmpfs.unmount_under, pods_root(self.state_dir))  # memory volumes: freed
            if self.cgroups is not None:
                await asyncio.to_thread(self.cgroups.remove)
        finally:  # the networks go even when a step above failed or the stop was cancelled again
            for d in dirs:
                await self.network.teardown(d.uid)
            await self.network.cleanup_stale(set())  # any left: a pod set up after the listing
            await self.network.close()
