"""Training tasks and their TensorBoards with ``dag.test()`` on the local cluster (real controller, the local
TensorBoard operator running ``tensorboard``, the cluster's console; the connection is what
``t9k-local connection`` prints): ``@task.t9k_pytorch(tensorboard=True)`` gets the "TensorBoard" link, and
the scalars ``report()`` wrote are served behind it, on a scratch directory and, across a retry, on the
checkpoint volume; a ``tensorboardSpec`` the cluster cannot serve leaves the TensorBoard not Ready, and the
task log and the link say why.

The DAGs are in ``dags/t9k_it_tensorboard.py``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

from t9k_provider.jobclient import identity as ident
from t9k_provider.local.console.address import read_console
from t9k_provider.operators import checkpoints
from t9k_provider.testing import LocalCluster
from t9k_provider.testing.polling import wait_for
from tests.airflow.cluster import run, why_failed
from tests.airflow.dags.t9k_it_tensorboard import BAD_FILESETS, CHECKPOINT_CLAIM, MISSING_CLAIM, STEPS
from tests.airflow.versions import stored_xcoms

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

LOSSES = [(step, round(1.0 / step, 4)) for step in range(1, STEPS + 1)]


def xcom(dag_id: str, run_id: str, task_id: str, key: str) -> Any:
    (value,) = stored_xcoms(dag_id, run_id, task_id, key)
    return value


def links(dag_id: str, run_id: str, task_id: str) -> tuple[str, str, str]:
    """The task's job name and the URLs its two links lead to."""
    name = xcom(dag_id, run_id, task_id, "t9k_job")["name"]
    job = xcom(dag_id, run_id, task_id, "_link_T9kJobLink")
    return name, job, xcom(dag_id, run_id, task_id, "_link_T9kTensorBoardLink")


def get(url: str) -> tuple[int, str, str]:
    """Status, body and the URL that answered (redirects followed)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode(), response.geturl()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), url


def served_losses(link: str, run_name: str) -> list[tuple[int, float]] | None:
    """The ``loss`` scalars of run ``run_name`` as the TensorBoard behind ``link`` serves them (its HTTP API),
    or None while it does not serve them (yet)."""
    status, _, board = get(link)
    if status != 200 or board == link:
        return None
    query = urllib.parse.urlencode({"run": run_name, "tag": "loss"})
    status, body, _ = get(f"{board}data/plugin/scalars/scalars?{query}")
    if status != 200:
        return None
    return [(step, round(value, 4)) for _, step, value in json.loads(body)]


def instance(dag_id: str, run_id: str) -> str:
    identity = {ident.DAG_ID: dag_id, ident.RUN_ID: run_id, ident.TASK_ID: "train", ident.MAP_INDEX: "-1"}
    return checkpoints.subdirectory(identity)


def test_a_deferred_task_links_its_tensorboard_which_serves_what_report_wrote(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, run_id = run(dags, "it_tb_scratch")
    out = capfd.readouterr().out
    assert state == "success", f"{tasks}\n{why_failed(out)}"
    console = read_console(cluster.state_dir)
    name, job_link, tb_link = links("it_tb_scratch", run_id, "train")
    assert job_link == console["jobUrlTemplate"].format(
        namespace="default", kind="PyTorchTrainingJob", name=name
    )
    assert tb_link == console["tensorboardUrlTemplate"].format(namespace="default", name=name)
    assert "the curves will not survive a retry" in out
    scratch = f"t9k-tensorboard/{instance('it_tb_scratch', run_id)}/try-1"
    assert wait_for("the loss scalars served", lambda: served_losses(tb_link, scratch), timeout=60) == LOSSES
    status, page, _ = get(job_link)
    assert status == 200 and f"PyTorchTrainingJob default/{name}" in page


def test_on_the_checkpoint_volume_the_curves_go_on_across_a_retry(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, run_id = run(dags, "it_tb_resume")
    out = capfd.readouterr().out
    assert state == "success", f"{tasks}\n{why_failed(out)}"
    assert xcom("it_tb_resume", run_id, "train", "return_value") == 2  # try 1 crashed
    assert out.count("on the checkpoint volume: the curves go on across retries") >= 2
    _, _, tb_link = links("it_tb_resume", run_id, "train")
    logs = f"{CHECKPOINT_CLAIM}/{instance('it_tb_resume', run_id)}/tensorboard"

    def continued() -> list[tuple[int, float]] | None:
        losses = served_losses(tb_link, logs)
        return losses if losses == LOSSES else None

    wait_for("try 1's steps and try 2's in one curve", continued, timeout=60)


def test_a_tensorboard_that_cannot_serve_says_why_in_the_task_log_and_behind_the_link(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, run_id = run(dags, "it_tb_bad_filesets")
    out = capfd.readouterr().out
    assert state == "success", f"{tasks}\n{why_failed(out)}"  # the training itself ran
    missing, unsupported = BAD_FILESETS["missing_claim"], BAD_FILESETS["unsupported"]
    why = {
        "missing_claim": f'persistentvolumeclaim "{MISSING_CLAIM}" not found (file set {missing})',
        "unsupported": f"{unsupported}: unsupported file set scheme",
    }
    for task_id, reason in why.items():
        name, _, tb_link = links("it_tb_bad_filesets", run_id, task_id)
        assert f"TensorBoard [{name}] is not ready yet: {reason}" in out, why_failed(out)
        status, page, _ = get(tb_link)
        assert status == 503 and reason.replace('"', "&quot;") in page, page
