"""Leader failover of the installed controller (``python -m benchmarks --only failover``; ``METHOD`` says
what is measured and how). Its harness, the install (``Install``) and the kills with jobs in flight
(``run_handovers``), is also the rehearsal test's (tests/local/test_install.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import manifests
from benchmarks.api import Client, Watch, ensure_namespace, progress
from benchmarks.stats import Figure
from t9k_provider.controller.cli import build_parser
from t9k_provider.jobs.contract import task_replicas
from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.kubelet.poddir import PodDir, read_json
from t9k_provider.testing import LocalCluster, wait_for

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
SYSTEM = "t9k-system"
NAME = "t9k-controller"  # the Deployment, its ServiceAccount and the Lease
JOBS_NAMESPACE = "failover"
REPLICAS = 2
SECTION = "10. Leader failover"
METHOD = """\
A local cluster started without its own controller gets the production install, `kubectl apply -k deploy/`:
the controller runs as the shipped 2-replica Deployment under its ServiceAccount and ClusterRole, with the
in-cluster credentials of its pods and the Lease settings below (the Deployment sets none: the controller's
defaults). Then, 10 times each and alternating, the leader's pod is deleted (`DELETE`, 30 s grace: SIGTERM,
the controller stops its workers and releases the Lease) or its process is SIGKILLed and the pod
force-deleted (a node lost: the Lease must expire); before each kill 3 GenericJobs of 2 workers (`sleep 3`)
are created, so jobs are being created, running and finishing across every handover, and the next kill waits
for the ReplicaSet's replacement to be ready (a standby with synced caches). *Leader gone* is when the kill
was issued (the DELETE sent, SIGKILL sent); *acquired* is the new leader's Lease `acquireTime`; the handover
ends at the `ts` of the new leader's log line `first reconcile done` (a standby reconciles nothing, so it is
its first reconcile as leader). All instants are on the same host clock. A watch on the jobs' pods records
every pod ever created: a job with more pods than replicas has duplicates; each job must end Succeeded with a
status whose replicas (uid, phase) and counts agree with its pods. Figures are over the 10 handovers of each
kind (median, min-max), and over jobs for the invariants."""
ANALYSIS = """\
On deletion the leader stops its workers (in-flight reconciles get up to 10 s), releases the Lease (holder
cleared, `leaseDurationSeconds` 1) and exits; the standby polls the Lease every `retryPeriod` (2 s, plus up to
20% jitter), so it takes over within one poll of the release. Before this section existed the release failed
on the local cluster: a pod's bound token was refused (401) as soon as the pod had a `deletionTimestamp`, so
the standby waited for expiry as after a SIGKILL; the API server now accepts a terminating pod's token until a
minute past its `deletionTimestamp`, as kube-apiserver does. After a SIGKILL nobody releases the Lease: the
standby takes over `leaseDuration` after it last saw the Lease change, that is 15 s after the last renewal it
saw (up to one poll before the kill) plus up to one poll, hence 13-17 s around the 15 s. The new leader's
first reconcile follows its acquisition within about 0.1 s: its caches are synced while it stands
by, and their initial lists queued every job. A faster SIGKILL handover needs a shorter `leaseDuration` (and
`renewDeadline` below it), bought with more frequent Lease writes and less room for a slow API server before a
healthy leader must stop. No job got a second pod and no status update was lost: a new leader derives
everything from the cluster (job status, deterministically named children), and the old leader's writes are
fenced by `is_leader()`, which stops them `renewDeadline` after its last renewal, before `leaseDuration` lets
the standby in. The machine is shared with other sessions (the load averages in the stamp, on 2 cores); the
SIGTERM figures move with the load (shutdown and polls wait for CPU), the SIGKILL ones are Lease timing."""

#: Bounds of the waits, generous for a loaded 2-core machine.
ROLLOUT_TIMEOUT = 180.0
HANDOVER_TIMEOUT = 90.0
JOBS_TIMEOUT = 240.0


def lease_settings() -> dict[str, float]:
    """The election timing the shipped Deployment runs with (it sets none: the controller's defaults)."""
    parser = build_parser()
    return {
        key: float(parser.get_default(key)) for key in ("lease_duration", "renew_deadline", "retry_period")
    }


class Install:
    """The shipped manifests applied with kubectl to a local cluster started without its own controller."""

    def __init__(self, cluster: LocalCluster, cache_dir: Path) -> None:
        self.cluster = cluster
        self.cache_dir = cache_dir
        self.client = Client(cluster)

    def kubectl_argv(self, *args: str) -> list[str]:
        return [
            "kubectl",
            "--kubeconfig",
            str(self.cluster.kubeconfig),
            "--cache-dir",
            str(self.cache_dir),
            *args,
        ]

    def kubectl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.kubectl_argv(*args), capture_output=True, text=True, timeout=timeout)

    def apply(self) -> None:
        """``kubectl apply -k deploy/`` and wait until both replicas are ready and one holds the Lease."""
        applied = self.kubectl("apply", "-k", str(DEPLOY))
        if applied.returncode != 0:
            raise RuntimeError(f"kubectl apply -k deploy/: {applied.stderr}\n{self.cluster.report(SYSTEM)}")
        rollout = self.kubectl(
            "-n", SYSTEM, "rollout", "status", f"deploy/{NAME}", f"--timeout={ROLLOUT_TIMEOUT:.0f}s",
            timeout=ROLLOUT_TIMEOUT + 10,
        )  # fmt: skip
        if rollout.returncode != 0:
            raise RuntimeError(
                f"rollout status: {rollout.stdout}{rollout.stderr}{self.cluster.report(SYSTEM)}"
            )
        self.wait_replicas()
        wait_for("a leader", self.holder, HANDOVER_TIMEOUT, 0.05)

    def lease(self) -> dict[str, Any]:
        status, raw = self.client.call(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM}/leases/{NAME}"
        )
        if status != 200:
            return {}
        return json.loads(raw).get("spec") or {}

    def holder(self) -> str | None:
        return self.lease().get("holderIdentity") or None

    def pods(self) -> list[dict[str, Any]]:
        query = "labelSelector=app.kubernetes.io%2Fname%3Dt9k-controller"
        return list(self.client.json("GET", f"/api/v1/namespaces/{SYSTEM}/pods?{query}")["items"])

    def wait_replicas(self) -> None:
        """Both replicas up (not terminating) and ready: a standby with synced caches exists."""

        def ready() -> bool:
            live = [p for p in self.pods() if not p["metadata"].get("deletionTimestamp")]
            return len(live) == REPLICAS and all(_ready(p) for p in live)

        wait_for(f"{REPLICAS} ready controller replicas", ready, ROLLOUT_TIMEOUT, 0.2)

    def log(self, pod: str) -> str:
        status, raw = self.client.call("GET", f"/api/v1/namespaces/{SYSTEM}/pods/{pod}/log")
        return raw.decode(errors="replace") if status == 200 else ""

    def close(self) -> None:
        self.client.close()


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass
class Handover:
    how: str  # "delete" (SIGTERM, the Lease is released) or "kill" (SIGKILL, the Lease must expire)
    old: str
    new: str
    gone: float  # Unix seconds: the kill was issued
    acquired: float  # the new leader's Lease acquireTime
    first_reconcile: float  # the new leader's "first reconcile done"

    @property
    def seconds(self) -> float:
        return self.first_reconcile - self.gone


def kill_leader(install: Install, how: str) -> Handover:
    """Remove the leader's pod by ``how`` and wait until another replica has reconciled as leader."""
    old = install.holder()
    assert old is not None, "no leader to kill"
    if how == "delete":
        gone = time.time()
        install.client.json("DELETE", f"/api/v1/namespaces/{SYSTEM}/pods/{old}")
    elif how == "kill":
        pod = install.client.json("GET", f"/api/v1/namespaces/{SYSTEM}/pods/{old}")
        attempt = PodDir.of(install.cluster.state_dir, pod).container("controller").attempts()[-1]
        pid = int(read_json(attempt.pid)["container"])
        gone = time.time()
        os.kill(pid, signal.SIGKILL)
        install.client.json(
            "DELETE", f"/api/v1/namespaces/{SYSTEM}/pods/{old}", {"gracePeriodSeconds": 0}
        )  # as the node's loss followed by the pod's eviction: the process never comes back
    else:
        raise ValueError(f"how: {how!r}")
    new = wait_for(
        f"a leader other than {old}",
        lambda: (h := install.holder()) not in (None, old) and h,
        HANDOVER_TIMEOUT,
        0.05,
    )
    acquired = parse_timestamp(install.lease()["acquireTime"]).timestamp()

    def first_reconcile() -> float | None:
        for line in install.log(new).splitlines():
            if '"first reconcile done"' in line:
                return parse_timestamp(json.loads(line)["ts"]).timestamp()
        return None

    done = wait_for(f"the first reconcile of {new}", first_reconcile, HANDOVER_TIMEOUT, 0.2)
    return Handover(how, old, new, gone, acquired, done)


@dataclass
class Outcome:
    """Per job: pods created beyond its replicas, whether it did not succeed, whether its status disagrees
    with its pods (a lost update); and what was wrong, readably."""

    duplicates: list[int] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    inconsistent: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, name: str, extra_pods: int, succeeded: bool, agrees: bool) -> None:
        self.duplicates.append(max(0, extra_pods))
        self.unfinished.append(int(not succeeded))
        self.inconsistent.append(int(not agrees))
        if extra_pods:
            self.problems.append(f"{name}: {REPLICAS + extra_pods} pods created for {REPLICAS} replicas")
        if not succeeded:
            self.problems.append(f"{name}: not Succeeded")


@dataclass
class JobLoad:
    """GenericJobs of two workers created while leaders are killed, and every pod ever created for them."""

    install: Install
    seconds: float = 3.0
    names: list[str] = field(default_factory=list)
    pod_uids: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    _watch: Watch | None = None

    def start(self) -> None:
        ensure_namespace(self.install.client, JOBS_NAMESPACE)
        self._watch = Watch(self.install.cluster, f"/api/v1/namespaces/{JOBS_NAMESPACE}/pods", self._on_pod)
        self._watch.start()
        self._watch.ready.wait(30)

    def _on_pod(self, _type: str, pod: dict[str, Any], _at: float) -> None:
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "GenericJob":
                self.pod_uids[ref["name"]].add(pod["metadata"]["uid"])

    def submit(self, count: int) -> None:
        for _ in range(count):
            name = f"fo-{uuid.uuid4().hex[:8]}"
            job = manifests.job("GenericJob", name, JOBS_NAMESPACE, replicas=2)
            for replica in job["spec"]["replicaSpecs"]:
                replica["template"]["spec"]["containers"][0]["command"] = ["sleep", f"{self.seconds:g}"]
            self.install.client.json("POST", manifests.collection("GenericJob", JOBS_NAMESPACE), job)
            self.names.append(name)

    def jobs(self) -> dict[str, dict[str, Any]]:
        """The jobs this load submitted (an earlier load's may share the namespace)."""
        items = self.install.client.json("GET", manifests.collection("GenericJob", JOBS_NAMESPACE))["items"]
        return {j["metadata"]["name"]: j for j in items if j["metadata"]["name"] in self.names}

    def finish(self) -> Outcome:
        """Wait for every job to end, then judge each against the pods it got."""
        phase = lambda j: (j.get("status") or {}).get("phase")  # noqa: E731
        wait_for(
            "every job to end",
            lambda: all(phase(j) in ("Succeeded", "Failed") for j in self.jobs().values()),
            JOBS_TIMEOUT,
            0.5,
        )
        time.sleep(1)  # the last pod events reach the watch
        assert self._watch is not None
        self._watch.stop()
        outcome = Outcome()
        pods = self.install.client.json("GET", f"/api/v1/namespaces/{JOBS_NAMESPACE}/pods")["items"]
        for name, job in sorted(self.jobs().items()):
            status = job.get("status") or {}
            created = len(self.pod_uids[name])
            listed = {
                p["metadata"]["uid"]: p["status"].get("phase")
                for p in pods
                if any(r.get("name") == name for r in p["metadata"].get("ownerReferences") or [])
            }
            recorded = {r["uid"]: r.get("phase") for t in status.get("tasks") or [] for r in task_replicas(t)}
            agrees = recorded == listed and (status.get("aggregate") or {}).get("succeeded") == REPLICAS
            outcome.add(name, created - REPLICAS, status.get("phase") == "Succeeded", agrees)
            if not agrees:
                outcome.problems.append(f"{name}: status {recorded} {status.get('aggregate')}, pods {listed}")
        return outcome


def run_handovers(install: Install, hows: list[str], jobs_per_kill: int) -> tuple[list[Handover], Outcome]:
    """One kill per entry of ``hows``, each with fresh jobs in flight; the handovers and the jobs' outcome."""
    load = JobLoad(install)
    load.start()
    handovers = []
    for i, how in enumerate(hows):
        install.wait_replicas()
        load.submit(jobs_per_kill)
        handover = kill_leader(install, how)
        handovers.append(handover)
        progress(
            f"{how} {i + 1}/{len(hows)}: {handover.old} -> {handover.new} in {handover.seconds:.2f} s "
            f"(acquired after {handover.acquired - handover.gone:.2f} s)"
        )
    return handovers, load.finish()


def measure(work: Path, kills: int) -> list[Figure]:
    """``kills`` handovers of each kind, alternating, 3 jobs of 2 pods created just before each."""
    with LocalCluster(work / "failover-cluster") as cluster:
        install = Install(cluster, work / "failover-kubectl-cache")
        try:
            install.apply()
            handovers, outcome = run_handovers(install, ["delete", "kill"] * kills, jobs_per_kill=3)
        finally:
            install.close()
    for problem in outcome.problems:
        progress(problem)
    settings = lease_settings()
    timing = (
        f"leaseDuration {settings['lease_duration']:g} s, renewDeadline {settings['renew_deadline']:g} s, "
        f"retryPeriod {settings['retry_period']:g} s"
    )
    figures = []
    for how, label in (("delete", "pod deleted (SIGTERM)"), ("kill", "pod SIGKILLed")):
        mine = [h for h in handovers if h.how == how]
        figures += [
            Figure(SECTION, f"{label}: leader gone -> Lease acquired by the other replica", "s",
                   [h.acquired - h.gone for h in mine], digits=2, note=timing),
            Figure(SECTION, f"{label}: leader gone -> new leader's first reconcile", "s",
                   [h.seconds for h in mine], digits=2, note=f"{len(mine)} handovers"),
        ]  # fmt: skip
    jobs = f"per job, {len(outcome.duplicates)} jobs"
    figures += [
        Figure(SECTION, "duplicate pods", "pods", outcome.duplicates, target=("<=", 0), zero_ok=True,
               note=jobs, digits=0),
        Figure(SECTION, "jobs not Succeeded", "jobs", outcome.unfinished, target=("<=", 0), zero_ok=True,
               note=jobs, digits=0),
        Figure(SECTION, "status disagreeing with the pods", "jobs", outcome.inconsistent, target=("<=", 0),
               zero_ok=True, note=jobs, digits=0),
    ]  # fmt: skip
    return figures
