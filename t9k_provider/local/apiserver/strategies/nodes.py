"""Nodes: cluster-scoped, status through /status; and the one Node the local cluster has."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from t9k_provider.local.apiserver.patch import CONDITIONS, MergeField
from t9k_provider.local.apiserver.resources import Resource
from t9k_provider.local.apiserver.strategies.base import Strategy
from t9k_provider.local.apiserver.tables import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.timestamps import now_rfc3339

NODE_NAME = "t9k-local-node"


class NodeStrategy(Strategy):
    namespaced = False
    subresources = ("status",)
    merge_fields = {
        "spec": MergeField(node={"podCIDRs": MergeField("merge")}),
        "status": MergeField(node={"conditions": CONDITIONS, "addresses": MergeField("merge", "type")}),
    }
    field_selectors = {
        "spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false"
    }
    columns = [NAME_COLUMN, column("Status"), column("Roles"), AGE_COLUMN, column("Version")]

    def cells(self, node: dict[str, Any]) -> list[Any]:
        meta, status = node["metadata"], node.get("status") or {}
        ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), {})
        roles = sorted(
            k.rsplit("/", 1)[1] for k in meta.get("labels") or {} if k.startswith("node-role.kubernetes.io/")
        )
        return [
            meta["name"],
            "Ready" if ready.get("status") == "True" else "NotReady",
            ",".join(roles) or "<none>",
            age(meta.get("creationTimestamp")),
            (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
        ]


def _read_id(path: str) -> str:
    try:
        return Path(path).read_text().strip() or "t9k-local"
    except OSError:
        return "t9k-local"


def local_node(cpus: int, memory_bytes: int) -> dict[str, Any]:
    now = now_rfc3339()
    capacity = {"cpu": str(cpus), "memory": f"{memory_bytes // 1024}Ki", "pods": "110"}
    conditions = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "t9k-local kubelet is ready",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        },
        *(
            {
                "type": t,
                "status": "False",
                "reason": f"KubeletHas{r}",
                "message": "",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            for t, r in (
                ("MemoryPressure", "SufficientMemory"),
                ("DiskPressure", "NoDiskPressure"),
                ("PIDPressure", "SufficientPID"),
            )
        ),
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "labels": {
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/control-plane": "",
            },
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": NODE_NAME},
            ],
            "nodeInfo": {
                "machineID": _read_id("/etc/machine-id"),
                "systemUUID": _read_id("/etc/machine-id"),
                "bootID": _read_id("/proc/sys/kernel/random/boot_id"),
                "kernelVersion": platform.release(),
                "osImage": platform.platform(),
                "kubeProxyVersion": "v1.32.0-t9k-local",
                "kubeletVersion": "v1.32.0-t9k-local",
                "operatingSystem": "linux",
                "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                    platform.machine(), platform.machine()
                ),
                "containerRuntimeVersion": "t9k-local://process",
            },
        },
    }


RESOURCE = Resource("", "v1", "nodes", "node", "Node", NodeStrategy(), short_names=["no"])
