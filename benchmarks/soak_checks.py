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
from t9k_provider.jobs.contract import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE, task_replicas
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
    owner: tuple[str, str, str] | None  # the controller owner's (kind, name, uid)
    restart_policy: str
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
            refs = meta.get("ownerReferences") or []
            owner = next(((r["kind"], r["name"], r["uid"]) for r in refs if r.get("controller")), None)
            labels, policy = dict(meta.get("labels") or {}), spec.get("restartPolicy", "Always")
            life = PodLife(meta["namespace"], meta["name"], labels, owner, policy, at)
            self.pods[meta["uid"]] = life
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
    """What must never run twice at once, of which this run is one: its pod's container always; and what
    has a name of its own, which the API server gives one pod at a time and the kubelet frees only once
    that pod's containers have ended: a StatefulSet's ordinal, a T9k Job's replica (type and index), a bare
    Pod. (A DaemonSet promises no such thing: a create whose answer a fault lost makes it run a second pod
    on a node until it sees and deletes the extra one, as Kubernetes' does.)"""
    found: list[tuple[str, ...]] = [("container of one pod", run.uid, run.container)]
    if life is None:
        return found
    ns, (kind, owner, _) = life.namespace, life.owner or ("", "", "")
    if kind == "StatefulSet":
        found.append(("StatefulSet replica", ns, life.name))
    elif kind in T9K_KINDS:
        labels = life.labels
        found.append((f"{kind} replica", ns, owner, labels.get(LABEL_REPLICA_TYPE, ""),
                      labels.get(LABEL_REPLICA_INDEX, "")))  # fmt: skip
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


def reruns(
    runs: list[Run], pods: dict[str, PodLife], deleted: dict[str, str], jobs: dict[str, dict[str, Any]]
) -> list[str]:
    """Runs beyond what was asked, in words: a container of a ``restartPolicy: Never`` pod that started
    twice; a T9k replica whose pods ran more often than once, plus the restarts its job counted, plus its pods
    the soak deleted before they finished (a finished replica never runs again, docs/controller.md#r1); a
    batch Job that ran more pods than its completions (it has no restart budget). ``deleted``: pod uid ->
    its phase when the soak deleted it; ``jobs``: the T9k and batch Jobs as they ended, by uid (an
    incarnation deleted on the way is not judged: its final status is not known)."""
    found = []
    starts: dict[tuple[str, str], int] = defaultdict(int)
    ran: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for run in runs:
        starts[(run.uid, run.container)] += 1
        life = pods.get(run.uid)
        if life is not None and life.owner is not None and life.owner[2] in jobs:
            kind, _, owner_uid = life.owner
            index = (life.labels.get(LABEL_REPLICA_TYPE, ""), life.labels.get(LABEL_REPLICA_INDEX, ""))
            ran[(owner_uid, *index) if kind in T9K_KINDS else (owner_uid,)].add(run.uid)
    for (uid, container), count in sorted(starts.items()):
        life = pods.get(uid)
        if count > 1 and life is not None and life.restart_policy == "Never":
            pod = _pod_name(pods, uid)
            found.append(f"container {container} of pod {pod} (restartPolicy Never) started {count} times")
    for key, uids in sorted(ran.items()):
        job = jobs[key[0]]
        name = f"{job['kind']} {job['metadata']['namespace']}/{job['metadata']['name']}"
        names = {pods[u].name for u in uids}
        if job["kind"] == "Job":
            allowed = job["spec"].get("completions", 1)
        else:
            unfinished = sum(deleted.get(u) not in (None, "Succeeded", "Failed") for u in uids)
            allowed = 1 + _restarts(job, names) + unfinished
        if len(uids) > allowed:
            found.append(
                f"{name}{' replica ' + '-'.join(key[1:]) if len(key) > 1 else ''}: {len(uids)} pods ran "
                f"({', '.join(sorted(_pod_name(pods, u) for u in uids))}), {allowed} allowed"
            )
    return found


def _restarts(job: dict[str, Any], names: set[str]) -> int:
    """The restarts ``job`` counted for the replica whose pods are ``names``, and its whole restarts."""
    status = job.get("status") or {}
    counted = int(status.get("restarts") or 0)
    for task in status.get("tasks") or []:
        for record in task_replicas(task):
            if record.get("name") in names:
                counted += int(record.get("restartCount") or 0)
    return counted


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
