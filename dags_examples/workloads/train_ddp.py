"""Data-parallel training of a tiny MLP with torch.distributed, as a PyTorchTrainingJob runs it: with NCCL
on the GPU the replica was given when it sees one (``CUDA_VISIBLE_DEVICES``), else with gloo on the CPU; the
first line of each rank says which.

The rendezvous comes from the variables the controller injects into every replica: ``MASTER_ADDR``,
``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE``. Every epoch prints one line that tools can parse::

    epoch 3/8 loss=0.123456 rank=0 world_size=2

(the loss is averaged over all ranks, so every rank prints the same value). Rank 0 writes ``model.pt`` and
``metrics.json`` to ``--out``. ``T9K_DEMO_FAIL=1`` makes every rank exit 1 after the first epoch, to show
what a failed training job looks like in Airflow.

Progress: rank 0 reports every step with ``t9k_provider.progress.report`` (the waiting task shows step, rate,
ETA and loss, and stops a job that stops reporting: ``progress_timeout``). The local cluster's replicas run
the provider's own interpreter, so the package is there; an image without it gets the same
``T9K_PROGRESS {...}`` line from the fallback below (docs/airflow.md#progress-lines), so the script needs no
more than torch and numpy.

Checkpoints: with ``--checkpoint-dir`` (default ``$T9K_CHECKPOINT_DIR``, which the operator's
``checkpoint_volume`` sets) rank 0 saves ``latest.pt`` after every epoch (written whole, then renamed):
the model, the optimizer's state and the losses so far. Every rank resumes from it, except on the first run
of a task's first try (``T9K_TRY_NUMBER=1`` and ``T9K_JOB_RESTARTS`` empty or 0), which starts afresh: a
retry, and a job restarted as a whole after a disruption (a drained or lost node, a preemption), go on from
the last epoch saved. Nothing else carries state across epochs (the initial weights and each epoch's
shuffle are seeded), so a resumed run ends with the losses of an uninterrupted one.

TensorBoard: with ``--tensorboard-dir`` (default ``$T9K_TENSORBOARD_DIR``, the directory the job's
TensorBoard reads) rank 0 writes each epoch's loss there as the scalar ``epoch_loss`` (at step = epoch) with
``torch.utils.tensorboard``, and ``report()`` adds each step's ``loss``. Where the image lacks
``tensorboard``, the script says so and trains on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

try:
    from t9k_provider.progress import report
except ImportError:  # an image without the provider: print the documented line itself

    def report(step: int, total: int | None = None, **metrics: float) -> None:
        if os.environ.get("RANK", "0") in ("", "0"):  # as report(): global rank 0 only
            line = {"step": step, "total": total, "metrics": metrics}
            print(f"T9K_PROGRESS {json.dumps(line, separators=(',', ':'))}", flush=True)


LOSS_LINE = "epoch {epoch}/{epochs} loss={loss:.6f} rank={rank} world_size={world}"


def build_model(features: int, hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1)
    )


def demo_failure_requested() -> bool:
    return os.environ.get("T9K_DEMO_FAIL", "").strip().lower() in {"1", "true", "yes"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="directory holding train.npz")
    parser.add_argument("--out", required=True, help="directory for model.pt and metrics.json (rank 0)")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoint-dir",
        default=os.environ.get("T9K_CHECKPOINT_DIR"),
        help="where rank 0 saves latest.pt every epoch and every rank resumes from (default: "
        "$T9K_CHECKPOINT_DIR; unset: no checkpoints)",
    )
    parser.add_argument(
        "--tensorboard-dir",
        default=os.environ.get("T9K_TENSORBOARD_DIR"),
        help="where rank 0 writes the epoch losses for TensorBoard (default: $T9K_TENSORBOARD_DIR; unset: "
        "none)",
    )
    args = parser.parse_args(argv)

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    device, backend = pick_device()
    print(
        f"rank {rank}/{world} joining {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}, "
        f"training on {device} with {backend}",
        flush=True,
    )
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=120))
    try:
        result = train(args, rank, world, device)
        # Leave together: a rank tearing gloo down while its peer still holds the connection can abort
        # the peer at exit ("terminate called without an active exception", seen once in a loaded run).
        dist.barrier()
        return result
    finally:
        dist.destroy_process_group()


def pick_device() -> tuple[torch.device, str]:
    """The replica's GPU with NCCL when it sees one (the kubelet shows each replica only the GPUs it was
    given, as the NVIDIA device plugin does), else the CPU with gloo."""
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
        torch.cuda.set_device(local)
        return torch.device("cuda", local), "nccl"
    return torch.device("cpu"), "gloo"


def train(args: argparse.Namespace, rank: int, world: int, device: torch.device) -> int:
    # A tiny model: one thread per rank beats several threads per rank fighting over the same cores.
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)  # same initial weights on every rank; DDP also broadcasts rank 0's
    data = np.load(Path(args.data) / "train.npz")
    x = torch.from_numpy(data["x"])[rank::world].to(device)
    y = torch.from_numpy(data["y"])[rank::world].to(device)
    module = build_model(x.shape[1], args.hidden).to(device)
    optimizer = torch.optim.Adam(module.parameters(), lr=args.lr)
    checkpoint = Path(args.checkpoint_dir) / "latest.pt" if args.checkpoint_dir else None
    done, losses = resume(checkpoint, module, optimizer, rank, device)
    board = summary_writer(args.tensorboard_dir) if rank == 0 else None
    model = DistributedDataParallel(module)
    loss_fn = nn.MSELoss()
    # Equal step counts on every rank, or the gradient all-reduce of the last step would hang.
    steps = len(x) // args.batch_size
    n = torch.tensor([steps], device=device)
    dist.all_reduce(n, op=dist.ReduceOp.MIN)
    steps = int(n.item())

    for epoch in range(done + 1, args.epochs + 1):
        # Seeded per epoch, so a resumed run shuffles as an uninterrupted one would.
        generator = torch.Generator().manual_seed(args.seed + epoch * world + rank)
        order = torch.randperm(len(x), generator=generator).to(device)
        total = torch.zeros(2, device=device)
        for step in range(steps):
            idx = order[step * args.batch_size : (step + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            value = loss.item()
            total += torch.tensor([value * len(idx), len(idx)], device=device)
            # rank 0's batch loss; on the other ranks report() writes nothing
            report(
                (epoch - 1) * steps + step + 1, total=args.epochs * steps, epoch=epoch, loss=round(value, 6)
            )
        dist.all_reduce(total)
        epoch_loss = float(total[0] / total[1])
        losses.append(epoch_loss)
        if board is not None:
            board.add_scalar("epoch_loss", epoch_loss, epoch)
            board.flush()  # TensorBoard shows each epoch as it ends
        print(
            LOSS_LINE.format(epoch=epoch, epochs=args.epochs, loss=epoch_loss, rank=rank, world=world),
            flush=True,
        )
        if checkpoint is not None and rank == 0:
            save(checkpoint, {"epoch": epoch, "losses": losses, "model": module.state_dict()}, optimizer)
        if demo_failure_requested():
            print(
                f"rank {rank}: T9K_DEMO_FAIL is set, failing on purpose after epoch {epoch}",
                file=sys.stderr,
                flush=True,
            )
            return 1

    if rank == 0:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        config = {"features": int(x.shape[1]), "hidden": args.hidden}
        state = {k: v.cpu() for k, v in module.state_dict().items()}
        torch.save({"state_dict": state, "config": config}, out / "model.pt")
        metrics = {
            "epochs": args.epochs,
            "world_size": world,
            "losses": losses,
            "first_loss": losses[0],
            "final_loss": losses[-1],
        }
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
        print(f"checkpoint written to {out / 'model.pt'}", flush=True)
    return 0


def resume(
    checkpoint: Path | None,
    module: nn.Module,
    optimizer: torch.optim.Optimizer,
    rank: int,
    device: torch.device,
) -> tuple[int, list[float]]:
    """The epochs done and their losses: from ``checkpoint`` when there is one and this is not the first run
    of the task's first try (which starts afresh, whatever an earlier run left), else none. Every rank reads
    the same file before the first collective, so all resume after the same epoch."""
    if checkpoint is None or not checkpoint.is_file() or first_run():
        return 0, []
    state = torch.load(checkpoint, map_location=device)
    module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    print(f"rank {rank}: resuming after epoch {state['epoch']} from {checkpoint}", flush=True)
    return int(state["epoch"]), list(state["losses"])


def summary_writer(directory: str | None) -> Any:
    """A TensorBoard writer on ``directory`` (None: no directory, or no ``tensorboard`` in the image)."""
    if not directory:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        print(f"no TensorBoard writer ({exc}): the epoch losses go to the log only", flush=True)
        return None
    return SummaryWriter(directory)


def first_run() -> bool:
    """The first try's job before any whole restart (docs/airflow.md#checkpoints-across-retries)."""
    restarts = os.environ.get("T9K_JOB_RESTARTS", "").strip()
    return os.environ.get("T9K_TRY_NUMBER") == "1" and restarts in ("", "0")


def save(checkpoint: Path, state: dict, optimizer: torch.optim.Optimizer) -> None:
    """Write the checkpoint whole, then rename it over the last: a crash mid-write keeps the previous one."""
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    partial = checkpoint.with_name(checkpoint.name + ".tmp")
    torch.save({**state, "optimizer": optimizer.state_dict()}, partial)
    os.replace(partial, checkpoint)


if __name__ == "__main__":
    code = main()
    # Skip the exit-time teardown of Python and C++: a gloo thread still joinable there aborts the process
    # ("terminate called without an active exception", rc -6), seen in loaded runs even after the barrier.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
