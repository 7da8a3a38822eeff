"""Check the distributed-training environment a T9k controller gives a replica, then prove it works.

``--framework tensorflow`` validates ``TF_CONFIG`` (this replica must appear in its own cluster spec).
``--framework mpi`` reports the rank Open MPI's ``mpirun`` gave this process (``OMPI_COMM_WORLD_*``).
``--framework rank`` (XGBoost, PyTorch) validates ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` and
then all-reduces the ranks over gloo, which only succeeds when every replica can reach the master: the same
rendezvous an XGBoost (Rabit) or PyTorch script performs. ``--framework colossalai`` initialises with
ColossalAI's own ``colossalai.launch_from_torch()`` (gloo on CPU) from the variables torchrun sets, as under
``colossalai run``, then all-reduces the ranks the same way. Exits 2 with the missing variable on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from datetime import timedelta


def require(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        print(
            f"environment variable {name} is not set; is this running as a T9k Job replica?", file=sys.stderr
        )
        raise SystemExit(2)
    return value


def check_tensorflow() -> None:
    config = json.loads(require("TF_CONFIG"))
    task = config["task"]
    hosts = config["cluster"][task["type"]]
    print(
        f"TF_CONFIG task={task['type']}:{task['index']} me={hosts[task['index']]} "
        f"cluster={json.dumps(config['cluster'], sort_keys=True)}",
        flush=True,
    )


def check_mpi() -> None:
    rank, size = int(require("OMPI_COMM_WORLD_RANK")), int(require("OMPI_COMM_WORLD_SIZE"))
    print(f"mpi rank {rank}/{size} on {socket.gethostname()}", flush=True)


def check_rank_rendezvous() -> None:
    import torch.distributed as dist

    addr, port = require("MASTER_ADDR"), require("MASTER_PORT")
    rank, world = int(require("RANK")), int(require("WORLD_SIZE"))
    print(f"rank {rank}/{world} master={addr}:{port}", flush=True)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    all_reduce_ranks(rank, world)


def check_colossalai() -> None:
    import colossalai
    import torch.distributed as dist

    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        require(name)
    colossalai.launch_from_torch(verbose=False)
    rank, world = dist.get_rank(), dist.get_world_size()
    print(
        f"colossalai {colossalai.__version__} rank {rank}/{world} on {socket.gethostname()} "
        f"backend={dist.get_backend()}",
        flush=True,
    )
    all_reduce_ranks(rank, world)


def all_reduce_ranks(rank: int, world: int) -> None:
    """Sum the ranks over the initialised process group: only a group every rank has joined gets it right."""
    import torch
    import torch.distributed as dist

    try:
        total = torch.tensor([rank])
        dist.all_reduce(total)
        expected = world * (world - 1) // 2
        if int(total.item()) != expected:
            raise SystemExit(f"all-reduce of ranks gave {int(total.item())}, expected {expected}")
        print(f"all-reduce over {world} replicas ok (sum of ranks {expected})", flush=True)
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--framework", choices=["tensorflow", "mpi", "rank", "colossalai"], required=True)
    args = parser.parse_args(argv)
    checks = {
        "tensorflow": check_tensorflow,
        "mpi": check_mpi,
        "rank": check_rank_rendezvous,
        "colossalai": check_colossalai,
    }
    checks[args.framework]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
