"""DAGs for the real-deployment tests (``test_deployment.py``); replicas run as local processes.

Every job prints what the tests look for and sleeps just long enough for the test to act while it runs.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG

from t9k_provider.operators import GenericJobOperator, PyTorchTrainingJobOperator

PY = sys.executable
START = pendulum.datetime(2026, 1, 1, tz="UTC")
EPOCHS = 20  # 60 s: the live-log test starts after the lost-worker test, while this still runs
#: Each rank prints one ``epoch i/n loss=`` line per epoch, like dags_examples/t9k_training_pipeline.py.
TRAIN = f"""
import os, time
rank = int(os.environ["RANK"])
for epoch in range(1, {EPOCHS} + 1):
    time.sleep(3)
    print(f"epoch {{epoch}}/{EPOCHS} loss={{1.0 / (epoch + rank):.6f}} rank={{rank}}", flush=True)
"""


def replica(replica_type: str, code: str, restart_policy: Any, replicas: int = 1) -> dict[str, Any]:
    return {
        "type": replica_type,
        "replicas": replicas,
        "restartPolicy": restart_policy,
        "template": {
            "spec": {
                "containers": [{"name": "main", "image": "python:3.11", "command": [PY, "-u", "-c", code]}]
            }
        },
    }


def generic(code: str) -> dict[str, Any]:
    """A one-replica GenericJob that succeeds or fails with its replica."""
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "spec": {
            "successRules": [{"worker": [0]}],
            "failureRules": [{"worker": [0]}],
            "replicaSpecs": [replica("worker", code, {"policy": "Never"})],
        },
    }


def named(name: str, code: str) -> dict[str, Any]:
    """``generic(code)`` with an explicit ``metadata.name``."""
    return {**generic(code), "metadata": {"name": name}}


#: Reports steps 1..PROGRESS_STEPS of PROGRESS_STEPS, one every half second (about 24 s), with a loss metric:
#: long enough for a progress line with a rate after a trigger that started streaming late.
PROGRESS_STEPS = 48
PROGRESS = f"""
import time
from t9k_provider.progress import report
print("training starts", flush=True)
for step in range(1, {PROGRESS_STEPS} + 1):
    time.sleep(0.5)
    report(step, total={PROGRESS_STEPS}, loss=round(1.0 / step, 4))
"""
#: Reports step 1 once, then hangs as a training whose collective never answers.
STALLED = """
import time
from t9k_provider.progress import report
report(1, total=100, loss=0.9)
print("step 1 done; hanging", flush=True)
time.sleep(600)
"""
#: progress_timeout of the stalled jobs (dep_stall), and of the one whose triggerer is killed (longer: its
#: deadline must fall after a new triggerer took the trigger over, TRIGGERER_HEALTH_CHECK_THRESHOLD 15 s after
#: the last heartbeat, plus its start on a loaded machine: some 20-30 s after the report).
STALL_TIMEOUT = 8
STALL_RESTART_TIMEOUT = 45


def ticking(seconds: int) -> dict[str, Any]:
    """A job that prints ``tick i`` every second for ``seconds`` seconds."""
    return generic(
        f"import time\nfor i in range({seconds}):\n    print('tick', i, flush=True)\n    time.sleep(1)"
    )


# The example pipeline's shape and retry settings: a race that ends a try early shows as try 2.
with DAG(
    dag_id="dep_pipeline",
    schedule=None,
    start_date=START,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=20), "poll_interval": 2, "deferrable": True},
):
    prepare = GenericJobOperator(task_id="prepare", manifest=generic("print('DATASET ready', flush=True)"))
    train = PyTorchTrainingJobOperator(
        task_id="train",
        manifest={
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "PyTorchTrainingJob",
            "spec": {"replicaSpecs": [replica("worker", TRAIN, "Never", replicas=2)]},
        },
        log_replicas="worker",
    )
    evaluate = GenericJobOperator(task_id="evaluate", manifest=generic("print('EVAL {\"accuracy\": 1.0}')"))
    prepare >> train >> evaluate

with DAG(dag_id="dep_mark_failed", schedule=None, start_date=START):
    GenericJobOperator(task_id="wait", manifest=ticking(300), deferrable=True, poll_interval=2)

# Deferred at once, as dep_stall_restart is: the test kills the triggerer while both wait in it.
with DAG(dag_id="dep_triggerer_kill", schedule=None, start_date=START):
    GenericJobOperator(
        task_id="wait", manifest=ticking(40), deferrable=True, wait_before_defer=0, poll_interval=2
    )

# Progress reports read by the triggerer (deferred at once): progress lines in the task log, XCom
# t9k_progress.
with DAG(dag_id="dep_progress", schedule=None, start_date=START):
    GenericJobOperator(
        task_id="train", manifest=generic(PROGRESS), deferrable=True, wait_before_defer=0, poll_interval=2,
        progress_timeout=60,
    )  # fmt: skip


def stalled(task_id: str, progress_timeout: int, **mode: Any) -> GenericJobOperator:
    """A training that reports once and hangs, waited for as ``mode`` says (deferred at once by default)."""
    mode = {"deferrable": True, "wait_before_defer": 0, "poll_interval": 2, **mode}
    return GenericJobOperator(
        task_id=task_id, manifest=generic(STALLED), progress_timeout=progress_timeout, **mode
    )


# A training that reports once and hangs: progress_timeout stops it, in the triggerer and in the worker.
with DAG(dag_id="dep_stall", schedule=None, start_date=START, default_args={"retries": 0}):
    stalled("deferred", STALL_TIMEOUT)
    stalled("in_worker", STALL_TIMEOUT, deferrable=False, poll_interval=1)

# The same hang, deferred; the test kills the triggerer after the report was read (with dep_triggerer_kill).
with DAG(dag_id="dep_stall_restart", schedule=None, start_date=START, default_args={"retries": 0}):
    stalled("deferred", STALL_RESTART_TIMEOUT)

# Waits in the worker; the test kills the task's process while the job runs. The retry starts after the job
# has succeeded.
with DAG(
    dag_id="dep_lost_worker",
    schedule=None,
    start_date=START,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=15)},
):
    GenericJobOperator(task_id="job", manifest=ticking(10), deferrable=False, poll_interval=1)

# An explicit metadata.name shared by three mapped instances, and reused by every run of the DAG.
with DAG(dag_id="dep_mapped_same_name", schedule=None, start_date=START):
    GenericJobOperator.partial(task_id="sweep", deferrable=True, poll_interval=2).expand(
        manifest=[named("sweep", f"print('point {i}')") for i in range(3)]
    )

with DAG(dag_id="dep_explicit_name", schedule=None, start_date=START):
    GenericJobOperator(task_id="job", manifest=named("explicit-name", "print('done')"), poll_interval=2)
