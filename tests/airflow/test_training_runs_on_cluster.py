"""Training runs watched and resumed from Airflow, with ``dag.test()`` on the local cluster (real controller,
replicas as processes), in both wait modes: a training that reports progress, checkpoints each epoch and
crashes once resumes on the retry from its last checkpoint, with progress lines, ``t9k_progress``, its metrics
in the asset event and ``t9k_usage``; a training that reports once and hangs is stopped within
``progress_timeout`` plus a poll.

The DAGs are in ``dags/t9k_it_training.py``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from typing import Any

import pytest

from t9k_provider.jobclient import identity as ident
from t9k_provider.jobs import API_VERSION, KINDS
from t9k_provider.operators import checkpoints
from t9k_provider.testing import LocalCluster
from t9k_provider.testing.polling import wait_for
from tests.airflow.cluster import run, why_failed
from tests.airflow.dags.t9k_it_training import CHECKPOINTS, CRASH_AFTER, EPOCHS, STALL_TIMEOUT
from tests.airflow.versions import asset_event_extras, declare_assets, stored_xcoms

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

MODES = ["", "_deferrable"]
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def xcom(dag_id: str, run_id: str, task_id: str, key: str) -> Any:
    (value,) = stored_xcoms(dag_id, run_id, task_id, key)
    return value


def identity(dag_id: str, run_id: str, task_id: str) -> dict[str, str]:
    return {ident.DAG_ID: dag_id, ident.RUN_ID: run_id, ident.TASK_ID: task_id, ident.MAP_INDEX: "-1"}


@needs_torch
@pytest.mark.parametrize("mode", MODES, ids=["worker", "deferred"])
def test_a_crashed_training_resumes_on_the_retry_from_its_last_checkpoint(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str], mode: str
) -> None:
    dag_id = f"it_resume{mode}"
    declare_assets(f"t9k-it-model{mode}")
    state, tasks, run_id = run(dags, dag_id)
    out = capfd.readouterr().out
    directory = CHECKPOINTS / checkpoints.subdirectory(identity(dag_id, run_id, "train"))
    try:
        assert state == "success", f"{tasks}\n{why_failed(out)}"
        assert f"simulated crash after epoch {CRASH_AFTER}" in out  # try 1 failed as it should
        started = json.loads((directory / "latest.json").read_text())
        assert started == {"epoch": EPOCHS}
        result = xcom(dag_id, run_id, "train", "return_value")
        assert result == {"started_at": CRASH_AFTER + 1, "try": 2}, result
        lines = re.findall(r"progress: step \d+/\d+ \([\d.]+%\).*", out)
        assert any("ETA" in line for line in lines), lines
        assert f"progress: step {EPOCHS}/{EPOCHS} (100.0%)" in out and "T9K_PROGRESS" not in out
        progress = xcom(dag_id, run_id, "train", "t9k_progress")
        assert (progress["step"], progress["metrics"]) == (EPOCHS, {"loss": round(1.0 / EPOCHS, 4)})
        assert [h["step"] for h in progress["history"]] == list(range(CRASH_AFTER + 1, EPOCHS + 1))
        final = {"step": EPOCHS, "total": EPOCHS, "metrics": {"loss": round(1.0 / EPOCHS, 4)}}
        assert [extra for extra in asset_event_extras(dag_id, run_id) if "step" in extra] == [final]
        usage = xcom(dag_id, run_id, "train", "t9k_usage")
        assert usage["replica_seconds"]["total"] > 0 and set(usage["replica_seconds"]) == {"worker", "total"}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES, ids=["worker", "deferred"])
def test_a_hung_training_is_stopped_within_progress_timeout_and_a_poll(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str], mode: str
) -> None:
    dag_id = f"it_stall{mode}"
    state, tasks, run_id = run(dags, dag_id)
    out = capfd.readouterr().out
    assert state == "failed" and tasks == {"hang": "failed"}, f"{tasks}\n{why_failed(out)}"
    found = re.search(
        rf"no progress report for progress_timeout={STALL_TIMEOUT}s; the last: step 1/10 at [\d: -]+ UTC "
        r"\((\d+):(\d\d):(\d\d) ago\); the job was deleted",
        out,
    )
    assert found, why_failed(out)
    assert out.count("progress: step 1/10 (10.0%), loss=0.9") == 1  # not again when the wait stops
    assert len(stored_xcoms(dag_id, run_id, "hang", "t9k_progress")[0]["history"]) == 1
    hours, minutes, seconds = (int(part) for part in found.groups())
    poll_interval = 1
    assert hours * 3600 + minutes * 60 + seconds <= STALL_TIMEOUT + poll_interval + 1  # +1: rounding
    name = ident.job_name(identity(dag_id, run_id, "hang"), prefix="hang")
    plural = KINDS["GenericJob"].PLURAL
    path = f"/apis/{API_VERSION}/namespaces/default/{plural}/{name}"
    wait_for("the job gone (foreground: its pods go first)", lambda: cluster.request("GET", path)[0] == 404)
