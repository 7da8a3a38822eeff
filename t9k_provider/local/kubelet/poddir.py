"""The on-disk layout of the pods the kubelet runs, and the atomic JSON files in it.

The kubelet, its per-container shim, the container runtime, exec and the API server's log/exec/attach streams
share no memory: they talk through these files. This module alone names them:

    STATE/pods/<ns>_<name>_<uid>/         one directory per pod (`PodDir`)
        <container>/<n>.log               CRI log of attempt n (restart count n) (`AttemptFiles`)
        <container>/<n>.exit              exit code, written last: the attempt is over
        <container>/<n>.spec.json         what the shim runs: attempt n was launched
        <container>/<n>.state.json        startedAt/finishedAt/exitCode/reason
        <container>/<n>.pid               {"shim", "container", "containerStart"} while it runs
        <container>/shim.log              the shims' own output
        etc-hosts, resolv.conf            bind-mounted as the containers' /etc/hosts and /etc/resolv.conf
        network.json                      the pod's IP and network namespace
        devices.json                      the GPUs its containers hold, while it holds any (`devices`)
        volumes/<volume>/                 emptyDir / configMap / secret / projected / downwardAPI contents
                                          (a memory-backed emptyDir: a tmpfs mounted there, see `tmpfs`)
    STATE/volumes/<ns>/<claim>/           persistentVolumeClaim volumes, shared by the namespace's pods
    STATE/nodes/<node>/pods/...           the pods of a cluster's second, third... node (`nodes.node_root`)

Readers may run in other processes at any moment, so JSON is written to a temporary file and renamed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t9k_provider.local.machinery.nodes import cluster_root

VOLUMES = "volumes"  # the pod's volumes; the state dir's claims too
# An attempt's files: `<n><suffix>`.
LOG, EXIT, SPEC, STATE, PID = ".log", ".exit", ".spec.json", ".state.json", ".pid"


def _replace(path: Path, text: str) -> None:
    """Replace `path` in one step (temp file + rename): a reader sees the old content or the new."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(path: Path, data: dict[str, Any]) -> None:
    _replace(path, json.dumps(data))


def read_json(path: Path) -> dict[str, Any]:
    """The file's object, or {} while it does not exist (or is not JSON)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class AttemptFiles:
    """The files of one run of a container; `n` is its restart count."""

    directory: Path
    n: int

    @classmethod
    def of_log(cls, log: Path) -> AttemptFiles:
        """The attempt whose log is `log` (the shim is told only its log path)."""
        return cls(log.parent, int(log.name.removesuffix(LOG)))

    def _file(self, suffix: str) -> Path:
        return self.directory / f"{self.n}{suffix}"

    @property
    def log(self) -> Path:
        return self._file(LOG)

    @property
    def exit(self) -> Path:
        """The shim writes the exit code here last, so its existence means the log is complete."""
        return self._file(EXIT)

    @property
    def spec(self) -> Path:
        return self._file(SPEC)

    @property
    def state(self) -> Path:
        return self._file(STATE)

    @property
    def pid(self) -> Path:
        return self._file(PID)

    @property
    def shim_log(self) -> Path:
        """The shim's own output, shared by the container's attempts."""
        return self.directory / "shim.log"

    @property
    def finished(self) -> bool:
        return self.exit.exists()

    def exit_code(self) -> int | None:
        try:
            return int(self.exit.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def write_exit_code(self, code: int) -> None:
        _replace(self.exit, f"{code}\n")

    @property
    def started(self) -> bool:
        """Did its shim start the container? It writes the pid file right after, and a start error's state."""
        return self.pid.exists() or self.state.exists()

    def remove(self) -> None:
        """Forget an attempt that never started (spec first: `ContainerDir.attempts` lists by it)."""
        for path in (self.spec, self.log, self.state, self.pid, self.exit):
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class ContainerDir:
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    def attempt(self, n: int) -> AttemptFiles:
        return AttemptFiles(self.path, n)

    def attempts(self) -> list[AttemptFiles]:
        """The attempts launched so far (each has a spec file), oldest first."""
        if not self.path.is_dir():
            return []
        heads = (entry.name.removesuffix(SPEC) for entry in self.path.iterdir() if entry.name.endswith(SPEC))
        return [self.attempt(n) for n in sorted(int(head) for head in heads if head.isdigit())]


@dataclass(frozen=True)
class PodDir:
    """`STATE/pods/<ns>_<name>_<uid>`: the pod's private directory."""

    path: Path

    @classmethod
    def of(cls, state_dir: Path, pod: dict[str, Any]) -> PodDir:
        meta = pod["metadata"]
        return cls(pods_root(state_dir) / f"{meta.get('namespace', 'default')}_{meta['name']}_{meta['uid']}")

    @classmethod
    def all(cls, state_dir: Path) -> list[PodDir]:
        """The pod directories on disk."""
        root = pods_root(state_dir)
        return [cls(entry) for entry in root.iterdir() if entry.is_dir()] if root.is_dir() else []

    @property
    def uid(self) -> str:
        return self.path.name.rsplit("_", 1)[-1]

    @property
    def etc_hosts(self) -> Path:
        return self.path / "etc-hosts"

    @property
    def resolv_conf(self) -> Path:
        return self.path / "resolv.conf"

    @property
    def network(self) -> Path:
        return self.path / "network.json"

    @property
    def devices(self) -> Path:
        return self.path / "devices.json"

    @property
    def volumes(self) -> Path:
        return self.path / VOLUMES

    def claim(self, namespace: str, claim: str) -> Path:
        """A persistentVolumeClaim's directory: in the cluster's state dir, shared by the namespace's pods on
        every node (`nodes.cluster_root` of the node root this pod directory is in)."""
        return cluster_root(self.path.parent.parent) / VOLUMES / namespace / claim

    def container(self, name: str) -> ContainerDir:
        return ContainerDir(self.path / name)

    def containers(self) -> list[ContainerDir]:
        """The directories of the containers that ever had a file here."""
        if not self.path.is_dir():
            return []
        return [
            ContainerDir(entry) for entry in self.path.iterdir() if entry.is_dir() and entry.name != VOLUMES
        ]


def pods_root(state_dir: Path) -> Path:
    """`STATE/pods`: where the pod directories are."""
    return Path(state_dir) / "pods"
