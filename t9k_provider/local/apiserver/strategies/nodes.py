"""Nodes: cluster-scoped, status through /status; and the one Node the local cluster has."""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from t9k_provider.kube.resources import GPU
from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.machinery.events import NODE_NAME
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.strategicpatch import CONDITIONS, MergeField

_GPU_DEVICE = re.compile(r"nvidia[0-9]+\Z")


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


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


def _gpu_count() -> int:
    """NVIDIA GPUs as the device plugin counts them: one ``/dev/nvidiaN`` each."""
    try:
        return sum(1 for dev in os.listdir("/dev") if _GPU_DEVICE.match(dev))
    except OSError:
        return 0


def node_capacity(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The machine's CPUs, memory and GPUs (110 pods, the kubelet's default), with `overrides` on top;
    ``nvidia.com/gpu`` appears only where there are GPUs or it is set, as the device plugin advertises it."""
    capacity = {"cpu": str(os.cpu_count() or 1), "memory": f"{_memory_bytes() // 1024}Ki", "pods": "110"}
    if gpus := _gpu_count():
        capacity[GPU] = str(gpus)
    return {**capacity, **(overrides or {})}


def local_node(capacity: Mapping[str, str]) -> dict[str, Any]:
    now = now_rfc3339()
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
            "capacity": dict(capacity),
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


RESOURCE = Resource.builtin("", "Node", NodeStrategy(), short_names=["no"])
