"""``@task.t9k*`` functions run with ``dag.test()`` on the local cluster with the real controller.

The DAGs are in ``dags/t9k_it_taskflow.py``. Replicas are processes of this interpreter's environment, so the
PyTorch and DeepSpeed runs need torch (and DeepSpeed) installed where the tests run.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.decorators import manifests, transport
from t9k_provider.testing import LocalCluster
from tests.airflow.cluster import DAGS, airflow_on_cluster, deferrals, result_of, run, why_failed
from tests.airflow.versions import stored_xcoms

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

DAG_FILE = str(DAGS / "t9k_it_taskflow.py")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None or shutil.which("pdsh") is None,
    reason="DeepSpeed or pdsh is not installed",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """This module's cluster advertises two (simulated) GPUs, which the kubelet hands out one per container as
    the NVIDIA device plugin does; the functions that ask for none see none."""
    with airflow_on_cluster(tmp_path_factory.mktemp("t9k-it-gpus"), capacity={"gpus": "2"}) as started:
        yield started


@needs_torch
def test_each_rank_of_a_gpu_function_sees_its_own_gpu(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """``@task.t9k_pytorch(workers=2, gpus=1)`` on a node with two GPUs: each replica holds one of its own."""
    state, tasks, run_id = run(dags, "it_tf_gpus")
    assert state == "success", f"{tasks}\n{why_failed(capfd.readouterr().out)}"
    seen = result_of("it_tf_gpus", run_id, "visible_gpus")
    assert sorted(seen) == [["0", "0"], ["1", "1"]], seen


@needs_torch
def test_pytorch_function_all_reduces_across_two_workers(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, run_id = run(dags, "it_tf_pytorch")
    assert state == "success", f"{tasks}\n{why_failed(capfd.readouterr().out)}"
    assert result_of("it_tf_pytorch", run_id, "allreduce") == 3  # (0 + 1) + (1 + 1), step from upstream


def test_generic_function_gets_its_arguments_and_the_same_interpreter(
    cluster: LocalCluster,
    dags: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Results come back both from a job that ends after the task deferred (``describe``) and from jobs that
    end while the worker still follows them (``square``)."""
    monkeypatch.setenv("AIRFLOW__CORE__MAX_TEMPLATED_FIELD_LENGTH", "1000000")  # the whole manifest
    caplog.set_level(logging.INFO, logger="airflow.models.dag")
    state, tasks, run_id = run(dags, "it_tf_generic")
    assert state == "success", tasks
    assert deferrals(capfd.readouterr().out, caplog) == 1
    result = result_of("it_tf_generic", run_id, "describe")
    assert result == {
        "greeting": "hello it_tf_generic",
        "total": 3,
        "rank": "0",
        "world": "1",
        "python": result["python"],
    }
    assert Path(result["python"]).parent == Path(sys.executable).parent  # Airflow's environment
    assert result_of("it_tf_generic", run_id, "smallest") == 1.5
    assert sorted(stored_xcoms("it_tf_generic", run_id, "square", "return_value")) == [1.5, 4.5]
    manifest = rendered_manifest("it_tf_generic", run_id, "describe")
    (value,) = [
        e["value"]
        for e in manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["initContainers"][0]["env"]
        if e["name"] == manifests.CALL_ENV
    ]
    call = json.loads(transport.unpack(value))
    assert call["arguments"] == {"args": ["it_tf_generic", {"a": 1, "b": 2}], "kwargs": {}}
    assert call["filename"] == DAG_FILE and "def describe(" in call["source"]


def rendered_manifest(dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    """The manifest as the UI's Rendered Template shows it."""
    import ast

    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(RenderedTaskInstanceFields)
            .filter_by(dag_id=dag_id, run_id=run_id, task_id=task_id)
            .one()
        )
        stored = row.rendered_fields["manifest"]
    return stored if isinstance(stored, dict) else ast.literal_eval(stored)


def test_failures_carry_the_remote_traceback(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, _ = run(dags, "it_tf_failures")
    output = capfd.readouterr().out
    assert state == "failed" and tasks == {"shard": "failed", "unreturnable": "failed"}, tasks
    assert "shard() on rank 1 (replica shard-" in output and "-worker-1) raised ValueError" in output
    assert f'File "{DAG_FILE}", line ' in output and "ValueError: shard 1 has no rows" in output
    assert "unreturnable() on rank 0 (replica unreturnable-" in output
    assert "the return value is a builtins.set, which JSON cannot carry" in output


def test_tensorflow_function_runs_on_every_worker(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, run_id = run(dags, "it_tf_tensorflow")
    assert state == "success", f"{tasks}\n{why_failed(capfd.readouterr().out)}"
    assert result_of("it_tf_tensorflow", run_id, "tf_cluster") == {
        "task": {"type": "worker", "index": 0},
        "workers": 2,
    }


def test_xgboost_function_runs_on_the_master_and_workers(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, run_id = run(dags, "it_tf_xgboost")
    assert state == "success", f"{tasks}\n{why_failed(capfd.readouterr().out)}"
    result = result_of("it_tf_xgboost", run_id, "rabit_env")
    assert result["RANK"] == "0" and result["WORLD_SIZE"] == "3" and result["master"].endswith("-master-0")


@needs_torch
@needs_deepspeed
def test_deepspeed_function_runs_in_every_process(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, run_id = run(dags, "it_tf_deepspeed")
    assert state == "success", f"{tasks}\n{why_failed(capfd.readouterr().out)}"
    assert result_of("it_tf_deepspeed", run_id, "ds_allreduce") == [30, "0", 2]
