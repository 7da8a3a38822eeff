"""What the soak checks: what its watches saw (each write's observation, each pod's life), the containers'
own records of when they ran (no replica twice at once), and what a stopped cluster left behind.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.soak_workloads import T9K_KINDS
from t9k_provider.jobs.contract import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.kubelet.cgroups import kubelet_cgroup_name
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.machinery.nodes import node_roots

Key = tuple[str, str, str]  # kind, namespace, name


@dataclass
class Sighting:
    at: float  # Unix seconds it arrived
    rv: int
    generation: int
    observed_generation: int


@dataclass
class PodLife:
    """One pod (by uid) as the watch saw it: whose it is, where it ran, when it was first seen, bound,
    Running, and gone (deleted, or missing from a relist)."""

    namespace: str
    name: str
    labels: dict[str, str]
    owner: tuple[str, str] | None  # the controller owner's (kind, name)
    seen: float
    node: str = ""
    bound: float | None = None
    running: float | None = None
    gone: float | None = None
    finished: dict[str, float] = field(default_factory=dict)  # container -> terminated finishedAt


class Observations:
    """Everything the soak's watches delivered, by object and, for pods, by uid (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sightings: dict[Key, list[Sighting]] = defaultdict(list)
        self.pods: dict[str, PodLife] = {}

    def handler(self, kind: str) -> Any:
        return lambda type_, obj, at: self.on_event(kind, type_, obj, at)

    def on_event(self, kind: str, type_: str, obj: dict[str, Any], at: float) -> None:
        with self.lock:
            if type_ == "SYNCED":  # a relist ended: pods it did not list are gone
                if kind == "Pod":
                    listed = set(obj["uids"])
                    for uid, life in self.pods.items():
                        if life.gone is None and uid not in listed:
                            life.gone = at
                return
            meta = obj["metadata"]
            status = obj.get("status") or {}
            self.sightings[(kind, meta.get("namespace", ""), meta["name"])].append(
                Sighting(at, int(meta["resourceVersion"]), meta.get("generation", 0),
                         status.get("observedGeneration") or 0)
            )  # fmt: skip
            if kind == "Pod":
                self._pod(type_, obj, at)

    def _pod(self, type_: str, pod: dict[str, Any], at: float) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        life = self.pods.get(meta["uid"])
        if life is None:
            owner = next(
                ((r["kind"], r["name"]) for r in meta.get("ownerReferences") or [] if r.get("controller")),
                None,
            )
            life = self.pods[meta["uid"]] = PodLife(
                meta["namespace"], meta["name"], dict(meta.get("labels") or {}), owner, at
            )
        if spec.get("nodeName") and life.bound is None:
            life.node, life.bound = spec["nodeName"], at
        if status.get("phase") == "Running" and life.running is None:
            life.running = at
        for c in status.get("containerStatuses") or []:
            finished = ((c.get("state") or {}).get("terminated") or {}).get("finishedAt")
            if finished:
                life.finished[c["name"]] = parse_timestamp(finished).timestamp()
        if type_ == "DELETED":
            life.gone = at

    def first(self, key: Key, rv: int = 0, generation: int = 0) -> float | None:
        """When the watch first showed ``key`` at ``rv`` or later, or (``generation``) with its controller
        having observed that generation."""
        with self.lock:
            for s in self.sightings.get(key, []):
                if s.rv >= rv and s.observed_generation >= generation:
                    return s.at
        return None


# -- the containers' records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One container start: its pod, container, start and (if it recorded one) end, Unix seconds."""

    uid: str
    container: str
    start: float
    end: float | None


def read_runs(records: Path) -> list[Run]:
    runs = []
    for path in sorted(records.iterdir()):
        if path.name.endswith(".tmp"):
            continue
        uid, container, start, end = path.read_text().split()
        runs.append(Run(uid, container, float(start), None if end == "-" else float(end)))
    return runs


def identities(run: Run, life: PodLife | None) -> list[tuple[str, ...]]:
    """What must never run twice at once, of which this run is one: its pod's container always; a StatefulSet
    pod's ordinal (its name), a T9k Job's replica (type and index), a DaemonSet's pod on one node, and a bare
    Pod by name."""
    found: list[tuple[str, ...]] = [("container of one pod", run.uid, run.container)]
    if life is None:
        return found
    ns, (kind, owner) = life.namespace, life.owner or ("", "")
    if kind == "StatefulSet":
        found.append(("StatefulSet replica", ns, life.name))
    elif kind in T9K_KINDS:
        labels = life.labels
        found.append((f"{kind} replica", ns, owner, labels.get(LABEL_REPLICA_TYPE, ""),
                      labels.get(LABEL_REPLICA_INDEX, "")))  # fmt: skip
    elif kind == "DaemonSet":
        found.append(("DaemonSet pod of a node", ns, owner, life.node))
    elif not kind:
        found.append(("Pod", ns, life.name))
    return found


def ended(run: Run, life: PodLife | None) -> float | None:
    """When the run ended: its own record, else (SIGKILLed before it could write one) the kubelet's
    ``finishedAt`` (whole seconds: rounded up), else when its pod was gone; None if nothing says it ended."""
    if run.end is not None:
        return run.end
    if life is not None and run.container in life.finished:
        return life.finished[run.container] + 1.0
    return life.gone if life is not None else None


def overlaps(runs: list[Run], pods: dict[str, PodLife]) -> list[str]:
    """Every pair of runs of one identity whose intervals overlap, in words."""
    by_identity: dict[tuple[str, ...], list[tuple[float, float, Run]]] = defaultdict(list)
    for run in runs:
        life = pods.get(run.uid)
        end = ended(run, life)
        for identity in identities(run, life):
            by_identity[identity].append((run.start, end if end is not None else float("inf"), run))
    found = []
    for identity, spans in sorted(by_identity.items()):
        spans.sort(key=lambda s: s[0])
        latest: tuple[float, float, Run] | None = None
        for span in spans:
            if latest is not None and span[0] < latest[1]:
                first, second = latest[2], span[2]
                found.append(
                    f"{' '.join(identity)}: pod {_pod_name(pods, first.uid)} ran {first.start:.3f}-"
                    f"{latest[1]:.3f} and pod {_pod_name(pods, second.uid)} from {second.start:.3f}"
                )
            if latest is None or span[1] > latest[1]:
                latest = span
    return found


def _pod_name(pods: dict[str, PodLife], uid: str) -> str:
    life = pods.get(uid)
    return f"{life.namespace}/{life.name} ({uid[:8]})" if life else uid


# -- what is left behind -------------------------------------------------------------------------------------


def pod_directories(state_dir: Path) -> list[str]:
    """Pod directories still on any node's disk."""
    return [str(d.path) for root in node_roots(state_dir) for d in PodDir.all(root)]


def processes(run: str, state_dir: Path, stopped: bool) -> list[str]:
    """Live processes of this soak's containers (``SOAK_RUN=run`` in their environment) or of the cluster's
    kubelet cgroups; once the cluster has ``stopped``, also any naming its state directory on their command
    line (a component that outlived its server)."""
    marker = f"SOAK_RUN={run}".encode()
    cgroups = [kubelet_cgroup_name(root) for root in node_roots(state_dir)]
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            cgroup = (proc / "cgroup").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        ours = marker in environ.split(b"\0") or any(c in cgroup for c in cgroups)
        if ours or (stopped and str(state_dir) in cmdline):
            found.append(f"pid {proc.name}: {cmdline[:160]}")
    return found
