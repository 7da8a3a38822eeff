"""A training disrupted on a 3-node local cluster, end to end through Airflow (``dag.test()``, the DAG in
``dags/t9k_it_disruptions.py``): the example pipeline's 2-worker training, one worker per node, held at a
known step while worker-1's node is drained with unmodified ``kubectl drain``, while that node's kubelet is
SIGKILLed and held stopped, or while a higher-priority job preempts the training and then finishes. Each time
the task succeeds on its first try, its log says what happened and from which step and checkpoint the
training resumed, and the training ends with an undisturbed run's losses. The same DAG with a bug at step 3
fails on try 1 though ``retries=3``, its message leading with the rank's traceback
(docs/airflow.md#how-a-task-ends, docs/controller.md#disruptions).

One cluster for the module: a kubelet silent for 3 s makes its node Unknown, pods tolerate that 2 s.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.jobclient import identity as ident
from t9k_provider.jobs.contract import ANNOTATION_JOB_RESTARTS, LABEL_OWNER_NAME
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.operators import checkpoints
from t9k_provider.testing import LocalCluster, wait_for
from tests.airflow.cluster import airflow_on_cluster, run, why_failed
from tests.airflow.dags.t9k_it_disruptions import (
    CHECKPOINTS,
    CPU,
    DATA,
    EPOCHS,
    PRIORITY,
    SCENARIO,
    WORKLOADS,
)
from tests.airflow.versions import stored_xcoms
from tests.support.builders import make_container, make_job, make_template

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420), pytest.mark.usefixtures("kubectl_binary")]

GROUP, VERSION, PLURAL = "batch.tensorstack.dev", "v1beta1", "pytorchtrainingjobs"
NS = "default"
SAMPLES = 1024
#: train.npz holds 80% of SAMPLES, each rank half of it, in batches of 64.
STEPS_PER_EPOCH = (SAMPLES - int(SAMPLES * 0.2)) // 2 // 64
#: The training is held after this step (epoch 3's third): its last checkpoint is epoch 2's.
HOLD_AT = 2 * STEPS_PER_EPOCH + 3
RESUMED_AT = 2 * STEPS_PER_EPOCH + 1
#: What a disrupted run's log says about it, for an assertion's message.
TOLD = r"disruption: |progress: |resuming|epoch \d+/\d+ loss|T9k\w+: "
NODES = [FIRST_NODE, f"{FIRST_NODE}-1", f"{FIRST_NODE}-2"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three nodes of one CPU (each takes one worker of 600m); the data set written once."""
    done = subprocess.run(
        [sys.executable, str(WORKLOADS / "prepare_data.py"), "--out", str(DATA), "--samples", str(SAMPLES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with airflow_on_cluster(
        tmp_path_factory.mktemp("t9k-it-disruptions"),
        nodes=3,
        capacity={"cpus": "1", "memory": "4Gi"},
        node_grace=3,
        toleration_seconds=2,
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture(scope="module")
def custom(cluster: LocalCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


@dataclass
class Run:
    state: str
    tries: int
    out: str
    run_id: str
    dag_id: str

    def directory(self) -> Path:
        identity = {ident.DAG_ID: self.dag_id, ident.RUN_ID: self.run_id, ident.TASK_ID: "train"}
        return CHECKPOINTS / checkpoints.subdirectory({**identity, ident.MAP_INDEX: "-1"})

    def losses(self) -> list[float]:
        return list(json.loads((self.directory() / "model" / "metrics.json").read_text())["losses"])


def tries(dag_id: str, run_id: str) -> int:
    from airflow.models import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    where = (TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == "train")
    with create_session() as session:
        return int(session.scalar(select(TaskInstance.try_number).where(*where)))


@pytest.fixture
def output(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> Callable[[], str]:
    """What a run told: the task log, on stdout (Airflow 3's structlog), and what went through logging (on
    Airflow 2 the trigger ``dag.test()`` runs in line logs there)."""
    caplog.set_level(logging.INFO)
    return lambda: caplog.text + capfd.readouterr().out


def train(dags: dict[str, Any], output: Callable[[], str], dag_id: str, **conf: Any) -> Run:
    state, _, run_id = run(dags, dag_id, conf=conf)
    return Run(state, tries(dag_id, run_id), output(), run_id, dag_id)


def kubectl(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["kubectl", "--kubeconfig", str(cluster.kubeconfig), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def ready(core: client.CoreV1Api, node: str) -> bool:
    found = core.read_node(node)
    conditions = {c.type: c.status for c in found.status.conditions or []}
    return conditions.get("Ready") == "True" and not found.spec.taints


def job_of(custom: client.CustomObjectsApi, scenario: str) -> dict[str, Any]:
    found = custom.list_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, label_selector=f"{SCENARIO}={scenario}"
    )["items"]
    assert len(found) == 1, [j["metadata"]["name"] for j in found]
    return dict(found[0])


def pods_of(core: client.CoreV1Api, job: str) -> list[client.V1Pod]:
    return list(core.list_namespaced_pod(NS, label_selector=f"{LABEL_OWNER_NAME}={job}").items)


class Disruption(threading.Thread):
    """While the DAG runs: waits for the training held at ``HOLD_AT``, disrupts worker-1's node
    (``disrupt(node)``), waits until the controller has restarted the job as a whole (every replica's pod
    created again for restart 1: the old ones are gone), then lets the training go on."""

    def __init__(
        self,
        core: client.CoreV1Api,
        custom: client.CustomObjectsApi,
        scenario: str,
        gate: Path,
        disrupt: Callable[[str], None],
    ) -> None:
        super().__init__(name=f"disrupt-{scenario}", daemon=True)
        self.core, self.custom, self.scenario, self.gate, self.disrupt = core, custom, scenario, gate, disrupt
        self.node = ""
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            reached = self.gate.with_name(self.gate.name + ".reached")
            wait_for(f"the training held at step {HOLD_AT}", reached.exists, 180)
            name = job_of(self.custom, self.scenario)["metadata"]["name"]
            (victim,) = [p for p in pods_of(self.core, name) if p.metadata.name == f"{name}-worker-1"]
            self.node = victim.spec.node_name
            self.disrupt(self.node)

            def restarted() -> bool:
                job = self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
                pods = pods_of(self.core, name)
                return (
                    (job.get("status") or {}).get("restarts") == 1
                    and len(pods) == 2
                    and all((p.metadata.annotations or {}).get(ANNOTATION_JOB_RESTARTS) == "1" for p in pods)
                )

            wait_for("the job restarted as a whole, its replicas created again", restarted, 180)
        except BaseException as exc:  # the test's thread raises it
            self.error = exc
        finally:
            self.gate.touch()  # the training goes on (or, after a failure here, ends)


def disrupted(
    dags: dict[str, Any],
    output: Callable[[], str],
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    tmp_path: Path,
    dag_id: str,
    scenario: str,
    disrupt: Callable[[str], None],
) -> tuple[Run, str]:
    """The DAG run with worker-1's node disrupted at ``HOLD_AT``; the run and that node."""
    gate = tmp_path / "gate"
    disruption = Disruption(core, custom, scenario, gate, disrupt)
    disruption.start()
    ran = train(dags, output, dag_id, scenario=scenario, gate=str(gate), hold_at=HOLD_AT)
    disruption.join(60)
    if disruption.error is not None:
        raise AssertionError(f"{disruption.error}\n{why_failed(ran.out)}") from disruption.error
    return ran, disruption.node


def check_resumed(ran: Run, undisturbed: Run, what: str, reason: str) -> None:
    """The task succeeded on its first try, said what happened (``what``, a pattern: the replica and how it
    was lost) and where the training resumed, and ended with the undisturbed run's losses; XCom
    ``t9k_disruptions`` holds the one disruption (the pod signal's ``reason``)."""
    assert (ran.state, ran.tries) == ("success", 1), why_failed(ran.out)
    told = "\n".join(line for line in ran.out.splitlines() if re.search(TOLD, line))
    said = rf"disruption: {what} at [\d:]+ UTC; the job restarts as a whole \(restart 1\)"
    assert re.search(said, ran.out), told
    lost = HOLD_AT - RESUMED_AT  # how far the progress went back (the steps since the checkpoint: one more)
    resumed = f"progress: resumed at step {RESUMED_AT} after reaching step {HOLD_AT} ({lost} steps lost)"
    assert resumed in ran.out, told
    assert "rank 0: resuming after epoch 2 from /t9k/checkpoints/latest.pt" in ran.out, told
    assert ran.losses() == undisturbed.losses(), told
    (entries,) = stored_xcoms(ran.dag_id, ran.run_id, "train", "t9k_disruptions")
    assert [(e["reason"], e["restart"]) for e in entries] == [(reason, 1)], entries
    assert f"disruption: {entries[0]['replica']} was " in ran.out, entries


@pytest.fixture(scope="module")
def undisturbed(dags: dict[str, Any], cluster: LocalCluster) -> Run:
    """The same training, never held nor disrupted."""
    state, _, run_id = run(dags, "it_disrupted", conf={"scenario": "undisturbed"})
    ran = Run(state, tries("it_disrupted", run_id), "", run_id, "it_disrupted")
    assert (ran.state, ran.tries) == ("success", 1)
    assert len(ran.losses()) == EPOCHS
    return ran


def test_a_drained_node_restarts_the_training_from_its_checkpoint_within_the_try(
    cluster: LocalCluster,
    dags: dict[str, Any],
    output: Callable[[], str],
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    undisturbed: Run,
    tmp_path: Path,
) -> None:
    def drain(node: str) -> None:
        drained = kubectl(
            cluster, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"
        )
        assert f"node/{node} drained" in drained.stdout, drained.stdout + drained.stderr

    try:
        ran, node = disrupted(dags, output, core, custom, tmp_path, "it_disrupted", "drain", drain)
    finally:
        for name in NODES:
            kubectl(cluster, "uncordon", name)
    check_resumed(
        ran,
        undisturbed,
        rf"worker-1 was evicted \(drain of node {node}\)",
        "EvictionByEvictionAPI",
    )


def test_a_node_whose_kubelet_is_killed_restarts_the_training_from_its_checkpoint_within_the_try(
    cluster: LocalCluster,
    dags: dict[str, Any],
    output: Callable[[], str],
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    undisturbed: Run,
    tmp_path: Path,
) -> None:
    """Deferred: the trigger says the disruption."""
    stopped: list[str] = []

    def kill_kubelet(node: str) -> None:
        stopped.append(node)
        cluster.stop_node(node)

    try:
        ran, node = disrupted(
            dags, output, core, custom, tmp_path, "it_disrupted_deferrable", "lost", kill_kubelet
        )
    finally:
        for name in stopped:
            cluster.start_node(name)
            wait_for(f"{name} Ready and untainted", lambda n=name: ready(core, n), 60)
    check_resumed(
        ran,
        undisturbed,
        rf"worker-1 was lost: node {node} stopped reporting",
        "DeletionByTaintManager",
    )


def test_a_preempted_training_restarts_from_its_checkpoint_once_the_preemptor_finished(
    cluster: LocalCluster,
    dags: dict[str, Any],
    output: Callable[[], str],
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    undisturbed: Run,
    tmp_path: Path,
) -> None:
    """A GenericJob of priority 80 whose two workers do not fit beside the training (one free node) preempts
    its gang, runs 2 s and succeeds; the training then runs again."""
    urgent = "urgent-train"
    container = make_container(
        "main", command=[sys.executable, "-c", "import time; time.sleep(2)"],
        resources={"requests": {"cpu": CPU}},
    )  # fmt: skip
    spec = {
        "scheduler": {"t9kScheduler": {"queue": "default", "priority": 80}},
        "replicaSpecs": [{"type": "worker", "replicas": 2, "template": make_template(container)}],
    }

    def preempt(node: str) -> None:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, NS, "genericjobs", make_job("GenericJob", urgent, spec, namespace=NS)
        )

    try:
        ran, _ = disrupted(dags, output, core, custom, tmp_path, "it_disrupted", "preempted", preempt)
        finished = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "genericjobs", urgent)
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, NS, "genericjobs", urgent)
    assert finished["status"]["phase"] == "Succeeded", finished["status"]
    check_resumed(
        ran,
        undisturbed,
        rf"worker-[01] was preempted by {NS}/{urgent} \(priority 80 > {PRIORITY}\) on node [\w-]+",
        "PreemptionByScheduler",
    )


def test_a_bug_fails_the_task_on_its_first_try_leading_with_the_ranks_traceback(
    dags: dict[str, Any], output: Callable[[], str]
) -> None:
    """Every rank raises ``ValueError`` at step 3: a workload failure (``T9kJobFailed``), not retried whatever
    ``retries`` says; the message names the rank that failed first and goes on with its traceback."""
    ran = train(dags, output, "it_disrupted", scenario="bug", bug_at=3)
    assert (ran.state, ran.tries) == ("failed", 1), why_failed(ran.out)
    message = ran.out[ran.out.index("T9kJobFailed: ") :]
    lead, following, *rest = message.splitlines()
    first = re.fullmatch(
        r"T9kJobFailed: job default/(\S+) failed: (\S+-worker-[01]) failed first, at \S+: exit code 1", lead
    )
    assert first, message[:3000]
    assert following == f"last 50 log lines of {first[2]}:", message[:3000]
    traceback = "\n".join(rest[: rest.index("then, after it:")])
    assert "Traceback (most recent call last):" in traceback, message[:3000]
    assert traceback.endswith("ValueError: a bug in the training code at step 3"), message[:3000]
    assert "disruption:" not in ran.out and "resum" not in ran.out
