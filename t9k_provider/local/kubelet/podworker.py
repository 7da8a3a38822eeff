"""One pod on the process kubelet: its worker drives the pod's containers and reports the pod's status.

The worker is level-triggered from two sources of truth: the pod object (from the kubelet's informer) and
the container files in the pod directory (`poddir`, read through `runtime`). Each pass (`sync`) prepares
what the pod needs (network, volumes, hosts file), starts, restarts or stops containers per the pod's spec
and deletion, and writes the status through `pods/status` as a merge patch, only when it changed.
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
from typing import Any, Protocol

from t9k_provider.kube.api import ApiError
from t9k_provider.kube.resources import PODS
from t9k_provider.kube.timeouts import within
from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.kubelet import hosts, podenv, runtime, tmpfs, volumes
from t9k_provider.local.kubelet.cgroups import KubeletCgroups
from t9k_provider.local.kubelet.identity import container_identity
from t9k_provider.local.kubelet.network import PodNet
from t9k_provider.local.kubelet.poddir import AttemptFiles, ContainerDir, PodDir
from t9k_provider.local.kubelet.podenv import ContainerConfigError
from t9k_provider.local.kubelet.podprobing import PodProbes
from t9k_provider.local.kubelet.podsetup import PodSetup, SetupHost
from t9k_provider.local.kubelet.shim import Mount, ShimSpec
from t9k_provider.local.kubelet.status import (
    TERMINAL_PHASES,
    ContainerView,
    parse_time,
    pod_status,
    status_patch,
    terminate_unfinished,
    wants_restart,
)
from t9k_provider.local.machinery import events

log = logging.getLogger(__name__)

ACTIVE_TICK = 0.2
IDLE_TICK = 5.0
BACKOFF_ENV = "T9K_LOCAL_RESTART_BACKOFF"
BACKOFF_CAP = 300.0
START_GRACE = 30.0  # a launched shim gets this long to write its pid file before it counts as lost


def restart_backoff(finished_restarts: int) -> float:
    """CrashLoopBackOff delay before restart number `finished_restarts`: 0 for the first, then 10s
    doubling to 5m. The base can be lowered with T9K_LOCAL_RESTART_BACKOFF (seconds) for quick iterations.
    """
    if finished_restarts <= 1:
        return 0.0
    base = float(os.environ.get(BACKOFF_ENV, "10"))
    return min(BACKOFF_CAP, base * 2 ** (finished_restarts - 2))


class PodHost(SetupHost, Protocol):
    """What a pod worker needs of its kubelet (beyond what its `PodSetup` needs): declared here, where it is
    used, as Kubernetes' pod workers declare the ``podSyncer`` they drive, so that the worker depends on no
    kubelet class."""

    state_dir: Path  # the node's own directory, where its pods live
    node: str
    cgroups: KubeletCgroups | None

    def base_env(self, pod: dict[str, Any]) -> dict[str, str]:
        """What every container gets before its own variables."""

    def queue_wakeup(self, worker: PodWorker, delay: float) -> None:
        """Sync ``worker`` again after ``delay`` seconds."""

    def write_hosts(self, worker: PodWorker) -> None:
        """Write ``worker``'s pod's hosts file now."""


class PodWorker:
    """Drives one pod: composes its preparation (`PodSetup`: network, volumes, devices) and its probes
    (`PodProbes`), as the kubelet composes its volume, device and prober managers, and owns the containers'
    lifecycle and the status written from them."""

    def __init__(self, kubelet: PodHost, pod: dict[str, Any]) -> None:
        self.kubelet = kubelet
        self.kube = kubelet.kube
        self.pod = pod
        self.uid: str = pod["metadata"]["uid"]
        self.dir = PodDir.of(kubelet.state_dir, pod)
        self.wakeup = asyncio.Event()
        self.gone = False
        self.setup = PodSetup(kubelet, self.dir, self._event)
        self.probes = PodProbes(kubelet.state_dir, self._event, self._wake)
        self.create_errors: dict[str, str] = {}
        self.backing_off: dict[str, str] = {}  # container -> CrashLoopBackOff message until it restarts
        self.launched: dict[tuple[str, int], float] = {}
        self.termed: set[tuple[str, int]] = set()
        self.last_status: dict[str, Any] | None = None
        self.final: tuple[str, str, str] | None = None  # (phase, reason, message) decided by the kubelet
        self.start_time: str = (pod.get("status") or {}).get("startTime") or now_rfc3339()
        self.reported: set[tuple[str, str, int]] = set()  # (event reason, container, attempt) recorded
        self.deleted = False
        self.kill_deadline: float | None = None
        self.seen_grace: int | None = None
        self.start_events: asyncio.Future[None] | None = None  # the last start's events, being recorded

    @property
    def name(self) -> str:
        meta = self.pod["metadata"]
        return f"{meta.get('namespace')}/{meta['name']}"

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"].get("namespace", "default"))

    @property
    def net(self) -> PodNet | None:
        """The pod's address and network namespace, once set up (the kubelet writes hosts files from it)."""
        return self.setup.net

    def _wake(self, delay: float) -> None:
        self.kubelet.queue_wakeup(self, delay)

    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.wakeup.set()

    def mark_gone(self) -> None:
        self.gone = True
        self.wakeup.set()

    async def run(self) -> None:
        """Sync until the pod is gone. The wake-up is cleared before each pass, so a change that arrives
        during one (the pod's own deletion, often) starts the next at once instead of after a tick."""
        while not self.gone:
            self.wakeup.clear()
            try:
                busy = await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pod %s: sync failed", self.name)
                busy = True
            if self.gone:
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self.wakeup.wait(), ACTIVE_TICK if busy else IDLE_TICK)
        await self.teardown()

    async def teardown(self) -> None:
        """The pod object is gone: kill what is left, free its devices and network, remove the pod's cgroups
        and directory (its tmpfs volumes unmounted first)."""
        self.probes.cancel()
        runtime.kill_all(self.dir)
        self.setup.release_devices(self.uid)
        if self.kubelet.cgroups is not None:
            await asyncio.to_thread(self.kubelet.cgroups.remove_pod, self.uid)
        await self.kubelet.network.teardown(self.uid)
        await asyncio.to_thread(tmpfs.unmount_under, self.dir.path)
        await asyncio.to_thread(shutil.rmtree, self.dir.path, True)

    def _views(self) -> tuple[list[ContainerView], list[ContainerView]]:
        spec = self.pod["spec"]

        def view(c: dict[str, Any], waiting: str) -> ContainerView:
            container = self.dir.container(c["name"])
            items = runtime.attempts(container)
            if items and not items[-1].finished:
                last = self._check_lost(container, items[-1])
                items[-1:] = [last] if last else []
            msg = self.create_errors.get(c["name"]) or self.setup.config_error
            reason = waiting
            if c["name"] in self.create_errors:
                reason = "CreateContainerError"
            elif self.setup.config_error:
                reason = "CreateContainerConfigError"
            elif c["name"] in self.backing_off:
                reason, msg = "CrashLoopBackOff", self.backing_off[c["name"]]
            return ContainerView(spec=c, attempts=items, waiting_reason=reason, waiting_message=msg)

        inits = [view(c, "PodInitializing") for c in spec.get("initContainers") or []]
        init_done = all(v.succeeded() for v in inits)
        mains = [view(c, "ContainerCreating" if init_done else "PodInitializing") for c in spec["containers"]]
        return inits, mains

    def _check_lost(self, container: ContainerDir, attempt: runtime.Attempt) -> runtime.Attempt | None:
        launched = self.launched.get((container.name, attempt.n))
        if launched is not None and time.monotonic() - launched < START_GRACE and attempt.pid is None:
            return attempt  # still starting
        files = container.attempt(attempt.n)
        if attempt.pid is not None and runtime.shim_alive(files):
            return attempt
        return runtime.reap_lost(files, attempt)

    async def sync(self) -> bool:
        """One reconcile pass; returns True while something is running or pending (poll faster)."""
        pod = self.pod
        meta = pod["metadata"]
        recorded_phase = (pod.get("status") or {}).get("phase")
        terminal = recorded_phase in TERMINAL_PHASES or self.final is not None
        if terminal and self.final is None:
            # Finished (possibly before this kubelet started): make sure nothing runs, release the network.
            inits, mains = self._views() if self.dir.path.exists() else ([], [])
            self._kill_running(inits + mains)
            self.setup.release_devices(self.uid)
            if meta.get("deletionTimestamp"):
                await self._final_delete()
            await self.setup.release_memory_volumes(pod)
            if self.setup.net is not None or self.dir.network.exists():
                await self.kubelet.network.teardown(self.uid)
                self.dir.network.unlink(missing_ok=True)
                self.setup.net = None
                self.kubelet.hosts_changed()
            return False
        self.dir.path.mkdir(parents=True, exist_ok=True)
        deleting = bool(meta.get("deletionTimestamp"))
        due = not deleting and not terminal and self.setup.due()
        net, retry = await self.setup.network_and_prepare(pod, self.uid, due)
        if due and retry is not None:
            self._wake(retry)
        elif due:
            self.kubelet.write_hosts(self)

        runtime.reap_children()
        inits, mains = self._views()
        await self._report_start_errors(inits + mains)
        restart_pending: set[str] = set()
        if deleting:
            await self._terminate(inits + mains)
            restart_pending = set(self.backing_off)  # a restart count never goes back (Job backoffLimit)
        elif self.final is None:
            await self._check_deadline(inits + mains)
            if self.final is None and self.setup.ctx is not None:
                restart_pending = await self._advance(inits, mains)
            inits, mains = self._views()
            await self.probes.run(pod, net.ip, mains, self._current_files)
        else:
            self._kill_running(inits + mains)
        self.probes.show(mains)

        status = pod_status(
            pod,
            inits,
            mains,
            now=now_rfc3339(),
            pod_ip=net.ip,
            host_ip=self.kubelet.network.host_ip,
            start_time=self.start_time,
            restart_pending=restart_pending,
        )
        if recorded_phase in TERMINAL_PHASES:
            status["phase"] = recorded_phase  # terminal phases are sticky
        running = any(v.current and v.current.running for v in inits + mains)
        if self.final is not None:
            status["phase"], status["reason"], status["message"] = self.final
            if not running:
                terminate_unfinished(status)
        if not running and (deleting or status["phase"] in TERMINAL_PHASES):
            # before the API says the pod ended: its room is free only then
            self.setup.release_devices(self.uid)
        if status["phase"] in TERMINAL_PHASES and self.start_events is not None:
            await self.start_events  # a container's start is told before its pod's end
        await self._write_status(status)
        if deleting and not running:
            await self._final_delete()
            return False
        return running or status["phase"] not in TERMINAL_PHASES

    # -- containers

    async def _advance(self, inits: list[ContainerView], mains: list[ContainerView]) -> set[str]:
        """Start the next init container, or the main containers; restart per policy. Returns names whose
        finished attempt is waiting for a restart (reported as waiting CrashLoopBackOff /
        ContainerCreating)."""
        policy = self.pod["spec"].get("restartPolicy", "Always")
        pending: set[str] = set()
        for v in inits:
            cur = v.current
            if cur is None:
                await self._start(v, 0)
                return pending
            if cur.running:
                return pending
            if cur.exit_code == 0:
                continue
            if policy == "Never":
                return pending
            await self._restart(v, pending)
            return pending
        for v in mains:
            cur = v.current
            if cur is None:
                await self._start(v, 0)
            elif wants_restart(policy, cur):
                await self._restart(v, pending)
        return pending

    async def _restart(self, v: ContainerView, pending: set[str]) -> None:
        cur = v.current
        assert cur is not None
        delay = restart_backoff(cur.n + 1)
        finished_at = parse_time(cur.finished_at) or time.time()
        wait = finished_at + delay - time.time()
        if wait > 0:
            pending.add(v.name)
            pod_ref = f"{self.pod['metadata']['name']}_{self.pod['metadata'].get('namespace')}({self.uid})"
            self.backing_off[v.name] = (
                f"back-off {int(delay)}s restarting failed container={v.name} pod={pod_ref}"
            )
            if ("BackOff", v.name, cur.n) not in self.reported:
                self.reported.add(("BackOff", v.name, cur.n))
                message = f"Back-off restarting failed container {v.name} in pod {pod_ref}"
                await self._event("BackOff", message, v.name, warning=True)
            self.kubelet.queue_wakeup(self, wait)
            return
        self.backing_off.pop(v.name, None)
        await self._start(v, cur.n + 1)

    async def _event(self, reason: str, message: str, container: str = "", *, warning: bool = False) -> None:
        """Record an event from the kubelet about the pod, or about one of its containers."""
        field_path = None
        if container:
            init = any(c["name"] == container for c in self.pod["spec"].get("initContainers") or [])
            field_path = f"spec.{'initContainers' if init else 'containers'}{{{container}}}"
        await events.record(
            self.kube, self.pod, reason, message, component="kubelet", host=self.kubelet.node,
            event_type="Warning" if warning else "Normal", field_path=field_path,
        )  # fmt: skip

    def _shim_spec(self, c: dict[str, Any]) -> tuple[ShimSpec, str | None]:
        """What the shim runs for container `c` (the container's runtime spec), and which part of its
        securityContext cannot be applied (see `identity`); raises ContainerConfigError or _CreateError when
        the container cannot be set up."""
        net, ctx = self.setup.net, self.setup.ctx
        assert ctx is not None and net is not None
        k8s_env = podenv.container_env(self.pod, c, ctx)
        if not c.get("command"):
            # args alone would run with the image's entrypoint, which the local cluster cannot know.
            raise _CreateError(
                "failed to generate container spec: no command specified "
                "(the local cluster ignores images and their entrypoints; set command)"
            )
        argv = podenv.container_argv(c, k8s_env)
        identity, not_applied = container_identity(self.pod, c)
        mounts = volumes.container_mounts(c, self.setup.volume_paths, k8s_env.get) if net.isolate else []
        if net.isolate:
            # The kubelet's hosts file, and a resolv.conf without nameservers: DNS lookups can only go to the
            # loopback address, never to the host's resolver (pod traffic stays local).
            managed = {"/etc/hosts": self.dir.etc_hosts, "/etc/resolv.conf": self.dir.resolv_conf}
            taken = {m.target for m in mounts}
            mounts += [Mount(str(path), target) for target, path in managed.items() if target not in taken]
        return ShimSpec(
            argv=argv,
            env={**self.kubelet.base_env(self.pod), **k8s_env, **self.setup.device_env(c)},
            log_path="",
            working_dir=c.get("workingDir") or None,
            netns=net.netns,
            hostname=hosts.pod_hostname(self.pod) if net.isolate else None,
            mounts=mounts,
            identity=identity,
        ), not_applied

    async def _start(self, v: ContainerView, n: int) -> None:
        try:
            spec, not_applied = self._shim_spec(v.spec)
            spec.cgroups = await asyncio.to_thread(self._container_cgroup, v.spec, n)
        except ContainerConfigError as exc:
            self._wake(await self.setup.config_failed(str(exc)))
            return
        except _CreateError as exc:
            if v.name not in self.create_errors:
                self.create_errors[v.name] = str(exc)
                await self._event("Failed", f"Error: {exc}", v.name, warning=True)
            return
        self.create_errors.pop(v.name, None)
        if not_applied and ("IdentityNotApplied", v.name, 0) not in self.reported:
            self.reported.add(("IdentityNotApplied", v.name, 0))
            await self._event("IdentityNotApplied", not_applied, v.name, warning=True)
        shim = await asyncio.to_thread(runtime.launch, self.dir.container(v.name).attempt(n), spec)
        runtime.on_exit(shim, self.wakeup.set)
        self.launched[(v.name, n)] = time.monotonic()
        image = v.spec.get("image", "")
        said = [("Pulled", f'Container image "{image}" already present on machine')]
        said += [(reason, f"{reason} container {v.name}") for reason in ("Created", "Started")]
        # Said while the container runs: upstream's event recorder never holds a start up either.
        self.start_events = asyncio.ensure_future(self._say(said, v.name, self.start_events))

    async def _say(self, said: list[tuple[str, str]], name: str, after: asyncio.Future[None] | None) -> None:
        if after is not None:
            await asyncio.wait([after])  # a restart's events come after those of the start before
        for reason, message in said:
            await self._event(reason, message, name)

    def _container_cgroup(self, c: dict[str, Any], n: int) -> list[str]:
        """The cgroup of attempt `n` of container `c`, with the container's limits (none where the kubelet
        runs without cgroups)."""
        if self.kubelet.cgroups is None:
            return []
        try:
            return self.kubelet.cgroups.create_container(self.pod, c, n)
        except OSError as exc:
            raise _CreateError(f"failed to create the container's cgroup: {exc}") from exc

    async def _report_start_errors(self, views: list[ContainerView]) -> None:
        """A process that could not be exec'd (exit 128, StartError) gets a Warning event, once."""
        for v in views:
            cur = v.current
            if cur is None or cur.reason != "StartError" or ("StartError", v.name, cur.n) in self.reported:
                continue
            self.reported.add(("StartError", v.name, cur.n))
            message = f"Error: failed to start container {v.name!r}: {cur.message}"
            await self._event("Failed", message, v.name, warning=True)

    def _current_files(self, v: ContainerView) -> AttemptFiles:
        assert v.current is not None
        return self.dir.container(v.name).attempt(v.current.n)

    def _kill_running(self, views: list[ContainerView]) -> None:
        for v in views:
            if v.current is not None and v.current.running:
                runtime.signal_container(self._current_files(v), signal.SIGKILL)

    async def _terminate(self, views: list[ContainerView]) -> None:
        """Graceful deletion: SIGTERM each running container once, SIGKILL when the grace period is over.

        As in the kubelet, the grace period (`deletionGracePeriodSeconds`) counts from when the deletion is
        seen (`deletionTimestamp` has second precision); a second DELETE may only shorten it."""
        meta = self.pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is not None and grace != self.seen_grace:
            self.seen_grace = grace
            candidate = time.time() + float(grace)
            self.kill_deadline = (
                candidate if self.kill_deadline is None else min(self.kill_deadline, candidate)
            )
        elif self.kill_deadline is None:
            self.kill_deadline = parse_time(meta.get("deletionTimestamp")) or time.time()
        deadline = self.kill_deadline
        for v in views:
            cur = v.current
            if cur is None or not cur.running:
                continue
            key = (v.name, cur.n)
            if key not in self.termed:
                self.termed.add(key)
                await self._event("Killing", f"Stopping container {v.name}", v.name)
                runtime.signal_container(self._current_files(v), signal.SIGTERM)
            if time.time() >= deadline:
                runtime.signal_container(self._current_files(v), signal.SIGKILL)
        self.kubelet.queue_wakeup(self, max(0.0, deadline - time.time()))

    async def _check_deadline(self, views: list[ContainerView]) -> None:
        limit = self.pod["spec"].get("activeDeadlineSeconds")
        started = parse_time(self.start_time)
        if limit is None or started is None or time.time() < started + float(limit):
            if limit is not None and started is not None:
                self.kubelet.queue_wakeup(self, max(0.0, started + float(limit) - time.time()))
            return
        self.final = (
            "Failed",
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline",
        )
        await self._event("DeadlineExceeded", self.final[2])
        self._kill_running(views)

    async def _write_status(self, status: dict[str, Any]) -> None:
        """A strategic merge patch (``status_patch``): the conditions the kubelet owns replace theirs by type,
        those others own (DisruptionTarget, the scheduler's) stay, as the kubelet's status manager patches."""
        if status == self.last_status:
            return
        name = self.pod["metadata"]["name"]
        try:
            await self.kube.patch(
                PODS, self.namespace, name, status_patch(status), subresource="status", strategic=True
            )
        except ApiError as exc:
            if exc.status != 404:
                raise
        self.last_status = status

    async def _final_delete(self) -> None:
        if self.deleted:
            return
        try:
            await self.kube.delete(
                PODS, self.namespace, self.pod["metadata"]["name"], uid=self.uid, grace_period_seconds=0
            )
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise
        self.deleted = True


class _CreateError(Exception):
    """The container cannot be created at all (`CreateContainerError`)."""
