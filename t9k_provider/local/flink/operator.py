"""The local flink-operator: reconciles FlinkClusters into a ConfigMap, a JobManager Service and pods, and
reports ``status.state`` from what it observes, the JobManager's REST API included.

It runs with the node agents of a process-kubelet cluster (pods are real processes there). The REST API is
read over the pod network (``http://<JobManager pod IP>:<ui port>/taskmanagers``), as the real operator reads
it through the Service. Deleting a FlinkCluster needs nothing from here: its objects carry ownerReferences
and the garbage collector removes them, and the kubelet stops the Flink processes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import OWNER_INDEX, Informer, object_key
from t9k_provider.kube.resources import CONFIGMAPS, PODS, SERVICES, ResourceType
from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.flink import cluster, dist
from t9k_provider.local.machinery import events, workloop
from t9k_provider.local.machinery.statuswrites import patch_status

COMPONENT = "flink-operator"
PROBE_TIMEOUT = aiohttp.ClientTimeout(total=2.0)
#: How often a cluster that is not Running yet is looked at again (its JobManager starts in seconds).
PENDING_RESYNC = 1.0


def is_flink_object(obj: dict[str, Any]) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get("app") == "flink"


class FlinkOperator:
    def __init__(
        self, kube: KubeApi, clusters: Informer, pods: Informer, services: Informer, configmaps: Informer
    ) -> None:
        """``pods`` must be indexed by owner (OWNER_INDEX); ``configmaps`` may keep only flink objects."""
        self.kube = kube
        self.clusters = clusters
        self.pods = pods
        self.services = services
        self.configmaps = configmaps
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self._http: aiohttp.ClientSession | None = None

    def on_cluster(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is not None:
            self.queue.add(object_key(new))

    def on_owned(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A pod, Service or ConfigMap of a FlinkCluster changed or went away: its cluster looks again."""
        obj = new or old
        if obj is None or not is_flink_object(obj):
            return
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == cluster.FLINKCLUSTERS.kind and ref.get("controller"):
                self.queue.add((object_key(obj)[0], ref["name"]))

    async def run(self) -> None:
        for informer in (self.clusters, self.pods, self.services, self.configmaps):
            await informer.synced.wait()
        self._http = aiohttp.ClientSession(timeout=PROBE_TIMEOUT)
        try:
            await workloop.run(self.queue, self._sync, "flinkcluster")
        finally:
            await self._http.close()

    async def _sync(self, key: workloop.Key) -> None:
        fc = self.clusters.get(*key)
        if fc is None or fc["metadata"].get("deletionTimestamp"):
            return
        meta = fc["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        owned = {p["metadata"]["name"]: p for p in self.pods.by_index(OWNER_INDEX, meta["uid"])}
        stopped = (fc.get("status") or {}).get("state") == cluster.STOPPED
        problem = None
        if not stopped:
            try:
                cluster.validate(fc)
            except cluster.InvalidSpec as exc:
                problem = str(exc)
            problem = problem or dist.missing_prerequisites()
        if not stopped and problem is None:
            await self._create_missing(fc, owned)
        observed = cluster.Observed(
            cluster=fc,
            pods=owned,
            service=self.services.get(ns, cluster.jobmanager_name(name)) is not None,
            configmap=self.configmaps.get(ns, cluster.configmap_name(name)) is not None,
            problem=problem,
        )
        jm = owned.get(cluster.pod_name_of(name, "jobmanager", 0))
        if not stopped and jm is not None and (jm.get("status") or {}).get("phase") == "Running":
            observed.registered_taskmanagers = await self._registered_taskmanagers(fc, jm)
        status = cluster.derive_status(observed, now_rfc3339())
        if status["state"] == cluster.STOPPED:
            await self._stop_running_pods(owned)
        await self._write_status(fc, status)
        if status["state"] in (cluster.CREATING, cluster.RECONCILING):
            self.queue.add_after((ns, name), PENDING_RESYNC)

    async def _create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        try:
            await self.kube.create(rt, obj["metadata"]["namespace"], obj)
        except ApiError as exc:
            if exc.status != 409:
                raise

    async def _create_missing(self, fc: dict[str, Any], owned: dict[str, dict[str, Any]]) -> None:
        ns, name = fc["metadata"].get("namespace", "default"), fc["metadata"]["name"]
        if self.configmaps.get(ns, cluster.configmap_name(name)) is None:
            await self._create(CONFIGMAPS, cluster.configmap(fc))
        if self.services.get(ns, cluster.jobmanager_name(name)) is None:
            await self._create(SERVICES, cluster.jobmanager_service(fc))
        env = dist.host_env()
        wanted = [("jobmanager", 0)] + [("taskmanager", i) for i in range(cluster.taskmanager_replicas(fc))]
        for component, index in wanted:
            if cluster.pod_name_of(name, component, index) not in owned:
                await self._create(PODS, cluster.pod(fc, component, index, env))

    async def _registered_taskmanagers(self, fc: dict[str, Any], jm: dict[str, Any]) -> int | None:
        """How many TaskManagers the JobManager knows, or None while its REST API does not answer."""
        ip = (jm.get("status") or {}).get("podIP")
        if not ip or self._http is None:
            return None
        port = cluster.rest_port(fc)
        try:
            async with self._http.get(f"http://{ip}:{port}/taskmanagers") as resp:
                if resp.status != 200:
                    return None
                body = await resp.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            return None
        return len(body.get("taskmanagers") or [])

    async def _stop_running_pods(self, owned: dict[str, dict[str, Any]]) -> None:
        """A stopped cluster's other processes would only hold ports and CPU; ended pods keep their logs."""
        for p in owned.values():
            pmeta = p["metadata"]
            ended = (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if ended or pmeta.get("deletionTimestamp"):
                continue
            ns = pmeta.get("namespace", "default")
            try:
                await self.kube.delete(PODS, ns, pmeta["name"], uid=pmeta["uid"])
            except ApiError as exc:
                if exc.status not in (404, 409):
                    raise

    async def _write_status(self, fc: dict[str, Any], status: dict[str, Any]) -> None:
        recorded = fc.get("status") or {}
        if status == recorded:
            return
        if await patch_status(self.kube, cluster.FLINKCLUSTERS, fc, status, self.clusters) is None:
            return
        before, after = recorded.get("state"), status["state"]
        if before != after:
            message = f"Cluster status changed: {before} -> {after}" if before else f"Cluster status: {after}"
            if after == cluster.STOPPED:
                message += f": {status['conditions'][0]['message']}"
            kind = "Warning" if after == cluster.STOPPED else "Normal"
            await events.record(self.kube, fc, "StatusUpdate", message, component=COMPONENT, event_type=kind)
