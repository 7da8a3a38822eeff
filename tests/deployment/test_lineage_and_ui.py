"""What a person and a lineage backend see of a training, in a real deployment (scheduler, triggerer, DAG
processor, API server; LocalExecutor) on a local cluster with its console, Airflow's OpenLineage provider
writing every event to files (its file transport).

The UI in a headless Chromium (``browser``): while ``lin_train``'s training runs (it waits at a gate the
test opens), the run's grid shows each task's state, the training task's log page shows its replicas' lines
and progress lines, and its "T9k Job" and "TensorBoard" extra links open the console's job page (phase,
replicas) and the TensorBoard with the loss chart; on Airflow 2.11 the extra links. A screenshot of each
under ``browser.SCREENSHOTS``. The lineage: the START and COMPLETE events of that training and the START
and FAIL events of ``lin_fail``'s, field by field, against the job on the cluster and the task's XComs.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from benchmarks.airflow_deployment import AIRFLOW_3, AirflowDeployment
from t9k_provider.decorators.manifests import RECIPES
from t9k_provider.jobclient import identity as ident
from t9k_provider.local.connection import airflow_connection
from t9k_provider.operators.checkpoints import subdirectory
from t9k_provider.testing import LocalCluster, wait_for
from t9k_provider.waiting import status as job_status
from tests.airflow.versions import airflow3_only
from tests.deployment.browser import Browser, chromium
from tests.deployment.lineage_ui_dags.lineage_ui_dags import FAIL_TOTAL, TRAIN_STEPS
from tests.deployment.test_deployment import JOBS, get, job_of, xcom
from tests.support.clusters import cluster_fixture

pytestmark = [pytest.mark.deployment, pytest.mark.cluster, pytest.mark.timeout(480)]

DAGS = Path(__file__).resolve().parent / "lineage_ui_dags"
#: The lineage namespace of the deployment's jobs (``[openlineage] namespace``).
NAMESPACE = "t9k-deployment"
RUN_TIMEOUT = 240
START_TIMEOUT = 120
#: What the UI may take to render a page on a loaded 2-core machine.
PAGE_TIMEOUT = 60

cluster = cluster_fixture(controller=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The host directories the trainings mount (``lin_train``'s DAG file reads it from the environment)."""
    return tmp_path_factory.mktemp("lineage-ui-data")


@dataclass(frozen=True)
class Deployment:
    airflow: AirflowDeployment
    events: Path  # where the file transport writes the OpenLineage events, one file each
    links: dict[str, str]  # the connection's extra-link templates (the cluster's console)


@pytest.fixture(scope="module")
def deployment(
    cluster: LocalCluster, data: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    home = tmp_path_factory.mktemp("airflow-home")
    events = home / "openlineage"
    events.mkdir()
    connection = airflow_connection(cluster.state)
    env = {
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(connection),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events / "event")}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": NAMESPACE,
        "T9K_LINEAGE_UI_DATA": str(data),
    }
    with AirflowDeployment(home, DAGS, cluster.kubeconfig, env=env) as airflow:
        airflow.wait_for_dags(["lin_train", "lin_fail"])
        links = {k: v for k, v in connection["extra"].items() if k.endswith("_url_template")}
        yield Deployment(airflow, events, links)


@dataclass(frozen=True)
class Runs:
    train: str
    fail: str
    gate: Path  # lin_train's training waits until this exists

    def open_gate(self) -> None:
        self.gate.touch()


@pytest.fixture(scope="module")
def runs(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    files = tmp_path_factory.mktemp("gates")
    gate, marker = files / "open", files / "rank-1-done"
    airflow = deployment.airflow
    return Runs(
        airflow.trigger("lin_train", {"gate": str(gate)}),
        airflow.trigger("lin_fail", {"marker": str(marker)}),
        gate,
    )


def running_training(deployment: Deployment, cluster: LocalCluster, runs: Runs) -> dict[str, Any]:
    """``lin_train``'s training job while it runs (it waits at the gate), its task deferred: the triggerer
    follows it."""
    deployment.airflow.wait_for_task("lin_train", runs.train, "train", ("deferred",), START_TIMEOUT)

    def running() -> dict[str, Any] | None:
        job = job_of(cluster, "pytorchtrainingjobs", "lin_train", runs.train, "train")
        outcome = job_status.outcome(job) if job is not None else None
        assert outcome not in ("succeeded", "failed"), f"lin_train's training ended before the gate: {job}"
        return job if outcome == "running" else None

    return dict(wait_for("lin_train's training to run", running, START_TIMEOUT, 0.5))


# -- the UI in a browser -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as started:
        yield started


def ui_path(dag_id: str, run_id: str, task_id: str | None = None) -> str:
    """Airflow 3's page of a run, or of one of its task instances."""
    path = f"/dags/{dag_id}/runs/{run_id}"
    return f"{path}/tasks/{task_id}" if task_id else path


#: Which of the UI's state colours a cell's badge is drawn in: the states whose palette colour
#: (``--chakra-colors-<state>-solid``, as the UI's theme defines it) resolves to the badge's background.
CELL_STATES_JS = """
const [cellId, states] = arguments;
const cell = document.getElementById(cellId);
const badge = cell && cell.querySelector('[data-testid="task-state-badge"]');
if (!badge) return null;
const shown = getComputedStyle(badge).backgroundColor;
const probe = document.body.appendChild(document.createElement('span'));
const matches = states.filter((state) => {
  probe.style.backgroundColor = `var(--chakra-colors-${state.replaceAll("_", "-")}-solid)`;
  const colour = getComputedStyle(probe).backgroundColor;
  return colour !== 'rgba(0, 0, 0, 0)' && colour === shown;
});
probe.remove();
return matches;
"""


def grid_states(browser: Browser, run_id: str, task_ids: tuple[str, ...]) -> dict[str, list[str] | None]:
    """The states each task instance's grid cell is drawn as (its badge's colour among the UI's state
    colours; None: no cell). Read from the cell itself, not its tooltip: under CI load the tooltip a hover
    should open stayed shut for whole minutes while the cells showed the right colours (two CI runs timed
    out so), and the tooltip's content exists only while it is open."""
    from airflow.utils.state import TaskInstanceState

    states = [state.value for state in TaskInstanceState]
    return {
        task_id: browser.driver.execute_script(CELL_STATES_JS, f"grid-{run_id}-{task_id}", states)
        for task_id in task_ids
    }


@airflow3_only("the React UI's grid and live log page")
def test_the_grid_shows_each_task_s_state_while_the_training_runs(
    deployment: Deployment, cluster: LocalCluster, runs: Runs, browser: Browser
) -> None:
    running_training(deployment, cluster, runs)
    browser.open(deployment.airflow.base_url + ui_path("lin_train", runs.train))
    expected = {"prepare": ["success"], "train": ["deferred"]}
    looks: list[dict[str, list[str] | None]] = []

    def shows() -> bool:
        looks.append(grid_states(browser, runs.train, tuple(expected)))
        return looks[-1] == expected

    try:
        browser.wait(f"the grid to show {expected}", shows, PAGE_TIMEOUT)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\nthe cells were drawn as, look by look: {looks}") from None
    browser.shot("grid-while-training")


@airflow3_only("the React UI's grid and live log page")
def test_a_running_training_s_log_page_shows_replica_and_progress_lines(
    deployment: Deployment, cluster: LocalCluster, runs: Runs, browser: Browser
) -> None:
    """The log page of the deferred task, opened while its job runs: both workers' lines (the triggerer
    follows them) and the progress lines of the leader's reports, the last one at the last step."""
    job = running_training(deployment, cluster, runs)
    name = job["metadata"]["name"]
    browser.open(deployment.airflow.base_url + ui_path("lin_train", runs.train, "train"))
    last = f"epoch {TRAIN_STEPS}/{TRAIN_STEPS} loss="
    replica = [f"[{name}-worker-{rank}/pytorch] {last}" for rank in (0, 1)]
    progress = re.compile(rf"progress: step \d+/{TRAIN_STEPS} \([\d.]+%\).*loss=")
    browser.wait_for_text(
        "the log page to show both workers' last epoch and a progress line",
        lambda text: all(line in text for line in replica) and progress.search(text),
        PAGE_TIMEOUT,
    )
    browser.shot("log-page-while-training")
    assert job_status.outcome(get(cluster, f"{JOBS}/pytorchtrainingjobs/{name}")) == "running"


def test_the_extra_links_open_the_job_page_and_the_tensorboard(
    deployment: Deployment, cluster: LocalCluster, runs: Runs, browser: Browser
) -> None:
    """The task's "T9k Job" and "TensorBoard" links, where the UI shows them, point at the cluster's console;
    the job page says the phase and lists both replicas, the TensorBoard shows the loss chart."""
    job = running_training(deployment, cluster, runs)
    meta = job["metadata"]
    fields = {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}
    fields |= {"kind": "PyTorchTrainingJob", "plural": "pytorchtrainingjobs"}
    expected = {
        "T9k Job": deployment.links["job_url_template"].format(**fields),
        "TensorBoard": deployment.links["tensorboard_url_template"].format(**fields),
    }
    open_links_page(browser, deployment.airflow, runs.train)
    anchors = browser.wait(
        "the task's extra links",
        lambda: (shown := browser.anchors(expected)).keys() == expected.keys() and shown,
        PAGE_TIMEOUT,
    )
    assert {text: a.get_attribute("href") for text, a in anchors.items()} == expected
    browser.shot("extra-links")

    with browser.new_window(lambda: browser.click_link("T9k Job")):
        pods = [f"{meta['name']}-worker-{rank}" for rank in (0, 1)]
        browser.wait_for_text(
            "the console's job page with its phase and both replicas",
            lambda text: re.search(r"^Phase\s+Running$", text, re.M) and all(pod in text for pod in pods),
            PAGE_TIMEOUT,
        )
        browser.shot("job-page")
    if AIRFLOW_3:
        with browser.new_window(lambda: browser.click_link("TensorBoard")):
            tensorboard_loss_chart(browser, round(1.0 / TRAIN_STEPS, 4))
            browser.shot("tensorboard-loss")


def open_links_page(browser: Browser, airflow: AirflowDeployment, run_id: str) -> None:
    """The page where the UI shows the training task's extra links: Airflow 3's Details tab; Airflow 2's
    task instance panel of the grid."""
    if AIRFLOW_3:
        browser.open(airflow.base_url + ui_path("lin_train", run_id, "train") + "/details")
    else:
        query = urllib.parse.urlencode({"dag_run_id": run_id, "task_id": "train", "tab": "details"})
        browser.open(f"{airflow.base_url}/dags/lin_train/grid?{query}")


def tensorboard_loss_chart(browser: Browser, last: float) -> None:
    """TensorBoard's scalars of the training (its Time Series page): the ``loss`` card with its chart and,
    in the chart's table, the last value at the last step, as ``report()`` wrote them."""
    from selenium.webdriver.common.by import By

    def card() -> bool:
        for found in browser.driver.find_elements(By.TAG_NAME, "scalar-card"):
            title, _, table = found.text.partition("\n")
            chart = found.find_elements(By.CSS_SELECTOR, "line-chart canvas")
            drawn = chart and chart[0].size["width"] > 0 and chart[0].size["height"] > 0
            if (
                title == "loss"
                and drawn
                and re.search(rf"(?<![\d.]){re.escape(str(last))}\s+{TRAIN_STEPS}\b", table)
            ):
                return True
        return False

    browser.wait(f"TensorBoard's loss chart up to step {TRAIN_STEPS}", card, PAGE_TIMEOUT)


# -- the lineage ---------------------------------------------------------------------------------------------


def lineage_events(directory: Path) -> list[dict[str, Any]]:
    """Every event the file transport wrote whole (one per file), in the order they happened."""
    found = []
    for path in directory.glob("event-*.json"):
        try:
            found.append(json.loads(path.read_text()))
        except ValueError:  # being written: the next look reads it whole
            continue
    return sorted(found, key=lambda e: e["eventTime"])


def task_events(deployment: Deployment, dag_id: str, task_id: str, ends: str) -> list[dict[str, Any]]:
    """The events of the task's run (``<dag>.<task>``) once the one of type ``ends`` was written."""

    def ended() -> list[dict[str, Any]] | None:
        found = [e for e in lineage_events(deployment.events) if e["job"]["name"] == f"{dag_id}.{task_id}"]
        return found if any(e["eventType"] == ends for e in found) else None

    return list(wait_for(f"the {ends} event of {dag_id}.{task_id}", ended, 60, 0.5))


def facets(event: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The event's run facets of this provider, without OpenLineage's ``_producer`` and ``_schemaURL``."""
    found = {}
    for key, facet in event["run"]["facets"].items():
        if key.startswith("t9k"):
            assert facet.pop("_producer") and facet.pop("_schemaURL").startswith("https://openlineage.io/")
            found[key] = facet
    return found


def datasets(event: dict[str, Any], side: str) -> list[str]:
    return [f"{d['namespace']} {d['name']}" for d in event[side]]


def test_the_lineage_of_a_training_that_succeeded(
    deployment: Deployment, cluster: LocalCluster, runs: Runs, data: Path
) -> None:
    """START (from the rendered manifest) and COMPLETE (the job as it ended): the job, what it read and
    wrote, its last progress report and what its replicas used, as the cluster and the XComs say."""
    runs.open_gate()
    airflow = deployment.airflow
    assert airflow.wait_for_run("lin_train", runs.train, RUN_TIMEOUT)["state"] == "success"
    events = task_events(deployment, "lin_train", "train", "COMPLETE")
    job = job_of(cluster, "pytorchtrainingjobs", "lin_train", runs.train, "train")
    assert job is not None
    meta, image = job["metadata"], RECIPES["t9k_pytorch"].image
    start = next(e for e in events if e["eventType"] == "START")
    complete = next(e for e in events if e["eventType"] == "COMPLETE")
    for event in (start, complete):
        assert event["job"]["namespace"] == NAMESPACE
        parent = event["run"]["facets"]["parent"]["job"]
        assert (parent["namespace"], parent["name"]) == (NAMESPACE, "lin_train")

    assert facets(start) == {
        "t9kJob": {"kind": "PyTorchTrainingJob", "replicas": {"worker": 2}, "images": [image]}
    }
    model = f"file {data}/models/model.pt"
    assert datasets(start, "inputs") == [f"file {data}/dataset", f"file {data}/models"]
    assert datasets(start, "outputs") == [f"file {data}/models", model]

    ended = facets(complete)
    assert ended.pop("t9kJob") == {
        "kind": "PyTorchTrainingJob", "namespace": "default", "name": meta["name"], "uid": meta["uid"],
        "replicas": {"worker": 2}, "images": [image], "phase": "Succeeded",
    }  # fmt: skip
    progress = ended.pop("t9kProgress")
    at = datetime.fromisoformat(progress.pop("at"))
    completed = job_status.parse_time(job["status"]["completionTime"])
    # completionTime has whole seconds (RFC 3339 as the API server writes it), the report's time does not
    assert completed is not None and at.replace(microsecond=0) <= completed, (at, completed)
    loss = round(1.0 / TRAIN_STEPS, 4)
    assert progress == {
        "step": TRAIN_STEPS,
        "total": TRAIN_STEPS,
        "metrics": {"loss": loss},
        "resumptions": [],
    }
    usage = ended.pop("t9kUsage")
    pushed = xcom(airflow, "lin_train", runs.train, "train", "t9k_usage")
    assert usage == {
        "replicas": 2,
        "replicaSeconds": pushed["replica_seconds"],
        "gpuSeconds": pushed["gpu_seconds"],
    }
    assert usage["replicaSeconds"]["total"] > 0 and usage["gpuSeconds"] == {"worker": 0.0, "total": 0.0}
    assert ended == {}, "a training that succeeded has no failure facet"

    identity = {
        ident.DAG_ID: "lin_train",
        ident.RUN_ID: runs.train,
        ident.TASK_ID: "train",
        ident.MAP_INDEX: "-1",
    }
    checkpoints = f"pvc://default t9k-checkpoints/{subdirectory(identity)}"
    assert datasets(complete, "inputs") == [f"file {data}/dataset", f"file {data}/models"]
    assert datasets(complete, "outputs") == [f"file {data}/models", checkpoints, model]
    assert (data / "models" / "model.pt").read_text() == f"loss={loss}\n"


def test_the_lineage_of_a_training_that_failed(
    deployment: Deployment, cluster: LocalCluster, runs: Runs, data: Path
) -> None:
    """FAIL: the job as it ended, the class of its ending, the replica that failed first and its node, the
    last report before it failed, the usage, and the provider's own error message."""
    airflow = deployment.airflow
    assert airflow.wait_for_run("lin_fail", runs.fail, RUN_TIMEOUT)["state"] == "failed"
    events = task_events(deployment, "lin_fail", "train", "FAIL")
    job = job_of(cluster, "pytorchtrainingjobs", "lin_fail", runs.fail, "train")
    assert job is not None
    meta = job["metadata"]
    fail = next(e for e in events if e["eventType"] == "FAIL")
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    assert facets(events[0]) == {
        "t9kJob": {"kind": "PyTorchTrainingJob", "replicas": {"worker": 2}, "images": ["python:3.11"]}
    }

    ended = facets(fail)
    assert ended.pop("t9kJob") == {
        "kind": "PyTorchTrainingJob", "namespace": "default", "name": meta["name"], "uid": meta["uid"],
        "replicas": {"worker": 2}, "images": ["python:3.11"], "phase": "Failed",
    }  # fmt: skip
    first = get(cluster, f"/api/v1/namespaces/default/pods/{meta['name']}-worker-0")
    assert ended.pop("t9kFailure") == {
        "ending": "workload", "failedPod": f"{meta['name']}-worker-0", "failedReplica": "worker/0",
        "node": first["spec"]["nodeName"],
    }  # fmt: skip
    progress = ended.pop("t9kProgress")
    assert datetime.fromisoformat(progress.pop("at"))
    assert progress == {"step": 1, "total": FAIL_TOTAL, "metrics": {"loss": 0.9}, "resumptions": []}
    usage = ended.pop("t9kUsage")
    pushed = xcom(airflow, "lin_fail", runs.fail, "train", "t9k_usage")
    assert usage == {
        "replicas": 2,
        "replicaSeconds": pushed["replica_seconds"],
        "gpuSeconds": pushed["gpu_seconds"],
    }
    assert ended == {}
    assert f"job default/{meta['name']} failed" in fail["run"]["facets"]["errorMessage"]["message"]
    assert datasets(fail, "inputs") == [f"file {data}/dataset"] and datasets(fail, "outputs") == []
