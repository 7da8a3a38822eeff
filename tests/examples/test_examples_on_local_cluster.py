"""Each example DAG runs to success under ``dag.test()`` against the local cluster with the real controller.

Pods are local processes, so the training pipeline really trains (2 gloo ranks) and the failure switch really
makes the training script exit 1.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.testing import LocalCluster
from tests.support.clusters import cluster_fixture
from tests.support.sshd import prepare_sshd

pytestmark = pytest.mark.cluster

KIND_EXAMPLES = [
    "example_genericjob",
    "example_pytorchtrainingjob",
    "example_tensorflowtrainingjob",
    "example_xgboosttrainingjob",
]
LOSS = re.compile(r"epoch (\d+)/(\d+) loss=([0-9.]+)")


#: A local cluster with the controller, shared by the module: every DAG run's jobs have names of their own.
shared_cluster = cluster_fixture(controller=True)


@pytest.fixture
def cluster(
    shared_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, examples_dags_folder: Path
) -> LocalCluster:
    """The shared cluster as Airflow's ``kubernetes_default`` connection."""
    connection = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(shared_cluster.kubeconfig)}}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(connection))
    return shared_cluster


def task_states(dag_run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in dag_run.get_task_instances()}


def xcoms(dag_run: Any, task_id: str) -> list[Any]:
    """Every return value the task stored (one per map index)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(
            run_id=dag_run.run_id, key="return_value", task_ids=task_id, dag_ids=dag_run.dag_id
        )
        return [XComModel.deserialize_value(row) for row in session.scalars(query)]


def xcom(dag_run: Any, task_id: str) -> Any:
    (value,) = xcoms(dag_run, task_id)
    return value


@pytest.mark.parametrize("dag_id", KIND_EXAMPLES)
def test_kind_example_succeeds(dagbag: Any, cluster: LocalCluster, dag_id: str) -> None:
    dag_run = dagbag.dags[dag_id].test()
    states = task_states(dag_run)
    assert dag_run.state == "success", states
    (task_id,) = states
    result = xcom(dag_run, task_id)
    assert result["phase"] == "Succeeded" and result["namespace"] == "default"


@pytest.mark.slow
def test_training_pipeline_trains_evaluates_and_reports(
    dagbag: Any, cluster: LocalCluster, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag_run = dagbag.dags["t9k_training_pipeline"].test(run_conf={"data_root": str(tmp_path), "epochs": 5})
    states = task_states(dag_run)
    assert dag_run.state == "success", states
    assert set(states.values()) == {"success"}

    (run_dir,) = (tmp_path / "runs").iterdir()
    metrics = json.loads((run_dir / "model" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and len(metrics["losses"]) == 5
    assert metrics["final_loss"] < metrics["first_loss"]
    assert (run_dir / "model" / "model.pt").is_file()

    report = xcom(dag_run, "report")
    assert report == {**json.loads((run_dir / "eval" / "eval.json").read_text()), "job": report["job"]}
    assert report["job"] == xcom(dag_run, "evaluate")["name"]

    # the training replicas' own loss lines reached the task log
    logged = [float(m[3]) for m in LOSS.finditer(capfd.readouterr().out)]
    assert metrics["losses"][-1] == pytest.approx(logged[-1], abs=1e-6)


def test_taskflow_example_sweeps_learning_rates_and_picks_the_best(
    dagbag: Any, cluster: LocalCluster, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Decorated functions on the local cluster: data prep, a 2-worker DDP training per learning rate
    (mapped), an evaluation per checkpoint (mapped over the training results), the best picked downstream."""
    run_conf = {"data_root": str(tmp_path), "epochs": 3}
    dag_run = dagbag.dags["example_taskflow_training"].test(run_conf=run_conf)
    states = task_states(dag_run)
    assert dag_run.state == "success", states
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert xcom(dag_run, "prepare_data") == {
        "dir": f"/data/runs/{run_dir.name}/dataset",
        "train": 3277,
        "test": 819,
        "features": 16,
    }
    rates = [0.003, 0.01, 0.03]
    checkpoints = sorted(p.parent.name for p in run_dir.glob("model-lr*/model.pt"))
    assert checkpoints == [f"model-lr{r}" for r in rates]
    best = xcom(dag_run, "pick_best")
    assert best["lr"] in rates and set(best["sweep"]) == {str(r) for r in rates}
    assert best["test_mse"] == min(best["sweep"].values()) and best["test_r2"] > 0
    trained = xcoms(dag_run, "train")
    assert sorted(t["lr"] for t in trained) == rates
    assert all(t["final_loss"] < t["first_loss"] for t in trained)
    # rank 0's log, the task log's default, shows each run's epochs
    output = capfd.readouterr().out
    assert all(f"lr={r} epoch 3/3 loss=" in output for r in rates)


@pytest.mark.slow
def test_failure_switch_fails_the_pipeline_at_the_training_task(
    dagbag: Any, cluster: LocalCluster, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    run_conf = {"data_root": str(tmp_path), "fail_training": True}
    dag_run = dagbag.dags["t9k_training_pipeline"].test(run_conf=run_conf)
    assert dag_run.state == "failed"
    assert task_states(dag_run) == {
        "prepare_data": "success",
        "train": "failed",
        "evaluate": "upstream_failed",
        "wait_for_evaluation": "upstream_failed",
        "report": "upstream_failed",
    }
    output = capfd.readouterr().out
    assert "T9K_DEMO_FAIL is set, failing on purpose after epoch 1" in output
    assert not list(tmp_path.glob("runs/*/model/model.pt"))


MPI_RANK = re.compile(r"mpi rank (\d+)/(\d+) on (\S+)")


def require_programs(*names: str) -> None:
    """Pods run the host's programs, so the host is the image: `make env` installs these (as root)."""
    missing = [name for name in names if not shutil.which(name)]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run `make env` as root (installs them)")


@pytest.fixture
def sshd_ready() -> None:
    """sshd in the workers (the host is their image)."""
    prepare_sshd()


def test_mpijob_example_runs_mpirun_over_ssh_on_every_worker(
    dagbag: Any, cluster: LocalCluster, sshd_ready: None, capfd: pytest.CaptureFixture[str]
) -> None:
    """Real sshd in the workers, real Open MPI mpirun in the launcher: each rank prints from its worker."""
    require_programs("mpirun", "orted")
    dag_run = dagbag.dags["example_mpijob"].test()
    states = task_states(dag_run)
    assert dag_run.state == "success", states
    result = xcom(dag_run, "mpi_ranks")
    assert result["phase"] == "Succeeded"

    # the launcher's log (mpirun forwards every rank's stdout) reached the task log
    ranks = {(int(m[1]), int(m[2]), m[3]) for m in MPI_RANK.finditer(capfd.readouterr().out)}
    job = result["name"]
    assert ranks == {(0, 2, f"{job}-worker-0"), (1, 2, f"{job}-worker-1")}


RENDEZVOUS = re.compile(r"rank (\d+)/(\d+) master=(\S+)")


def test_deepspeedjob_example_launches_every_worker_over_pdsh(
    dagbag: Any, cluster: LocalCluster, sshd_ready: None, capfd: pytest.CaptureFixture[str]
) -> None:
    """worker-0 runs the real `deepspeed` launcher, which starts a rank on each worker over pdsh/ssh; the
    ranks then meet at worker-0 and all-reduce over gloo."""
    require_programs("pdsh")
    if importlib.util.find_spec("deepspeed") is None:
        pytest.fail("deepspeed is not installed in this environment: run `make env`")
    dag_run = dagbag.dags["example_deepspeedjob"].test()
    states = task_states(dag_run)
    assert dag_run.state == "success", states
    result = xcom(dag_run, "deepspeed_ranks")
    assert result["phase"] == "Succeeded"

    output = capfd.readouterr().out
    job = result["name"]
    ranks = {(int(m[1]), int(m[2]), m[3]) for m in RENDEZVOUS.finditer(output)}
    assert ranks == {(0, 2, f"{job}-worker-0:29500"), (1, 2, f"{job}-worker-0:29500")}
    assert "all-reduce over 2 replicas ok (sum of ranks 1)" in output


COLOSSALAI_RANK = re.compile(r"colossalai \S+ rank (\d+)/(\d+) on (\S+) backend=gloo")


def test_colossalaijob_example_runs_colossalai_run_over_ssh_on_every_worker(
    dagbag: Any, cluster: LocalCluster, sshd_ready: None, capfd: pytest.CaptureFixture[str]
) -> None:
    """The launcher runs the real `colossalai run`, which starts torchrun on each worker over SSH (fabric);
    the ranks initialise with `colossalai.launch_from_torch()` and all-reduce over gloo."""
    if importlib.util.find_spec("colossalai") is None:
        pytest.fail("colossalai is not installed in this environment: run `make env`")
    dag_run = dagbag.dags["example_colossalaijob"].test()
    states = task_states(dag_run)
    assert dag_run.state == "success", states
    result = xcom(dag_run, "colossalai_ranks")
    assert result["phase"] == "Succeeded"

    # the launcher's log (fabric forwards each worker's output) reached the task log
    output = capfd.readouterr().out
    job = result["name"]
    ranks = {(int(m[1]), int(m[2]), m[3]) for m in COLOSSALAI_RANK.finditer(output)}
    assert ranks == {(0, 2, f"{job}-worker-0"), (1, 2, f"{job}-worker-1")}
    assert output.count("all-reduce over 2 replicas ok (sum of ranks 1)") == 2
    # the real CLI's own per-host report: each worker's torchrun exited 0
    assert all(f"{job}-worker-{i}: success" in output for i in range(2))


WORKLOADS = Path(__file__).resolve().parents[2] / "dags_examples" / "workloads"
WORD = re.compile(r"[\w\']+", re.UNICODE)  # how apache_beam.examples.wordcount splits words
FLINK_OVERVIEW = re.compile(r"flink cluster at (\S+): Flink (\S+), (\d+) taskmanager\(s\), (\d+) slot\(s\)")


def test_beamjob_example_counts_words_after_reaching_its_real_flink_cluster(
    dagbag: Any, cluster: LocalCluster, capfd: pytest.CaptureFixture[str]
) -> None:
    """The local flink-operator starts a real Flink (JobManager + 1 TaskManager); the submit pod reads its
    /overview through FLINK_MASTER, then runs Beam's word count with the DirectRunner (Beam's FlinkRunner
    needs a job-server jar only Maven Central has); cleanUpCluster then deletes the cluster's pods."""
    dag_run = dagbag.dags["example_beamjob"].test(run_conf={"runner": "DirectRunner"})
    output = capfd.readouterr().out
    assert dag_run.state == "success", (task_states(dag_run), output[-3000:])
    result = xcom(dag_run, "wordcount")
    assert result["phase"] == "Succeeded"
    job = result["name"]

    (overview,) = FLINK_OVERVIEW.findall(output)
    assert overview == (f"{job}-flinkcluster-jobmanager:8081", "2.3.0", "1", "2")
    text = (WORKLOADS / "wordcount_input.txt").read_text()
    expected: dict[str, int] = {}
    for word in WORD.findall(text):
        expected[word] = expected.get(word, 0) + 1
    shards = sorted((cluster.state_dir / "volumes" / "default" / "beam-data").glob("counts-*"))
    counted = dict(
        (word, int(count))
        for shard in shards
        for word, count in (line.rsplit(": ", 1) for line in shard.read_text().splitlines())
    )
    assert shards and counted == expected

    from kubernetes import client

    core = client.CoreV1Api(cluster.api_client())
    flink_pods = core.list_namespaced_pod("default", label_selector=f"cluster={job}-flinkcluster").items
    deadline = time.monotonic() + 30
    while flink_pods and time.monotonic() < deadline:
        time.sleep(0.5)
        flink_pods = core.list_namespaced_pod("default", label_selector=f"cluster={job}-flinkcluster").items
    assert not flink_pods, "cleanUpCluster: the FlinkCluster's pods are deleted with it"
