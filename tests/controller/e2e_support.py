"""Shared pieces of the controller's end-to-end tests: job manifests, a pod-creation recorder, waits."""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from t9k_provider.controller.kinds.registry import WATCHED_CHILD_TYPES
from t9k_provider.controller.reconcile import reconcile
from t9k_provider.controller.runtime.cache import Caches
from t9k_provider.controller.runtime.events import EventRecorder
from t9k_provider.controller.runtime.jobsync import JobSync
from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.jobs import API_VERSION, GROUP, KINDS, VERSION
from t9k_provider.kube.api import KubeApi
from t9k_provider.kube.informer import OWNER_INDEX, Informer, by_owner
from t9k_provider.kube.resources import ResourceType

NS = "default"

# Stand-ins for sshd, mpirun and colossalai on the replicas' PATH (the real ones run in tests/examples).
FAKE_SSHD = """
import socket, sys
print("fake sshd", *sys.argv[1:], flush=True)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", 22))
server.listen()
while True:
    server.accept()[0].close()
"""
# Prints what a real launcher would use: its argv, the hostfile it was pointed at, the SSH material.
FAKE_LAUNCHER = """
import json, os, sys
hostfile = os.environ["HOSTFILE"]
print(json.dumps({
    "argv": sys.argv[1:],
    "hostfile": open(hostfile).read(),
    "ssh": sorted(os.listdir("/root/.ssh")),
    "ssh_config": open("/root/.ssh/config").read(),
    "env": {k: v for k, v in os.environ.items() if k.startswith("OMPI_")},
}))
"""


def fake_tools(bin_dir: Path) -> Path:
    """Write executable fakes: ``sshd`` listens on port 22; ``mpirun``/``colossalai`` report what they see."""
    for name, body in (("sshd", FAKE_SSHD), ("mpirun", FAKE_LAUNCHER), ("colossalai", FAKE_LAUNCHER)):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)
    return bin_dir


TERMINAL = ("Succeeded", "Failed")


def offline_caches(api: KubeApi, namespace: str, jobs: list[dict[str, Any]]) -> Caches:
    """The controller's caches, never started: they hold just ``jobs`` and what is observed into them."""
    job_types = [ResourceType(API_VERSION, k, cls.PLURAL) for k, cls in KINDS.items()]
    child_types = [ResourceType(*t) for t in WATCHED_CHILD_TYPES]
    caches = Caches(job_types, child_types)
    for rt in job_types:
        caches.add(Informer(api, rt, namespace))
    for rt in child_types:
        caches.add(Informer(api, rt, namespace, indexers={OWNER_INDEX: by_owner}))
    for job in jobs:
        caches.observe(job)
    return caches


def offline_reconciler(
    api: KubeApi,
    metrics: Metrics,
    caches: Caches,
    clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
) -> JobSync:
    """The controller's JobSync over ``offline_caches``: a status computed from a copy that has changed
    since meets a 409 Conflict."""
    return JobSync(api, caches, EventRecorder(api, metrics, "test"), metrics, reconcile, clock=clock)


class Jobs:
    """Thin sync access to T9k jobs on a cluster."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        plural = KINDS[manifest["kind"]].PLURAL
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, plural, manifest)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, KINDS[kind].PLURAL, name)

    def patch(self, kind: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self.custom.patch_namespaced_custom_object(GROUP, VERSION, NS, KINDS[kind].PLURAL, name, patch)

    def phase(self, kind: str, name: str) -> str | None:
        return (self.get(kind, name).get("status") or {}).get("phase")

    def condition(self, kind: str, name: str, ctype: str) -> dict[str, Any] | None:
        conditions = (self.get(kind, name).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == ctype), None)

    def pods(self, job_name: str) -> list[client.V1Pod]:
        selector = f"tensorstack.dev/owner-name={job_name}"
        return sorted(
            self.core.list_namespaced_pod(NS, label_selector=selector).items, key=lambda p: p.metadata.name
        )

    def pod_names(self, job_name: str) -> list[str]:
        return [p.metadata.name for p in self.pods(job_name)]

    def log(self, pod: str, container: str | None = None) -> str:
        response = self.core.read_namespaced_pod_log(pod, NS, container=container, _preload_content=False)
        return response.data.decode()

    def owned(self, job_name: str, list_fn: Any) -> list[str]:
        items = list_fn(NS, label_selector=f"tensorstack.dev/owner-name={job_name}").items
        return sorted(i.metadata.name for i in items)


class PodRecorder(threading.Thread):
    """Watches pods and records every pod object ever seen, by name, as the set of its uids.

    Two uids under one name mean the pod was created twice (a restart, or a duplicate / re-run)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        super().__init__(daemon=True)
        self._core = client.CoreV1Api(api_client)
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self.uids: dict[str, set[str]] = defaultdict(set)
        self.error: BaseException | None = None
        self.started_watching = threading.Event()

    def _see(self, pod: client.V1Pod) -> None:
        with self._lock:
            self.uids[pod.metadata.name].add(pod.metadata.uid)

    def run(self) -> None:
        try:
            listing = self._core.list_namespaced_pod(NS)
            for pod in listing.items:
                self._see(pod)
            rv = listing.metadata.resource_version
            self.started_watching.set()
            while not self._halt.is_set():
                try:
                    for event in watch.Watch().stream(
                        self._core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=2
                    ):
                        pod = event["object"]
                        rv = pod.metadata.resource_version
                        self._see(pod)
                except ApiException as exc:
                    if exc.status != 410:
                        raise
                    raise AssertionError("pod watch expired: creations may have been missed") from exc
        except BaseException as exc:
            self.error = exc
            self.started_watching.set()

    def stop(self) -> dict[str, set[str]]:
        self._halt.set()
        self.join(10)
        if self.error is not None:
            raise self.error
        with self._lock:
            return {name: set(uids) for name, uids in self.uids.items()}
