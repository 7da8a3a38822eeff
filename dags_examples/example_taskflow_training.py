"""example_taskflow_training: the training pipeline written as decorated Python functions (TaskFlow).

What it shows:

* ``prepare_data`` (``@task.t9k``): a GenericJob runs the function once; it writes a deterministic synthetic
  data set to the shared volume and returns where it is and how large (its XCom).
* ``train`` (``@task.t9k_pytorch(workers=2)``): the function runs on both replicas of a PyTorchTrainingJob.
  ``init_process_group`` needs no arguments: the controller sets ``RANK``, ``WORLD_SIZE``,
  ``MASTER_ADDR``, ``MASTER_PORT`` and the decorator ``LOCAL_RANK``. It trains the pipeline's small MLP with
  DistributedDataParallel, with NCCL on the replica's GPU when the node has GPUs and the task asks for them
  (``gpus=1``), else with gloo on the CPU, and says which; rank 0 saves the model and its return value
  becomes the XCom.
  ``.partial().expand(lr=...)`` sweeps the learning rate: one job per value.
  It reports its progress every step (``t9k_provider.progress.report``: the task log shows the step, rate,
  ETA and loss, the task pushes XCom ``t9k_progress``) and checkpoints every epoch to ``T9K_CHECKPOINT_DIR``
  (``checkpoint_volume``: a directory per mapped task instance, the same on every try). A retry, after a
  lost node or after ``progress_timeout`` stopped a hung job, resumes from the last checkpoint instead of
  epoch 1 (docs/airflow.md#watching-and-resuming-training-runs).
* ``evaluate`` (``@task.t9k``), mapped over the sweep's results, scores each checkpoint on the held-out split.
* ``pick_best``, a plain ``@task``, picks the learning rate with the lowest test error.

The arguments (upstream XComs included) reach every replica; nothing but the functions' own source travels,
so each function imports what it uses. The model and the data generator come from
``dags_examples/workloads`` (``train_ddp.build_model``, ``prepare_data.make_dataset``,
``evaluate.evaluate``), mounted at ``/workspace`` and put on ``PYTHONPATH``: on a real cluster bake them into
``IMAGE`` instead and replace the ``hostPath`` volumes with a ``ReadWriteMany`` PVC. On the local cluster the
replicas run Airflow's own interpreter (torch included) and the image is not pulled. The checkpoints go to the
claim ``t9k-checkpoints`` (``CHECKPOINTS``): on the local cluster a directory of its state, on a real cluster
a ``ReadWriteMany`` PersistentVolumeClaim of that name to create in the namespace first.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.providers.common.compat.sdk import DAG, Param, task

WORKLOADS = str(Path(__file__).resolve().parent / "workloads")
IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"  # any image with python, torch and numpy
RUN_DIR = "/data/runs/{{ run_id | pathsafe }}"
LEARNING_RATES = [0.003, 0.01, 0.03]
#: Every job: the shared data directory at /data, the workload modules at /workspace (importable).
JOB = {
    "image": IMAGE,
    "namespace": "default",
    "env": {"PYTHONPATH": "/workspace"},
    "volumes": [
        {"name": "data", "hostPath": {"path": "{{ params.data_root }}", "type": "DirectoryOrCreate"}},
        {"name": "workspace", "hostPath": {"path": WORKLOADS, "type": "Directory"}},
    ],
    "volume_mounts": [
        {"name": "data", "mountPath": "/data"},
        {"name": "workspace", "mountPath": "/workspace", "readOnly": True},
    ],
    "container_resources": {
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": "1", "memory": "2Gi"},
    },
}
#: Where the trainings checkpoint (``checkpoint_volume``): every replica mounts it at ``T9K_CHECKPOINT_DIR``,
#: with a sub-directory per task instance and map index. On the local cluster a claim is a directory of the
#: cluster's state (no PersistentVolumeClaim object needed); on a real cluster create a ``ReadWriteMany`` PVC
#: named ``t9k-checkpoints`` in the namespace (every replica mounts it, across nodes), or use a ``hostPath``
#: only on a single node.
CHECKPOINTS = {"persistentVolumeClaim": {"claimName": "t9k-checkpoints"}}


def pathsafe(value: str) -> str:
    """Run ids contain ``:`` and ``+``; keep directory names portable."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", value)


with DAG(
    dag_id="example_taskflow_training",
    description="@task.t9k data prep -> @task.t9k_pytorch DDP sweep over learning rates -> evaluation",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=20), "poll_interval": 2},
    user_defined_filters={"pathsafe": pathsafe},
    params={
        "data_root": Param(
            os.environ.get("T9K_DEMO_DATA_ROOT", "/tmp/t9k-demo-data"),
            type="string",
            description="Host directory mounted at /data in every job (one sub-directory per run).",
        ),
        "epochs": Param(6, type="integer", minimum=1, maximum=100),
    },
    tags=["t9k", "example", "taskflow", "pytorch"],
):

    @task.t9k(**JOB)
    def prepare_data(run_dir: str, samples: int = 4096, test_fraction: float = 0.2) -> dict:
        from pathlib import Path

        import numpy as np
        from prepare_data import make_dataset

        x, y = make_dataset(samples, features=16, seed=20240601)
        n_test = int(samples * test_fraction)
        out = Path(run_dir) / "dataset"
        out.mkdir(parents=True, exist_ok=True)
        np.savez(out / "train.npz", x=x[n_test:], y=y[n_test:])
        np.savez(out / "test.npz", x=x[:n_test], y=y[:n_test])
        return {"dir": str(out), "train": samples - n_test, "test": n_test, "features": x.shape[1]}

    @task.t9k_pytorch(
        workers=2,
        # A lost node or a stall costs the epoch in flight: the retry's new job resumes from the last
        # checkpoint. An exception in train() is a bug and fails the task at once (retry_on_job_failure).
        retries=2,
        checkpoint_volume=CHECKPOINTS,
        # A hung collective prints nothing: with no report for 5 minutes the job is stopped and the task
        # retried (the first report comes seconds after the replicas start, then one per step).
        progress_timeout=timedelta(minutes=5),
        execution_timeout=timedelta(minutes=20),
        **JOB,
    )
    def train(dataset: dict, lr: float, run_dir: str, epochs: str, batch_size: int = 64) -> dict:
        """Data-parallel training: each rank takes every world-th sample; gradients are all-reduced. Rank 0
        checkpoints every epoch; a retry resumes from the latest checkpoint."""
        import os
        from datetime import timedelta
        from pathlib import Path

        import numpy as np
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        from train_ddp import build_model, pick_device

        from t9k_provider.progress import report  # the runner ships it: works in any image

        device, backend = pick_device()  # the replica's GPU with NCCL if it sees one, else the CPU with gloo
        dist.init_process_group(backend, timeout=timedelta(seconds=120))
        rank, world = dist.get_rank(), dist.get_world_size()
        print(f"rank {rank}/{world}: training on {device} with {backend}", flush=True)
        try:
            torch.set_num_threads(1)
            torch.manual_seed(0)  # the same initial weights on every rank
            data = np.load(Path(dataset["dir"]) / "train.npz")
            x = torch.from_numpy(data["x"])[rank::world].to(device)
            y = torch.from_numpy(data["y"])[rank::world].to(device)
            model = build_model(dataset["features"], 32).to(device)
            optimizer = torch.optim.Adam(model.parameters(), lr=lr)
            # The same directory on every try of this mapped instance; only the first try's first run starts
            # afresh (a retry, or the job restarted as a whole after a disruption, resumes).
            checkpoint = Path(os.environ["T9K_CHECKPOINT_DIR"]) / "latest.pt"
            done, losses = 0, []
            first = os.environ["T9K_TRY_NUMBER"] == "1" and os.environ["T9K_JOB_RESTARTS"] in ("", "0")
            if not first and checkpoint.exists():
                # Every rank reads the same file before the first collective, so all resume at one epoch.
                state = torch.load(checkpoint, map_location=device)
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                done, losses = state["epoch"], state["losses"]
                print(f"rank {rank}: resuming after epoch {done} from {checkpoint}", flush=True)
            ddp = DistributedDataParallel(model)
            steps = torch.tensor([len(x) // batch_size], device=device)
            dist.all_reduce(steps, op=dist.ReduceOp.MIN)  # equal step counts, or the last all-reduce hangs
            steps, total_steps = int(steps), int(epochs) * int(steps)
            for epoch in range(done, int(epochs)):
                generator = torch.Generator().manual_seed(epoch * world + rank)
                order = torch.randperm(len(x), generator=generator).to(device)
                total = torch.zeros(2, device=device)
                for step in range(steps):
                    batch = order[step * batch_size : (step + 1) * batch_size]
                    optimizer.zero_grad()
                    loss = torch.nn.functional.mse_loss(ddp(x[batch]), y[batch])
                    loss.backward()
                    optimizer.step()
                    value = loss.item()
                    total += torch.tensor([value * len(batch), len(batch)], device=device)
                    # rank 0 writes the line (its own batch's loss); on the other ranks report() returns
                    report(epoch * steps + step + 1, total=total_steps, epoch=epoch + 1, loss=round(value, 6))
                dist.all_reduce(total)
                losses.append(float(total[0] / total[1]))
                print(f"lr={lr} epoch {epoch + 1}/{epochs} loss={losses[-1]:.6f} rank={rank}", flush=True)
                if rank == 0:  # written whole, then renamed: a crash mid-write keeps the previous checkpoint
                    state = {"epoch": epoch + 1, "losses": losses, "model": model.state_dict()}
                    torch.save({**state, "optimizer": optimizer.state_dict()}, f"{checkpoint}.tmp")
                    os.replace(f"{checkpoint}.tmp", checkpoint)
            model_dir = Path(run_dir) / f"model-lr{lr}"
            if rank == 0:  # the layout evaluate.py reads
                model_dir.mkdir(parents=True, exist_ok=True)
                config = {"features": dataset["features"], "hidden": 32}
                state = {k: v.cpu() for k, v in model.state_dict().items()}
                torch.save({"state_dict": state, "config": config}, model_dir / "model.pt")
            return {"lr": lr, "model_dir": str(model_dir), "first_loss": losses[0], "final_loss": losses[-1]}
        finally:
            dist.destroy_process_group()

    @task.t9k(**JOB)
    def evaluate(trained: dict, dataset: dict) -> dict:
        from pathlib import Path

        from evaluate import evaluate as score

        return {"lr": trained["lr"], **score(Path(dataset["dir"]), Path(trained["model_dir"]))}

    @task
    def pick_best(scores: list[dict]) -> dict:
        """The learning rate with the lowest test error, with every rate's score for comparison."""
        ranked = sorted(scores, key=lambda s: s["test_mse"])
        print("sweep:", ", ".join(f"lr={s['lr']}: test_mse={s['test_mse']:.4f}" for s in ranked))
        return {**ranked[0], "sweep": {str(s["lr"]): s["test_mse"] for s in ranked}}

    data = prepare_data(RUN_DIR)
    trained = train.partial(dataset=data, run_dir=RUN_DIR, epochs="{{ params.epochs }}").expand(
        lr=LEARNING_RATES
    )
    pick_best(evaluate.partial(dataset=data).expand(trained=trained))
