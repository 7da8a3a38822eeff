"""The local cluster's nodes: their names, and where each node's kubelet keeps what it runs.

`t9k-local up --nodes N` runs N kubelets on this machine, each a Node of its own. The first node keeps the
name and the layout a one-node cluster always had (``t9k-local-node``, pods under ``STATE/pods``); the
others are ``t9k-local-node-1``, ``t9k-local-node-2``, ... under ``STATE/nodes/<name>``, so that what a
kubelet owns (its pod directories, cgroup, network namespaces) is apart from every other node's, as on
separate machines. PersistentVolumeClaims stay cluster-wide (``STATE/volumes``), as network storage is.
"""

from __future__ import annotations

from pathlib import Path

FIRST_NODE = "t9k-local-node"
NODES_DIR = "nodes"


def node_names(count: int) -> list[str]:
    """The names of a cluster of ``count`` nodes (at least one)."""
    if count < 1:
        raise ValueError(f"a cluster has at least one node (got {count})")
    return [FIRST_NODE, *(f"{FIRST_NODE}-{i}" for i in range(1, count))]


def node_root(state_dir: Path, node: str) -> Path:
    """Where ``node``'s kubelet keeps its pods and whatever else is its own."""
    return Path(state_dir) if node == FIRST_NODE else Path(state_dir) / NODES_DIR / node


def cluster_root(root: Path) -> Path:
    """The cluster's state directory, from one of its node roots."""
    root = Path(root)
    return root.parent.parent if root.parent.name == NODES_DIR else root


def node_roots(state_dir: Path) -> list[Path]:
    """Every node root of the cluster at ``state_dir`` that exists (the first node's always counts)."""
    others = Path(state_dir) / NODES_DIR
    return [Path(state_dir), *(sorted(p for p in others.iterdir() if p.is_dir()) if others.is_dir() else [])]
