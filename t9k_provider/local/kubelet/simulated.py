"""Mode "simulated" (kwok-like, for benchmarks): no processes, realistic status objects.

Pods go Pending -> Running and stay there, unless annotated with `t9k.local/simulate-exit-code: "<n>"` (and
optionally `t9k.local/simulate-after: "<seconds>"`, default 0): then every container terminates with that code
after that long and the pod ends Succeeded (0) or Failed. Deleted pods are removed at once.
"""

from __future__ import annotations

import time
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import Informer, object_key
from t9k_provider.kube.resources import PODS
from t9k_provider.kube.timestamps import now_rfc3339, parse_timestamp, rfc3339
from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.kubelet.runtime import Attempt
from t9k_provider.local.kubelet.status import TERMINAL_PHASES, ContainerView, pod_status, status_patch
from t9k_provider.local.machinery import workloop
from t9k_provider.local.machinery.nodes import FIRST_NODE

EXIT_CODE_ANNOTATION = "t9k.local/simulate-exit-code"
AFTER_ANNOTATION = "t9k.local/simulate-after"
HOST_IP = "127.0.0.1"


class SimulatedKubelet:
    """Simulates node ``node`` (the ``index``-th of the cluster: its pods' addresses are 10.252.<index>.x)."""

    def __init__(self, kube: KubeApi, pods: Informer, node: str = FIRST_NODE, index: int = 0) -> None:
        self.kube = kube
        self.pods = pods
        self.node = node
        self.index = index
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self.ips: dict[str, str] = {}

    def on_pod(self, _old: dict[str, Any] | None, pod: dict[str, Any] | None) -> None:
        if pod is not None and pod["spec"].get("nodeName") == self.node:
            self.queue.add(object_key(pod))

    def _ip(self, uid: str) -> str:
        if uid not in self.ips:
            n = len(self.ips) + 2
            self.ips[uid] = f"10.{252 + n // 250}.{self.index}.{n % 250 + 2}"
        return self.ips[uid]

    async def run(self) -> None:
        await workloop.run(self.queue, self._sync, "simulated pod")

    async def _sync(self, key: workloop.Key) -> None:
        pod = self.pods.get(*key)
        if pod is None:
            return
        meta, spec = pod["metadata"], pod["spec"]
        ns = meta.get("namespace", "default")
        if meta.get("deletionTimestamp"):
            try:
                await self.kube.delete(PODS, ns, meta["name"], uid=meta["uid"], grace_period_seconds=0)
            except ApiError as exc:
                if exc.status not in (404, 409):
                    raise
            return
        current = pod.get("status") or {}
        if current.get("phase") in TERMINAL_PHASES:
            return
        start = current.get("startTime") or now_rfc3339()
        started = parse_timestamp(start).timestamp()
        annotations = meta.get("annotations") or {}
        code = annotations.get(EXIT_CODE_ANNOTATION)
        after = float(annotations.get(AFTER_ANNOTATION, "0"))
        done = code is not None and time.time() >= started + after
        if code is not None and not done:
            self.queue.add_after((meta.get("namespace", ""), meta["name"]), started + after - time.time())

        def view(c: dict[str, Any]) -> ContainerView:
            attempt = Attempt(n=0, running=not done, started_at=start)
            if done:
                attempt.exit_code = int(code or 0)
                attempt.finished_at = rfc3339(started + after)
            return ContainerView(spec=c, attempts=[attempt])

        inits = []
        for c in spec.get("initContainers") or []:
            finished = Attempt(n=0, running=False, exit_code=0, started_at=start, finished_at=start)
            inits.append(ContainerView(spec=c, attempts=[finished]))
        mains = [view(c) for c in spec["containers"]]
        status = pod_status(
            pod,
            inits,
            mains,
            now=now_rfc3339(),
            pod_ip=self._ip(meta["uid"]),
            host_ip=HOST_IP,
            start_time=start,
            restart_pending=set(),
        )
        if done and status["phase"] not in TERMINAL_PHASES:
            status["phase"] = "Succeeded" if int(code or 0) == 0 else "Failed"
        if any(current.get(k) != v for k, v in status.items()):
            await self.kube.patch(
                PODS, ns, meta["name"], status_patch(status), subresource="status", strategic=True
            )
