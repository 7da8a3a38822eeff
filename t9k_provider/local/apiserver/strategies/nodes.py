"""Nodes: cluster-scoped, status through /status; and the Nodes the local cluster boots with."""

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
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.quantity import parse_quantity
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
        state = "Ready" if ready.get("status") == "True" else "NotReady"
        if (node.get("spec") or {}).get("unschedulable"):
            state += ",SchedulingDisabled"  # kubectl's printer, for a cordoned node
        return [
            meta["name"],
            state,
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
    return node_capacities(1, overrides)[0]


def node_capacities(count: int, overrides: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """What each of ``count`` nodes advertises: its share of the machine's CPUs, memory and GPUs (the GPUs
    whole, the first nodes taking the remainder), 110 pods each, with `overrides` (per node) on top."""
    cpu_milli = (os.cpu_count() or 1) * 1000 // count
    cpu = str(cpu_milli // 1000) if cpu_milli % 1000 == 0 else f"{cpu_milli}m"
    shares = []
    gpus = _gpu_count()
    for index in range(count):
        capacity = {"cpu": cpu, "memory": f"{_memory_bytes() // 1024 // count}Ki", "pods": "110"}
        if own := gpus // count + (1 if index < gpus % count else 0):
            capacity[GPU] = str(own)
        shares.append({**capacity, **(overrides or {})})
    return shares


def first_devices(capacities: list[Mapping[str, str]]) -> list[int]:
    """Each node's first GPU index on the machine: the nodes hold consecutive, disjoint shares."""
    firsts, at = [], 0
    for capacity in capacities:
        firsts.append(at)
        at += int(parse_quantity(capacity.get(GPU, "0")) or 0)
    return firsts


def local_node(capacity: Mapping[str, str], name: str = FIRST_NODE) -> dict[str, Any]:
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
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **({"node-role.kubernetes.io/control-plane": ""} if name == FIRST_NODE else {}),
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
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
