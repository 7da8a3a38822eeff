"""A PyTorchTrainingJob with ``tensorboardSpec`` on the process-kubelet cluster with the T9k controller: the
training writes scalars into its claim, the local TensorBoard operator serves them with the real
``tensorboard``, the job's ``status.tensorboard`` says so, and the console's page for the job shows its
phase, replicas, events, last log lines (escaped) and the TensorBoard link. File sets the operator cannot
serve leave the TensorBoard not Ready with a reason that names them.

The operator runs in the cluster's controllers process, the console as a component of its own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.local.components import read_status
from t9k_provider.local.console import address
from t9k_provider.local.state import StateDir
from t9k_provider.local.tensorboard.board import UID_LABEL
from t9k_provider.testing import LocalCluster, wait_for
from tests.controller.e2e_support import NS, Jobs
from tests.support.builders import make_container, make_job, make_template
from tests.support.clusters import cluster_fixture
from tests.support.gates import py_gate

pytestmark = pytest.mark.cluster

cluster = cluster_fixture(controller=True)
JOB = "tb-train"
CLAIM = "tb-logs"
HOSTILE_LINE = '<script>alert("tb")</script> & done'
TRAIN = """
from torch.utils.tensorboard import SummaryWriter
writer = SummaryWriter("/logs/runs")
for step in range(5):
    writer.add_scalar("loss", 1.0 / (step + 1), step)
writer.close()
print("epoch 5 loss 0.2", flush=True)
print({hostile!r}, flush=True)
"""


@pytest.fixture(scope="module")
def console(cluster: LocalCluster) -> dict[str, Any]:
    """Where the cluster's console answers (``STATE/console.json``, written once it listens)."""
    return wait_for("the console's console.json", lambda: address.read_console(cluster.state_dir), timeout=30)


@pytest.fixture(scope="module")
def jobs(cluster: LocalCluster) -> Jobs:
    return Jobs(cluster.api_client())


@pytest.fixture(scope="module")
def custom(cluster: LocalCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


def tensorboard(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object("tensorstack.dev", "v1beta1", NS, "tensorboards", name)


def ready_condition(tb: dict[str, Any]) -> dict[str, Any]:
    conditions = (tb.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def training(jobs: Jobs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A worker that writes scalars into claim ``tb-logs`` (file set ``t9k://pvc/tb-logs/runs``), logs two
    lines, then waits at a gate (opened at the end) so that the job runs while the tests look at it."""
    gate = tmp_path_factory.mktemp("gate") / "open"
    script = TRAIN.format(hostile=HOSTILE_LINE) + py_gate(gate, 120)
    container = make_container("pytorch", py=script, volumeMounts=[{"name": "logs", "mountPath": "/logs"}])
    template = make_template(
        container, volumes=[{"name": "logs", "persistentVolumeClaim": {"claimName": CLAIM}}]
    )
    jobs.create(make_job("PyTorchTrainingJob", JOB, {
        "tensorboardSpec": {"trainingLogFilesets": [f"t9k://pvc/{CLAIM}/runs"]},
        "replicaSpecs": [{"type": "worker", "replicas": 1, "restartPolicy": "Never", "template": template}],
    }, namespace=NS))  # fmt: skip
    try:
        yield JOB
    finally:
        gate.touch()


def test_tensorboard_serves_the_scalars_the_training_wrote(
    training: str, jobs: Jobs, custom: client.CustomObjectsApi
) -> None:
    def served() -> str | None:
        tb = tensorboard(custom, training)
        return (tb.get("status") or {}).get("url") if ready_condition(tb).get("status") == "True" else None

    url = wait_for(f"TensorBoard {training} Ready with a URL", served, timeout=90)
    tb = tensorboard(custom, training)
    assert tb["status"]["phase"] == "Running"
    assert tb["status"]["pod"]["reference"]["name"] == f"{training}-tensorboard"
    run = f"{CLAIM}/runs"  # the file set's claim and path, under the pod's log root

    def tags() -> dict[str, Any] | None:
        found = json.loads(get(url + "data/plugin/scalars/tags")[1])
        return found if "loss" in found.get(run, {}) else None

    wait_for(f"the loss scalar of run {run} served", tags, timeout=30)
    query = urllib.parse.urlencode({"run": run, "tag": "loss"})
    status, body = get(f"{url}data/plugin/scalars/scalars?{query}")
    assert status == 200
    points = [(step, round(value, 4)) for _, step, value in json.loads(body)]
    assert points == [(0, 1.0), (1, 0.5), (2, 0.3333), (3, 0.25), (4, 0.2)]

    def mirrored() -> dict[str, Any] | None:
        mirror = (jobs.get("PyTorchTrainingJob", training).get("status") or {}).get("tensorboard") or {}
        return mirror if mirror.get("ready") else None

    mirror = wait_for("the job's status.tensorboard ready", mirrored, timeout=30)
    assert mirror["note"] == f"TensorBoard [{training}] is ready"
    assert mirror["dependent"]["uid"] == tb["metadata"]["uid"]


def test_job_page_shows_phase_replicas_events_logs_and_tensorboard(
    training: str, console: dict[str, Any], custom: client.CustomObjectsApi
) -> None:
    assert console["url"].startswith("http://127.0.0.1:")
    page_url = console["jobUrlTemplate"].format(namespace=NS, kind="PyTorchTrainingJob", name=training)

    def complete() -> str | None:
        status, page = get(page_url)
        assert status == 200, page
        wanted = ('href="http://', "epoch 5 loss 0.2", "Started")
        return page if all(w in page for w in wanted) else None

    page = wait_for("the job's page with its TensorBoard link, log lines and events", complete, timeout=90)
    tb_url = tensorboard(custom, training)["status"]["url"]
    assert f'<a href="{tb_url}">' in page
    assert "<td>Phase</td><td>Running</td>" in page
    assert (
        f"<td>worker-0</td><td>{training}-worker-0</td><td>Running</td><td>t9k-local-node</td><td>0</td>"
        in page
    )
    assert "<td>Scheduled</td>" in page and f"<td>Pod/{training}-worker-0</td>" in page
    assert f"<td>PyTorchTrainingJob/{training}</td>" in page  # the job's own events
    # A log line is text, never markup.
    assert "&lt;script&gt;alert(&quot;tb&quot;)&lt;/script&gt; &amp; done" in page
    assert "<script>" not in page
    # The index links the page; a missing job or kind is a 404 that does not echo markup.
    status, index = get(console["url"] + "/")
    assert status == 200 and f'href="/jobs/{NS}/PyTorchTrainingJob/{training}"' in index
    status, missing = get(console["url"] + "/jobs/default/pytorchtrainingjobs/%3Cscript%3Ex")
    assert status == 404
    assert (
        "PyTorchTrainingJob default/&lt;script&gt;x does not exist" in missing and "<script>" not in missing
    )
    assert get(console["url"] + "/jobs/default/NoSuchKind/x")[0] == 404


@pytest.mark.parametrize(
    ("fileset", "phase", "reason", "named"),
    [
        ("t9k://pvc/no-such-claim/logs", "Pending", "ClaimNotFound", 'persistentvolumeclaim "no-such-claim"'),
        ("s3://bucket/logs", "Failed", "UnsupportedFileset", "s3://bucket/logs: unsupported file set scheme"),
    ],
)
def test_a_fileset_it_cannot_serve_leaves_the_tensorboard_not_ready(
    custom: client.CustomObjectsApi, fileset: str, phase: str, reason: str, named: str
) -> None:
    name = f"bad-{reason.lower()}"
    board = {
        "apiVersion": "tensorstack.dev/v1beta1",
        "kind": "TensorBoard",
        "metadata": {"name": name},
        "spec": {"trainingLogFilesets": [fileset]},
    }
    custom.create_namespaced_custom_object("tensorstack.dev", "v1beta1", NS, "tensorboards", board)
    tb = wait_for(
        f"TensorBoard {name} judged", lambda: (t := tensorboard(custom, name)).get("status") and t, timeout=30
    )
    condition = ready_condition(tb)
    assert (tb["status"]["phase"], condition["status"], condition["reason"]) == (phase, "False", reason)
    assert named in condition["message"]
    assert "url" not in tb["status"] and "pod" not in tb["status"]
    core = client.CoreV1Api(custom.api_client)
    owned = f"{UID_LABEL}={tb['metadata']['uid']}"
    assert core.list_namespaced_pod(NS, label_selector=owned).items == []

    def warned() -> list[tuple[str, str]]:
        found = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
        return [(e.type, e.reason) for e in found]

    assert wait_for(f"an event about {name}", warned, timeout=10) == [("Warning", reason)]


def test_console_answers_on_loopback_only_and_a_restarted_console_on_the_same_socket(
    cluster: LocalCluster, console: dict[str, Any]
) -> None:
    """The server opened the console's socket and hands it to every console process it starts: a console
    that dies is started again (the supervisor) on the same address, and what was published stays true."""
    assert get(console["url"] + "/healthz") == (200, "ok")
    port = int(console["url"].rpartition(":")[2])
    with pytest.raises(ConnectionRefusedError):  # bound to 127.0.0.1, not to every address
        socket.create_connection(("127.0.0.2", port), timeout=5).close()
    first = read_status(StateDir(cluster.state_dir))["console"]["pid"]
    os.kill(first, signal.SIGKILL)

    def restarted() -> int | None:
        now = read_status(StateDir(cluster.state_dir))["console"]
        return now["pid"] if now["pid"] != first and now["state"] == "running" else None

    wait_for("the console started again", restarted, timeout=30)
    assert wait_for("the console answering again", lambda: get(console["url"] + "/healthz")[0] == 200)
    assert address.read_console(cluster.state_dir) == console


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None  # the 302 itself is the answer to look at


def answer(url: str) -> tuple[int, str, str | None]:
    """Status, body and ``Location`` of a console answer, redirects not followed."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, response.read().decode(), response.headers.get("Location")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("Location")


def test_tensorboard_link_redirects_to_the_served_tensorboard_or_says_why_not(
    training: str, console: dict[str, Any], custom: client.CustomObjectsApi
) -> None:
    """The console's TensorBoard address (the "TensorBoard" link's target on this cluster) leads to where the
    TensorBoard serves once it is Ready; before, and for one that cannot serve, it says why."""
    link = console["tensorboardUrlTemplate"]
    assert link == console["url"] + "/tensorboards/{namespace}/{name}"

    def redirected() -> str | None:
        status, _, location = answer(link.format(namespace=NS, name=training))
        return location if status == 302 else None

    location = wait_for(f"the console redirecting to TensorBoard {training}", redirected, timeout=90)
    assert location == tensorboard(custom, training)["status"]["url"]
    status, page = get(link.format(namespace=NS, name=training))  # followed: TensorBoard's own page
    assert status == 200 and "<tb-webapp>" in page

    name = "bad-link-claim"
    board = {
        "apiVersion": "tensorstack.dev/v1beta1",
        "kind": "TensorBoard",
        "metadata": {"name": name},
        "spec": {"trainingLogFilesets": ["t9k://pvc/no-such-claim-for-link/logs"]},
    }
    custom.create_namespaced_custom_object("tensorstack.dev", "v1beta1", NS, "tensorboards", board)
    wait_for(f"TensorBoard {name} judged", lambda: ready_condition(tensorboard(custom, name)), timeout=30)
    status, page, location = answer(link.format(namespace=NS, name=name))
    assert (status, location) == (503, None)
    assert f"TensorBoard {NS}/{name} is not ready yet" in page
    assert "persistentvolumeclaim &quot;no-such-claim-for-link&quot; not found" in page

    status, page, _ = answer(link.format(namespace=NS, name="%3Cscript%3E"))
    assert status == 404 and "TensorBoard default/&lt;script&gt; does not exist" in page


def test_connection_command_prints_the_kubeconfig_and_the_console_templates(
    cluster: LocalCluster, console: dict[str, Any]
) -> None:
    """``t9k-local connection``: what ``AIRFLOW_CONN_KUBERNETES_DEFAULT`` takes for this cluster."""
    argv = [
        sys.executable,
        "-m",
        "t9k_provider.local.cli",
        "connection",
        "--state-dir",
        str(cluster.state_dir),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(out) == {
        "conn_type": "kubernetes",
        "extra": {
            "kube_config_path": str(cluster.kubeconfig),
            "job_url_template": console["jobUrlTemplate"],
            "tensorboard_url_template": console["tensorboardUrlTemplate"],
        },
    }
