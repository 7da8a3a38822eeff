"""Data-parallel training of a tiny MLP with torch.distributed, as a PyTorchTrainingJob runs it: with NCCL
on the GPU the replica was given when it sees one (``CUDA_VISIBLE_DEVICES``), else with gloo on the CPU; the
first line of each rank says which.

The rendezvous comes from the variables the controller injects into every replica: ``MASTER_ADDR``,
``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE``. Every epoch prints one line that tools can parse::

    epoch 3/8 loss=0.123456 rank=0 world_size=2

(the loss is averaged over all ranks, so every rank prints the same value). Rank 0 writes ``model.pt`` and
``metrics.json`` to ``--out``. ``T9K_DEMO_FAIL=1`` makes every rank exit 1 after the first epoch, to show
what a failed training job looks like in Airflow.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

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
    model = DistributedDataParallel(build_model(x.shape[1], args.hidden).to(device))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()
    generator = torch.Generator().manual_seed(args.seed + rank)
    # Equal step counts on every rank, or the gradient all-reduce of the last step would hang.
    steps = len(x) // args.batch_size
    n = torch.tensor([steps], device=device)
    dist.all_reduce(n, op=dist.ReduceOp.MIN)
    steps = int(n.item())

    losses: list[float] = []
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(x), generator=generator).to(device)
        total = torch.zeros(2, device=device)
        for step in range(steps):
            idx = order[step * args.batch_size : (step + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item() * len(idx), len(idx)], device=device)
        dist.all_reduce(total)
        epoch_loss = float(total[0] / total[1])
        losses.append(epoch_loss)
        print(
            LOSS_LINE.format(epoch=epoch, epochs=args.epochs, loss=epoch_loss, rank=rank, world=world),
            flush=True,
        )
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
        state = {k: v.cpu() for k, v in model.module.state_dict().items()}
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


if __name__ == "__main__":
    code = main()
    # Skip the exit-time teardown of Python and C++: a gloo thread still joinable there aborts the process
    # ("terminate called without an active exception", rc -6), seen in loaded runs even after the barrier.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
