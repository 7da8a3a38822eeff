"""DAGs for the TaskFlow decorators' cluster tests (``test_taskflow_on_cluster.py``).

Replicas run as local processes of this interpreter's environment (the local cluster puts it first on PATH),
so torch is whatever Airflow has: the tests that need it skip where it is missing.
"""

from __future__ import annotations

import pendulum
from airflow.providers.common.compat.sdk import DAG, task

START = pendulum.datetime(2026, 1, 1, tz="UTC")
FAST = {"poll_interval": 1}

with DAG("it_tf_pytorch", schedule=None, start_date=START, catchup=False):

    @task
    def increment() -> int:
        return 1

    @task.t9k_pytorch(workers=2, **FAST)
    def allreduce(step: int) -> int:
        """Sum rank + step over gloo with env:// rendezvous: 3 only if both ranks joined."""
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo", timeout=timedelta(seconds=60))
        try:
            value = torch.tensor([dist.get_rank() + step])
            dist.all_reduce(value)
            return int(value.item())
        finally:
            dist.destroy_process_group()

    allreduce(increment())


with DAG("it_tf_generic", schedule=None, start_date=START, catchup=False):

    @task.t9k(env={"GREETING": "hello"}, deferrable=True, wait_before_defer=0, **FAST)  # ends deferred
    def describe(name: str, sizes: dict) -> dict:
        import os
        import sys

        return {
            "greeting": f"{os.environ['GREETING']} {name}",
            "total": sum(sizes.values()),
            "rank": os.environ["RANK"],
            "world": os.environ["WORLD_SIZE"],
            "python": sys.executable,
        }

    @task.t9k(deferrable=True, wait_before_defer=120, **FAST)  # ends in the worker, never deferred
    def square(x: float, offset: float) -> float:
        return x * x + offset

    @task
    def smallest(values: list[float]) -> float:
        return min(values)

    describe("{{ dag.dag_id }}", {"a": 1, "b": 2})
    smallest(square.partial(offset=0.5).expand(x=[2.0, 1.0]))


with DAG("it_tf_failures", schedule=None, start_date=START, catchup=False):

    @task.t9k(replicas=2, **FAST)
    def shard(rows: int) -> int:
        import os

        rank = int(os.environ["RANK"])
        if rank == 1:
            raise ValueError(f"shard {rank} has no rows")
        return rows

    @task.t9k(**FAST)
    def unreturnable() -> set:
        return {1, 2}

    shard(10)
    unreturnable()


with DAG("it_tf_tensorflow", schedule=None, start_date=START, catchup=False):

    @task.t9k_tensorflow(workers=2, **FAST)
    def tf_cluster() -> dict:
        import json
        import os

        config = json.loads(os.environ["TF_CONFIG"])
        return {"task": config["task"], "workers": len(config["cluster"]["worker"])}

    tf_cluster()


with DAG("it_tf_xgboost", schedule=None, start_date=START, catchup=False):

    @task.t9k_xgboost(workers=2, **FAST)
    def rabit_env() -> dict:
        import os

        return {k: os.environ[k] for k in ("RANK", "WORLD_SIZE")} | {"master": os.environ["MASTER_ADDR"]}

    rabit_env()


with DAG("it_tf_gpus", schedule=None, start_date=START, catchup=False):

    @task.t9k_pytorch(workers=2, gpus=1, **FAST)
    def visible_gpus() -> list:
        """Every rank's view of the GPUs: the ones its replica was given, as the device plugin shows them."""
        import os
        from datetime import timedelta

        import torch.distributed as dist

        dist.init_process_group("gloo", timeout=timedelta(seconds=60))
        try:
            seen: list = [None] * dist.get_world_size()
            mine = [os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("NVIDIA_VISIBLE_DEVICES")]
            dist.all_gather_object(seen, mine)
            return seen
        finally:
            dist.destroy_process_group()

    visible_gpus()


with DAG("it_tf_deepspeed", schedule=None, start_date=START, catchup=False):

    @task.t9k_deepspeed(workers=2, **FAST)
    def ds_allreduce(scale: int) -> list:
        """DeepSpeed's launcher started this on both workers: all-reduce rank + 1 over gloo."""
        import os
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo", timeout=timedelta(seconds=60))
        try:
            value = torch.tensor([dist.get_rank() + 1])
            dist.all_reduce(value)
            return [int(value.item()) * scale, os.environ["LOCAL_RANK"], dist.get_world_size()]
        finally:
            dist.destroy_process_group()

    ds_allreduce(10)
