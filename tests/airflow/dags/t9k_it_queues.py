"""DAGs for tasks whose jobs wait in a T9k Queue (``test_queues_on_cluster.py``): each runs one 2-GPU training
(a GenericJob of two workers of one GPU each; worker 0 reports its progress), deferrable, waiting its first
seconds in the worker, so a wait in line is told in both; the DAG's name says its Queue, priority and
``queue_timeout``."""

from __future__ import annotations

import sys

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.kube.resources import GPU
from t9k_provider.operators import GenericJobOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")
#: Steps of each training and the seconds each takes.
STEPS, STEP_SECONDS = 8, 1.0
#: Shorter than each wait in line: a task must not fail by it.
STARTUP_TIMEOUT = 6
#: The seconds each task waits in the worker before it defers.
IN_WORKER = 6
TRAIN = (
    "import time\n"
    "from t9k_provider.progress import report\n"
    f"for step in range(1, {STEPS} + 1):\n"
    f"    time.sleep({STEP_SECONDS})\n"
    f"    report(step, total={STEPS})\n"
)


def training(queue: str, priority: int = 10, code: str = TRAIN) -> dict:
    worker = {
        "name": "main", "image": "python:3.11", "command": [sys.executable, "-u", "-c", code],
        "resources": {"limits": {GPU: 1}, "requests": {"cpu": "100m"}},
    }  # fmt: skip
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "train"},
        "spec": {
            "scheduler": {"t9kScheduler": {"queue": queue, "priority": priority}},
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": {"spec": {"containers": [worker]}}}
            ],
        },
    }


#: dag id -> (queue, priority, queue_timeout)
ROLES: dict[str, tuple[str, int, float | None]] = {
    **{f"it_queue_{i}": ("it-gpu", 10, None) for i in (1, 2, 3)},
    "it_queue_low": ("it-prio", 10, None),
    "it_queue_high": ("it-prio", 50, None),
    "it_queue_timeout": ("it-prio", 5, 4.0),
    "it_queue_closed": ("it-closed", 10, 45.0),
    "it_queue_deleted": ("it-deleted", 10, 45.0),
}

for dag_id, (queue, priority, queue_timeout) in ROLES.items():
    with DAG(dag_id, schedule=None, start_date=START, catchup=False):
        GenericJobOperator(
            task_id="train", manifest=training(queue, priority), deferrable=True, wait_before_defer=IN_WORKER,
            poll_interval=1, startup_timeout=STARTUP_TIMEOUT, queue_timeout=queue_timeout, retries=0,
        )  # fmt: skip
