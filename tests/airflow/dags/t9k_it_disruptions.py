"""The DAG of ``test_disruptions_on_cluster.py``: the example pipeline's 2-worker training
(``dags_examples/workloads/train_ddp.py``, seeded, checkpointing model, optimizer and losses every epoch to
``checkpoint_volume``), one worker per node of a 3-node cluster, in the worker (``it_disrupted``) and deferred
(``it_disrupted_deferrable``), with ``retries=3``.

The script runs unchanged under a thin wrapper that the run's conf steers: ``hold_at`` holds rank 0 after
that step until ``gate`` exists (writing ``<gate>.reached`` when it gets there), so the test disrupts the
training at a known step however loaded the machine; ``bug_at`` raises ``ValueError`` at that step on every
rank, a bug in the training code. ``scenario`` labels the job, so the test finds it.
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG, Param

from t9k_provider.operators import PyTorchTrainingJobOperator

WORKLOADS = Path(__file__).resolve().parents[3] / "dags_examples" / "workloads"
ROOT = Path(tempfile.gettempdir()) / "t9k-it-disruptions"
#: The data set the module writes once with ``prepare_data.py``; the checkpoints' host directory.
DATA = ROOT / "dataset"
CHECKPOINTS = ROOT / "checkpoints"
#: Where train_ddp.py writes ``metrics.json``: beside its checkpoint, in the task instance's directory.
OUT = "/t9k/checkpoints/model"
EPOCHS = 4
#: The training's label holding the run's ``scenario``.
SCENARIO = "t9k-it/scenario"
#: The gang's priority (0-100); a higher one preempts it.
PRIORITY = 50
#: CPU per worker: more than half a node of 1 CPU, so each node takes one worker.
CPU = "600m"

WRAPPER = f"""
import os, sys, time, traceback
from pathlib import Path
sys.path.insert(0, {str(WORKLOADS)!r})
import train_ddp

hold_at, bug_at = int(os.environ["HOLD_AT"] or 0), int(os.environ["BUG_AT"] or 0)
gate = Path(os.environ["GATE"]) if os.environ["GATE"] else None
report = train_ddp.report


def steered(step, total=None, **metrics):
    report(step, total, **metrics)
    if step == bug_at:
        raise ValueError(f"a bug in the training code at step {{step}}")
    if step == hold_at and gate is not None and os.environ["RANK"] == "0":
        reached = gate.with_name(gate.name + ".reached")
        reached.with_suffix(".tmp").write_text(str(step))
        reached.with_suffix(".tmp").replace(reached)
        until = time.time() + 90
        while not gate.exists() and time.time() < until:
            time.sleep(0.1)


train_ddp.report = steered
try:
    code = train_ddp.main(sys.argv[1:])
except BaseException:
    traceback.print_exc()
    code = 1
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""


def training() -> dict[str, Any]:
    args = ["--data", str(DATA), "--out", OUT, "--epochs", str(EPOCHS), "--batch-size", "64"]
    container = {
        "name": "pytorch",
        "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        "command": ["python", "-c", WRAPPER, *args],
        "env": [
            {"name": "GATE", "value": "{{ params.gate }}"},
            {"name": "HOLD_AT", "value": "{{ params.hold_at }}"},
            {"name": "BUG_AT", "value": "{{ params.bug_at }}"},
        ],
        "resources": {"requests": {"cpu": CPU, "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    }
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"labels": {SCENARIO: "{{ params.scenario }}"}},
        "spec": {
            "scheduler": {"t9kScheduler": {"queue": "default", "priority": PRIORITY}},
            "runPolicy": {"backoffLimit": 0, "cleanUpPolicy": "Unfinished"},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 2,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container], "terminationGracePeriodSeconds": 5}},
                }
            ],
        },
    }


PARAMS = {
    "scenario": Param("undisturbed", type="string"),
    "gate": Param("", type="string"),
    "hold_at": Param(0, type="integer"),
    "bug_at": Param(0, type="integer"),
}
MODES = {"": {"deferrable": False}, "_deferrable": {"deferrable": True, "wait_before_defer": 0}}

for suffix, mode in MODES.items():
    with DAG(
        f"it_disrupted{suffix}",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        params=PARAMS,
    ):
        PyTorchTrainingJobOperator(
            task_id="train",
            namespace="default",
            manifest=training(),
            log_replicas="worker",
            checkpoint_volume={"hostPath": {"path": str(CHECKPOINTS), "type": "DirectoryOrCreate"}},
            poll_interval=1,
            retries=3,
            retry_delay=timedelta(seconds=1),
            **mode,
        )
