"""A kubelet's heartbeats, as the real kubelet sends them: it renews its node's Lease
(``kube-node-lease/<node>``) every ``RENEW_INTERVAL`` seconds (or as often as the cluster's node grace asks:
`t9k-local` passes a quarter of it), and posts the Node's Ready condition when it starts and every
``STATUS_INTERVAL`` seconds after. The node lifecycle controller
(`local/controllers/nodelifecycle.py`) calls a node whose kubelet went silent Unknown; a kubelet that comes
back says Ready again at its start."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import LEASES, NODES
from t9k_provider.kube.timestamps import micro_rfc3339, now_rfc3339

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION = 40  # seconds, the kubelet's nodeLeaseDurationSeconds
RENEW_INTERVAL = 10.0  # a quarter of the duration, as the kubelet renews
STATUS_INTERVAL = 60.0
PRESSURES = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)


def ready_conditions(node: dict[str, Any], now: str) -> list[dict[str, Any]]:
    """The Node's conditions as a healthy kubelet posts them: Ready True, no pressure; a transition time
    moves only when a status changes."""
    current = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or ()}
    wanted = [
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        *((t, "False", r, m) for t, r, m in PRESSURES),
    ]
    out = []
    for kind, status, reason, message in wanted:
        before = current.pop(kind, {})
        moved = before.get("status") != status
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now if moved else before.get("lastTransitionTime", now),
            }
        )
    return out + list(current.values())


class NodeHeartbeat:
    """Keeps node ``node`` known to be alive while the kubelet runs."""

    def __init__(self, kube: KubeApi, node: str, interval: float = RENEW_INTERVAL) -> None:
        self.kube = kube
        self.node = node
        self.interval = interval

    async def run(self) -> None:
        """Until cancelled; a failed beat is logged and tried again at the next interval."""
        loop = asyncio.get_running_loop()
        posted = float("-inf")
        while True:
            try:
                if loop.time() - posted >= STATUS_INTERVAL:
                    await self.post_status()
                    posted = loop.time()
                await self.renew_lease()
            except ApiError as exc:
                log.warning(
                    "node %s: heartbeat failed, trying again in %.1fs: %s", self.node, self.interval, exc
                )
            await asyncio.sleep(self.interval)

    async def post_status(self) -> None:
        node = await self.kube.get(NODES, None, self.node)
        patch = {"status": {"conditions": ready_conditions(node, now_rfc3339())}}
        await self.kube.patch(NODES, None, self.node, patch, subresource="status", strategic=True)

    async def renew_lease(self) -> None:
        renew = {
            "spec": {
                "holderIdentity": self.node,
                "leaseDurationSeconds": LEASE_DURATION,
                "renewTime": micro_rfc3339(datetime.now(timezone.utc)),
            }
        }
        try:
            await self.kube.patch(LEASES, LEASE_NAMESPACE, self.node, renew)
        except ApiError as exc:
            if exc.status != 404:
                raise
            node = await self.kube.get(NODES, None, self.node)
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": node["metadata"]["uid"]}
            lease = {
                "apiVersion": LEASES.api_version,
                "kind": LEASES.kind,
                "metadata": {"name": self.node, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
                **renew,
            }
            await self.kube.create(LEASES, LEASE_NAMESPACE, lease)
