"""DAGs for watching and resuming training runs (``test_training_runs_on_cluster.py``): a training that
reports progress, checkpoints each epoch and crashes once, and one that reports once and hangs; each waits in
the worker (``<dag>``) and deferred (``<dag>_deferrable``)."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.providers.common.compat.assets import Asset
from airflow.providers.common.compat.sdk import DAG, task

START = pendulum.datetime(2026, 1, 1, tz="UTC")
#: The checkpoint volume: a directory of the host, each task instance in its own subdirectory of it.
CHECKPOINTS = Path(tempfile.gettempdir()) / "t9k-it-checkpoints"
EPOCHS = 6
CRASH_AFTER = 2
#: Seconds without a report after which the hanging training is stopped.
STALL_TIMEOUT = 6
MODES = {"": {"deferrable": False}, "_deferrable": {"deferrable": True, "wait_before_defer": 0}}

for suffix, mode in MODES.items():
    with DAG(f"it_resume{suffix}", schedule=None, start_date=START, catchup=False):

        @task.t9k_pytorch(
            workers=2, retries=1, retry_delay=timedelta(seconds=1), retry_on_job_failure=True,
            checkpoint_volume={"hostPath": {"path": str(CHECKPOINTS), "type": "DirectoryOrCreate"}},
            progress_timeout=120, poll_interval=1, outlets=[Asset(f"t9k-it-model{suffix}")], **mode,
        )  # fmt: skip
        def train(epochs: int, crash_after: int) -> dict:
            """Resume from the latest checkpoint, report every epoch, crash after ``crash_after`` on try 1."""
            import json
            import os
            import time
            from datetime import timedelta

            import torch
            import torch.distributed as dist

            from t9k_provider.progress import report

            dist.init_process_group("gloo", timeout=timedelta(seconds=60))
            try:
                path = os.path.join(os.environ["T9K_CHECKPOINT_DIR"], "latest.json")
                started = 1
                if os.path.exists(path):
                    with open(path) as saved:
                        started = json.load(saved)["epoch"] + 1
                dist.barrier()  # every rank read the checkpoint before rank 0 writes the next
                for epoch in range(started, epochs + 1):
                    grad = torch.tensor([float(dist.get_rank() + epoch)])
                    dist.all_reduce(grad)
                    if dist.get_rank() == 0:
                        with open(path + ".tmp", "w") as out:
                            json.dump({"epoch": epoch}, out)
                        os.replace(path + ".tmp", path)  # never a half-written checkpoint
                    dist.barrier()
                    report(epoch, total=epochs, loss=round(1.0 / epoch, 4))
                    time.sleep(0.5)
                    if epoch == crash_after and os.environ["T9K_TRY_NUMBER"] == "1":
                        raise RuntimeError(f"simulated crash after epoch {epoch}")
                return {"started_at": started, "try": int(os.environ["T9K_TRY_NUMBER"])}
            finally:
                dist.destroy_process_group()

        train(EPOCHS, CRASH_AFTER)

    with DAG(f"it_stall{suffix}", schedule=None, start_date=START, catchup=False):

        @task.t9k(progress_timeout=STALL_TIMEOUT, poll_interval=1, retries=0, **mode)
        def hang() -> None:
            """Report once, then wait on a peer that never answers."""
            import time

            from t9k_provider.progress import report

            report(1, total=10, loss=0.9)
            time.sleep(600)

        hang()
