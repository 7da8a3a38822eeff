"""The example workload scripts, run as replicas run them: separate processes, rendezvous over loopback."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from t9k_provider.progress import parse
from t9k_provider.testing import free_port

WORKLOADS = Path(__file__).resolve().parents[2] / "dags_examples" / "workloads"
LOSS = re.compile(r"^epoch (\d+)/(\d+) loss=([0-9.]+) rank=(\d+) world_size=(\d+)$", re.MULTILINE)


def run(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKLOADS / script), *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def run_ranks(
    script: str, world: int, *args: str, env: dict[str, str] | None = None
) -> list[tuple[int, str, str]]:
    """Start ``world`` replicas with the variables a PyTorchTrainingJob injects; (rc, out, err) per rank."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKLOADS / script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={
                **os.environ,
                **(env or {}),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(world),
            },
        )
        for rank in range(world)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        results.append((proc.returncode, out, err))
    return results


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data")
    result = run("prepare_data.py", "--out", str(out), "--samples", "2048")
    assert result.returncode == 0, result.stderr
    return out


def test_prepare_data_is_deterministic_and_split(dataset: Path, tmp_path: Path) -> None:
    again = run("prepare_data.py", "--out", str(tmp_path), "--samples", "2048")
    assert again.returncode == 0, again.stderr
    for split, rows in (("train.npz", 1639), ("test.npz", 409)):
        a, b = np.load(dataset / split), np.load(tmp_path / split)
        assert a["x"].shape == (rows, 16) and a["y"].shape == (rows, 1)
        np.testing.assert_array_equal(a["x"], b["x"])
        np.testing.assert_array_equal(a["y"], b["y"])
    summary = json.loads(again.stdout.split("DATASET ", 1)[1])
    assert summary == {"out": str(tmp_path), "train": 1639, "test": 409, "features": 16}


def test_two_rank_training_lowers_the_loss_and_evaluates(dataset: Path, tmp_path: Path) -> None:
    results = run_ranks("train_ddp.py", 2, "--data", str(dataset), "--out", str(tmp_path), "--epochs", "6")
    for rank, (rc, out, err) in enumerate(results):
        assert rc == 0, err
        assert f"rank {rank}/2 joining " in out
        assert ("with nccl" if torch.cuda.is_available() else "training on cpu with gloo") in out
    per_rank = [[(int(m[1]), float(m[3]), int(m[4])) for m in LOSS.finditer(out)] for _, out, _ in results]
    assert [rank for _, _, rank in per_rank[1]] == [1] * 6
    # the loss is averaged over ranks: both print the same numbers
    assert [loss for _, loss, _ in per_rank[0]] == [loss for _, loss, _ in per_rank[1]]
    losses = [loss for _, loss, _ in per_rank[0]]
    assert len(losses) == 6 and losses[-1] < 0.5 * losses[0]

    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    assert metrics["losses"] == pytest.approx(losses, abs=1e-6)
    assert (tmp_path / "model.pt").is_file()

    evaluated = run("evaluate.py", "--data", str(dataset), "--model", str(tmp_path), "--out", str(tmp_path))
    assert evaluated.returncode == 0, evaluated.stderr
    printed = json.loads(evaluated.stdout.split("EVAL ", 1)[1])
    assert printed == json.loads((tmp_path / "eval.json").read_text())
    assert printed["test_samples"] == 409 and printed["test_r2"] > 0.3


def test_demo_fail_flag_fails_every_rank_after_the_first_epoch(dataset: Path, tmp_path: Path) -> None:
    results = run_ranks(
        "train_ddp.py", 2, "--data", str(dataset), "--out", str(tmp_path), env={"T9K_DEMO_FAIL": "1"}
    )
    for rc, out, err in results:
        assert rc == 1
        assert [m[1] for m in LOSS.finditer(out)] == ["1"]
        assert "T9K_DEMO_FAIL is set, failing on purpose" in err
    assert not (tmp_path / "model.pt").exists()


@pytest.mark.parametrize(
    "again",
    [{"T9K_TRY_NUMBER": "2", "T9K_JOB_RESTARTS": ""}, {"T9K_TRY_NUMBER": "1", "T9K_JOB_RESTARTS": "1"}],
    ids=["retry", "whole-restart"],
)
def test_a_crashed_training_resumes_from_its_last_epoch_on_the_next_try_or_restart(
    dataset: Path, tmp_path: Path, again: dict[str, str]
) -> None:
    """The pipeline's training as Airflow's retry runs it, or the controller's whole restart of the job within
    the first try (a drained or lost node, a preemption: ``T9K_JOB_RESTARTS`` from the pod's annotation):
    the first run crashes after epoch 1 with its checkpoint saved, the next (the same ``T9K_CHECKPOINT_DIR``)
    trains epochs 2-4 only, reporting progress from there; an uninterrupted run ends with the same losses."""
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    common = ("--data", str(dataset), "--epochs", "4")
    first = {
        "T9K_DEMO_FAIL": "1",
        "T9K_CHECKPOINT_DIR": str(checkpoints),
        "T9K_TRY_NUMBER": "1",
        "T9K_JOB_RESTARTS": "0",
    }
    assert [rc for rc, _, _ in run_ranks("train_ddp.py", 2, *common, "--out", str(tmp_path), env=first)] == [
        1,
        1,
    ]
    assert (checkpoints / "latest.pt").is_file()
    retry = {"T9K_CHECKPOINT_DIR": str(checkpoints), **again}
    results = run_ranks("train_ddp.py", 2, *common, "--out", str(tmp_path), env=retry)
    assert [rc for rc, _, _ in results] == [0, 0], results[0][2]
    out = results[0][1]
    assert "rank 0: resuming after epoch 1" in out
    assert [int(m[1]) for m in LOSS.finditer(out)] == [2, 3, 4]  # not from epoch 1 again
    reports = [parse(line) for line in out.splitlines() if line.startswith("T9K_PROGRESS ")]
    assert reports and reports[-1] is not None and reports[-1].step == reports[-1].total
    resumed = json.loads((tmp_path / "metrics.json").read_text())["losses"]
    whole = tmp_path / "whole"
    assert all(rc == 0 for rc, _, _ in run_ranks("train_ddp.py", 2, *common, "--out", str(whole)))
    assert resumed == pytest.approx(json.loads((whole / "metrics.json").read_text())["losses"], abs=1e-6)


def test_framework_env_rank_rendezvous() -> None:
    results = run_ranks("framework_env.py", 3, "--framework", "rank")
    for rc, out, err in results:
        assert rc == 0, err
        assert "all-reduce over 3 replicas ok (sum of ranks 3)" in out


def test_framework_env_colossalai_launch_from_torch() -> None:
    """ColossalAI's own initialisation on CPU (gloo), from the variables torchrun gives each process."""
    if importlib.util.find_spec("colossalai") is None:
        pytest.fail("colossalai is not installed in this environment: run `make env`")
    results = run_ranks("framework_env.py", 2, "--framework", "colossalai")
    for rank, (rc, out, err) in enumerate(results):
        assert rc == 0, err
        assert re.search(rf"^colossalai \S+ rank {rank}/2 on \S+ backend=gloo$", out, re.MULTILINE), out
        assert "all-reduce over 2 replicas ok (sum of ranks 1)" in out


def test_framework_env_tensorflow() -> None:
    config = {
        "cluster": {"worker": ["tf-worker-0:2222", "tf-worker-1:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    result = run("framework_env.py", "--framework", "tensorflow", env={"TF_CONFIG": json.dumps(config)})
    assert result.returncode == 0, result.stderr
    assert "task=worker:1 me=tf-worker-1:2222" in result.stdout


def test_framework_env_mpi() -> None:
    result = run(
        "framework_env.py",
        "--framework",
        "mpi",
        env={"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("mpi rank 1/4 on ")


def test_framework_env_names_the_missing_variable() -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}
    }
    result = subprocess.run(
        [sys.executable, str(WORKLOADS / "framework_env.py"), "--framework", "rank"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "MASTER_ADDR is not set" in result.stderr


def test_rank_zero_writes_the_losses_for_tensorboard(dataset: Path, tmp_path: Path) -> None:
    """With ``T9K_TENSORBOARD_DIR`` (the pipeline's job sets it to the directory its TensorBoard reads) rank 0
    writes each epoch's loss (``epoch_loss``, at step = epoch) and report() each step's ``loss``;
    TensorBoard's own loader reads them back."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    board = tmp_path / "tensorboard"
    args = ("--data", str(dataset), "--out", str(tmp_path), "--epochs", "3")
    results = run_ranks("train_ddp.py", 2, *args, env={"T9K_TENSORBOARD_DIR": str(board)})
    assert [rc for rc, _, _ in results] == [0, 0], results[0][2]
    printed = [float(m[3]) for m in LOSS.finditer(results[0][1])]
    events = EventAccumulator(str(board))
    events.Reload()

    def scalars(tag: str) -> list[tuple[int, float]]:
        return [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]

    epochs = scalars("epoch_loss")
    assert [step for step, _ in epochs] == [1, 2, 3]
    assert [value for _, value in epochs] == pytest.approx(printed, abs=1e-5)
    steps = scalars("loss")
    assert len(steps) == 3 * (1639 // 2 // 64) and steps[-1][0] == len(steps)  # every step, rank 0's
