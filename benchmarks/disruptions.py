"""A distributed training disrupted, and how long until it trains again (``python -m benchmarks --only
disruptions``; ``METHOD`` says what is measured and how): worker-1's node drained with ``kubectl drain``, its
kubelet SIGKILLed, or the training preempted by a higher-priority job, on a 3-node local cluster with the T9k
controller (docs/controller.md#disruptions).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.api import Client, progress
from benchmarks.stats import Figure, MeasurementError
from t9k_provider.jobs.contract import ANNOTATION_JOB_RESTARTS, LABEL_OWNER_NAME
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.testing import LocalCluster, wait_for

SECTION = "14. Disruptions: drain, node loss, preemption"
WORKLOADS = Path(__file__).resolve().parent.parent / "dags_examples" / "workloads"
JOBS = "/apis/batch.tensorstack.dev/v1beta1/namespaces/default"
NODES = [FIRST_NODE, f"{FIRST_NODE}-1", f"{FIRST_NODE}-2"]
#: The training: 4,096 samples (25 steps of 64 per rank and epoch), a checkpoint every epoch, each step
#: paced to STEP_SECONDS (the tiny model itself takes milliseconds); worker-1 is disrupted once the training
#: is between 1.2 and 2.8 epochs in (seeded), so the steps since the last checkpoint spread over an epoch.
SAMPLES = 4096
STEPS_PER_EPOCH = (SAMPLES - int(SAMPLES * 0.2)) // 2 // 64
STEP_SECONDS = 0.1
EPOCHS = 60
#: Node lifecycle settings of the cluster: a kubelet silent this long makes its node Unknown; pods tolerate
#: an unreachable node this long (Kubernetes' defaults: 50 s and 300 s).
NODE_GRACE = 5.0
TOLERATION = 5
#: How long the preempting job's two workers run.
PREEMPTOR_SECONDS = 5.0
PRIORITY, URGENT_PRIORITY = 50, 80
CPU = "600m"  # more than half a node of one CPU: one worker per node
#: How often the job's restarts (and the preemptor's phase) are read: a restart lands about 0.1 s after a
#: drain, where a 0.1 s poll rounded it to 0.1 or 0.2 s by chance (a few ms either side).
POLL = 0.01
SCENARIOS = ("drain", "node loss", "preemption")
METHOD = f"""\
One local cluster of three nodes of one CPU each (`LocalCluster(controller=True, nodes=3)`, node grace
{NODE_GRACE:g} s, pods tolerating an unreachable node {TOLERATION} s: Kubernetes' defaults are 50 s and 300 s)
runs, per run and scenario, the example pipeline's training (`dags_examples/workloads/train_ddp.py`: two
workers of {CPU} CPU, one per node, gloo; seeded; rank 0 checkpoints model, optimizer and losses every
epoch of {STEPS_PER_EPOCH} steps, and every rank resumes from the checkpoint when its job restarted,
`T9K_JOB_RESTARTS`), each step paced to {STEP_SECONDS:g} s, as a PyTorchTrainingJob of priority {PRIORITY}
(a T9k scheduler gang). A wrapper records each step rank 0 reports, with the host's time and the job restart
it belongs to. Once the training is between 1.2 and 2.8 epochs in (seeded), worker-1 is disrupted: its node
drained with `kubectl drain` (unmodified; it returns once the evicted pod is gone), its node's kubelet
SIGKILLed and held stopped (`t9k-local node stop`), or a GenericJob of priority {URGENT_PRIORITY} whose two
workers of {CPU} CPU do not fit beside the training (one node free) is created; it preempts the training's
gang and runs {PREEMPTOR_SECONDS:g} s. *Disruption* is the instant the drain, the SIGKILL or the preemptor's
create was issued; *restart* the first time a poll (every {POLL * 1000:g} ms) sees the job's `status.restarts`
at 1 (the controller restarting the job as a whole); *running again* the first step the resumed training
reported. *Steps lost* are those the training had reached beyond its last checkpoint (the step it reached
before the disruption, less the step of the checkpoint it resumed from). Then the job is deleted and the node
uncordoned or started again (and Ready). Figures are over the runs of each scenario (median, min-max); all
times are on the one host clock."""
ANALYSIS = """\
A drained node and a preemption are seen at once: the eviction (or the preemption's delete) marks worker-1's
pod with `DisruptionTarget`, and the controller restarts the job as a whole about 20 ms after the eviction
(traced below), without charging its `backoffLimit` (docs/controller.md#r9); a drain's 0.15 s is mostly
`kubectl`'s own start and its five requests before the eviction. Training then runs again about 3.7 s after
the restart: the new pods are placed and started, each rank imports torch, gloo's rendezvous completes and
every rank loads the last checkpoint (2.1 s at 845a2d8 on 2026-11-29; it moves with the host's speed, as does
section 11's work run directly: 3.97 s at 8713154, 5.43 s at 056cb60). A preempted training waits for its
preemptor first (it holds the CPU the gang needs), so its time to running again is the preemptor's run plus
the same 3.4 s. A lost node is slower by design: nothing tells the cluster a silent node is gone until its
grace period (5 s here) marks it Unknown and taints it, and the pod goes when its toleration of the taint (5 s
here) ends, about 10 s in all; the restart that follows takes the same 3.7 s. With Kubernetes' defaults (50 s
of grace, 300 s of toleration) that first part is about 6 minutes; a training that should come back sooner
sets `tolerationSeconds` on `node.kubernetes.io/unreachable` in its pod template. The steps lost are the ones
since the last checkpoint, at most one checkpoint interval (here an epoch of 25 steps): 10 (drain), 11 (node
loss: the surviving rank went on until the restart) and 12 (preemption) at the median. The task, its DAG and
its retries see none of it: on the Airflow side the same scenarios end with the task succeeding on its first
try (`tests/airflow/test_disruptions_on_cluster.py`).

This table (e429380, 2026-12-01 10:15-10:17 UTC) replaces one of 056cb60 (07:08-07:11 UTC the same day), whose
drain restart of 0.22 s (0.22-0.23) against 0.11 s (0.10-0.21) at 213bae4 was the poll's rounding: the job's
restarts were read every 0.1 s, and a restart landing about 0.1 s after the drain was seen at 0.1 or 0.2 s by
a few milliseconds either side. Traced on a three-node cluster with sleeping workers, `kubectl drain -v=6`
and a 10 ms poll: the restart was seen 0.08-0.10 s after the drain began, 0.20 s on `kubectl`'s first drain
of a cluster (it fetches the API discovery, 13 requests, before it cordons). The polls are now every 10 ms:
a drain's restart 0.15 s (0.15-0.18), a preemption's 0.07 s (0.11 at 056cb60), a lost node's 10.19 s (9.90,
spread 9.30-10.21; the node monitor's and the taint manager's periodic checks set it, a second's granularity
around the 5 s + 5 s), running again 3.96 s (4.48), 14.30 s (14.28) and 8.72 s (9.06) after the disruption.
The 9 scenarios ran without a gloo reset, as in 056cb60's run (before 7fc56ee, c5107cc's run met one)."""

WRAPPER = f"""
import json, os, sys, time
sys.path.insert(0, {str(WORKLOADS)!r})
import train_ddp

record, report = os.environ["STEPS_FILE"], train_ddp.report
restart = os.environ.get("T9K_JOB_RESTARTS") or "0"


def paced(step, total=None, **metrics):
    report(step, total, **metrics)
    if os.environ["RANK"] == "0":
        with open(record, "a") as out:
            out.write(json.dumps({{"step": step, "time": time.time(), "restart": restart}}) + "\\n")
    time.sleep({STEP_SECONDS})


train_ddp.report = paced
code = train_ddp.main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""


@dataclass(frozen=True)
class Outcome:
    """One disrupted run, in seconds since the disruption (``restarted``: the controller's restart seen;
    ``running``: the resumed training's first step), and the steps it lost."""

    restarted: float
    running: float
    lost: int
    preemptor_done: float | None = None


def steps_lost(reports: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """The steps reached beyond the checkpoint resumed from, and the resumed training's first report: the
    last step of restart 0 less the step before restart 1's first (a step is reported once it is done)."""
    before = [r for r in reports if r["restart"] == "0"]
    after = [r for r in reports if r["restart"] == "1"]
    if not before or not after:
        raise MeasurementError(f"no report before or after the restart: {reports[-5:]}")
    return before[-1]["step"] - (after[0]["step"] - 1), after[0]


def training(name: str, steps_file: Path, data: Path, checkpoints: Path) -> dict[str, Any]:
    args = ["--data", str(data), "--out", str(checkpoints / "model"), "--epochs", str(EPOCHS)]
    restarts = {"fieldRef": {"fieldPath": f"metadata.annotations['{ANNOTATION_JOB_RESTARTS}']"}}
    env = [
        {"name": "STEPS_FILE", "value": str(steps_file)},
        {"name": "T9K_CHECKPOINT_DIR", "value": str(checkpoints)},
        {"name": "T9K_TRY_NUMBER", "value": "1"},
        {"name": "T9K_JOB_RESTARTS", "valueFrom": restarts},
    ]
    container = {
        "name": "pytorch", "image": "pytorch/pytorch", "command": [sys.executable, "-c", WRAPPER, *args],
        "env": env, "resources": {"requests": {"cpu": CPU, "memory": "256Mi"}},
    }  # fmt: skip
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "scheduler": {"t9kScheduler": {"queue": "default", "priority": PRIORITY}},
            "runPolicy": {"backoffLimit": 0},
            "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": "Never", "template": {
                "spec": {"containers": [container], "terminationGracePeriodSeconds": 5}}}],
        },
    }  # fmt: skip


def preemptor(name: str) -> dict[str, Any]:
    container = {
        "name": "main", "image": "python", "resources": {"requests": {"cpu": CPU}},
        "command": [sys.executable, "-c", f"import time; time.sleep({PREEMPTOR_SECONDS})"],
    }  # fmt: skip
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
        "spec": {
            "scheduler": {"t9kScheduler": {"queue": "default", "priority": URGENT_PRIORITY}},
            "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "Never"},
                              "template": {"spec": {"containers": [container]}}}],
        },
    }  # fmt: skip


def read_reports(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


class Bench:
    """The cluster and what a run needs of it."""

    def __init__(self, cluster: LocalCluster, work: Path, data: Path) -> None:
        self.cluster, self.work, self.data = cluster, work, data
        self.api = Client(cluster)

    def job(self, plural: str, name: str) -> dict[str, Any] | None:
        status, body = self.api.call("GET", f"{JOBS}/{plural}/{name}")
        return json.loads(body) if status == 200 else None

    def pods(self, name: str) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/default/pods?labelSelector={LABEL_OWNER_NAME}%3D{name}"
        return list(self.api.json("GET", path)["items"])

    def kubectl(self, *args: str) -> None:
        argv = ["kubectl", "--kubeconfig", str(self.cluster.kubeconfig), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise MeasurementError(f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}")

    def delete(self, plural: str, name: str) -> None:
        self.api.call("DELETE", f"{JOBS}/{plural}/{name}", {"propagationPolicy": "Foreground"})
        wait_for(f"{name} gone", lambda: self.job(plural, name) is None and not self.pods(name), 120)

    def ready(self, node: str) -> bool:
        found = self.api.json("GET", f"/api/v1/nodes/{node}")
        ready = {c["type"]: c["status"] for c in found["status"].get("conditions") or []}.get("Ready")
        return ready == "True" and not found["spec"].get("taints")

    def run(self, scenario: str, index: int, at_step: int) -> Outcome:
        name, urgent = f"{scenario.replace(' ', '-')}-{index}", f"urgent-{index}"
        steps = self.work / f"{name}.steps"
        steps.unlink(missing_ok=True)
        self.api.json(
            "POST", f"{JOBS}/pytorchtrainingjobs", training(name, steps, self.data, self.work / name)
        )
        reached = lambda: any(r["step"] >= at_step for r in read_reports(steps))  # noqa: E731
        wait_for(f"{name} at step {at_step}", reached, 180)
        (victim,) = [p for p in self.pods(name) if p["metadata"]["name"] == f"{name}-worker-1"]
        node = victim["spec"]["nodeName"]
        drain = Background(lambda: self.kubectl("drain", node, "--ignore-daemonsets", "--timeout=120s"))
        began = time.time()
        try:
            if scenario == "drain":
                drain.start()  # it returns once the evicted pod is gone
            elif scenario == "node loss":
                self.cluster.stop_node(node)
            else:
                self.api.json("POST", f"{JOBS}/genericjobs", preemptor(urgent))
            restarted = wait_for(
                f"{name} restarted", lambda: self.restarts(name) == 1 and time.time(), 180, POLL
            )
            done = (
                wait_for(f"{urgent} done", lambda: self.succeeded(urgent), 180, POLL)
                if scenario == "preemption"
                else None
            )
            resumed = lambda: any(r["restart"] == "1" for r in read_reports(steps))  # noqa: E731
            wait_for(f"{name} running again", resumed, 240)
            lost, first = steps_lost(read_reports(steps))
            return Outcome(
                restarted - began, first["time"] - began, lost, None if done is None else done - began
            )
        finally:
            drain.finish()
            self.delete("pytorchtrainingjobs", name)
            if scenario == "drain":
                self.kubectl("uncordon", node)
            if scenario == "node loss":
                self.cluster.start_node(node)
                wait_for(f"{node} Ready and untainted", lambda: self.ready(node), 120)
            if scenario == "preemption":
                self.delete("genericjobs", urgent)

    def restarts(self, name: str) -> int | None:
        return ((self.job("pytorchtrainingjobs", name) or {}).get("status") or {}).get("restarts")

    def succeeded(self, name: str) -> float | None:
        """When a poll first saw the GenericJob ``name`` Succeeded (None: not yet)."""
        phase = ((self.job("genericjobs", name) or {}).get("status") or {}).get("phase")
        return time.time() if phase == "Succeeded" else None


class Background(threading.Thread):
    """``action`` beside the measurement; ``finish`` waits for it and raises what it raised."""

    def __init__(self, action: Callable[[], None]) -> None:
        super().__init__(name="disrupt", daemon=True)
        self.action = action
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.action()
        except BaseException as exc:  # raised by finish
            self.error = exc

    def finish(self) -> None:
        if self.is_alive() or self.ident is not None:
            self.join(180)
        if self.error is not None:
            raise self.error


def measure(work: Path, runs: int, seed: int = 32) -> list[Figure]:
    data = work / "disruptions-data"
    done = subprocess.run(
        [sys.executable, str(WORKLOADS / "prepare_data.py"), "--out", str(data), "--samples", str(SAMPLES)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        raise MeasurementError(f"prepare_data.py: {done.stderr}")
    rng = random.Random(seed)
    outcomes: dict[str, list[Outcome]] = {s: [] for s in SCENARIOS}
    options = {"nodes": 3, "capacity": {"cpus": "1", "memory": "4Gi"}}
    lifecycle = {"node_grace": NODE_GRACE, "toleration_seconds": TOLERATION}
    with LocalCluster(work / "disruptions-cluster", controller=True, **options, **lifecycle) as cluster:
        bench = Bench(cluster, work, data)
        for index in range(runs):
            for scenario in SCENARIOS:
                at_step = rng.randint(int(1.2 * STEPS_PER_EPOCH), int(2.8 * STEPS_PER_EPOCH))
                progress(f"disruptions: {scenario}, run {index + 1}/{runs}, at step {at_step}")
                outcomes[scenario].append(bench.run(scenario, index, at_step))
    return figures(outcomes)


def figures(outcomes: dict[str, list[Outcome]]) -> list[Figure]:
    """Per scenario: the controller's reaction, the restart's (from the preemptor's end for a preemption), the
    whole time from the disruption to the training running again, and the steps lost."""
    out = []
    for scenario, found in outcomes.items():
        if scenario == "preemption":
            ran = [o.preemptor_done or 0.0 for o in found]
            parts = [
                (f"preemptor created -> it finished ({PREEMPTOR_SECONDS:g} s of work)", ran),
                (
                    "preemptor finished -> training running again",
                    [o.running - r for o, r in zip(found, ran, strict=True)],
                ),
            ]
        else:
            parts = [("the restart -> training running again", [o.running - o.restarted for o in found])]
        timed = [
            ("disruption -> the controller restarts the job", [o.restarted for o in found]),
            *parts,
            ("disruption -> training running again", [o.running for o in found]),
        ]
        out += [Figure(SECTION, f"{scenario}: {what}", "s", samples, digits=2) for what, samples in timed]
        lost = [float(o.lost) for o in found]
        what = f"{scenario}: steps lost since the last checkpoint (of {STEPS_PER_EPOCH} per epoch)"
        out.append(Figure(SECTION, what, "steps", lost, digits=0, zero_ok=True))
    return out
