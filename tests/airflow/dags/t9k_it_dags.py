"""DAGs for the provider's integration tests (``test_integration.py``); pods run as local processes."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG, AirflowException

from t9k_provider.operators import (
    BeamJobOperator,
    ColossalAIJobOperator,
    GenericJobOperator,
    MPIJobOperator,
    PyTorchTrainingJobOperator,
    T9kJobOperator,
    TensorFlowTrainingJobOperator,
    XGBoostTrainingJobOperator,
)
from t9k_provider.sensors import T9kJobSensor

PY = sys.executable
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def container(name: str, code: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "python:3.11", "command": [PY, "-u", "-c", code], **extra}


def replica(
    kind_type: str, cname: str, code: str, replicas: int = 1, policy: Any = "Never", **extra: Any
) -> dict[str, Any]:
    return {
        "type": kind_type,
        "replicas": replicas,
        "restartPolicy": policy,
        "template": {"spec": {"containers": [container(cname, code, **extra)]}},
    }


HELLO = "import os; print('hello-from', os.environ.get('RANK', os.environ.get('HOSTNAME', '?')), flush=True)"

GENERIC = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {"replicaSpecs": [replica("worker", "main", HELLO, replicas=2, policy={"policy": "Never"})]},
}
PYTORCH = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "PyTorchTrainingJob",
    "spec": {"replicaSpecs": [replica("master", "pytorch", HELLO), replica("worker", "pytorch", HELLO)]},
}
TENSORFLOW = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "TensorFlowTrainingJob",
    "spec": {"replicaSpecs": [replica("chief", "tensorflow", HELLO), replica("worker", "tensorflow", HELLO)]},
}
XGBOOST = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "XGBoostTrainingJob",
    "spec": {"replicaSpecs": [replica("master", "xgboost", HELLO), replica("worker", "xgboost", HELLO)]},
}
FAILING = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "replicaSpecs": [
            replica(
                "worker",
                "main",
                "import sys; print('cannot open dataset shard-7: permission denied'); sys.exit(3)",
                policy={"policy": "Never"},
            )
        ]
    },
}
OOM = {  # past its memory limit: OOMKilled (137), which restartPolicy ExitCode retries up to backoffLimit
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "PyTorchTrainingJob",
    "spec": {
        "runPolicy": {"backoffLimit": 1},
        "replicaSpecs": [
            replica(
                "master",
                "pytorch",
                "b = bytearray(200 * 1024 * 1024)",
                policy="ExitCode",
                resources={"limits": {"memory": "64Mi"}},
            )
        ],
    },
}
UNPLACEABLE = {  # asks for a GPU on a node that has none: the scheduler can never place it
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "replicaSpecs": [
            replica(
                "worker",
                "main",
                "print('never runs')",
                policy={"policy": "Never"},
                resources={"limits": {"nvidia.com/gpu": "1"}},
            )
        ]
    },
}
SLOW = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "replicaSpecs": [
            replica(
                "worker",
                "main",
                "import time; print('slow start', flush=True); time.sleep(6); print('slow done')",
                policy={"policy": "Never"},
            )
        ]
    },
}

# SSH kinds: workers run a stand-in sshd, launchers find stand-in mpirun/colossalai first on PATH.
FAKEBIN = Path(__file__).resolve().parent / "fakebin"
FAKE_PATH = os.pathsep.join([str(FAKEBIN), os.path.dirname(PY), "/usr/local/bin", "/usr/bin", "/bin"])


def ssh_container(name: str) -> dict[str, Any]:
    return {"name": name, "image": "t9k/ssh-runtime", "env": [{"name": "PATH", "value": FAKE_PATH}]}


MPI = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "MPIJob",
    "spec": {
        "ssh": {"sshdPath": str(FAKEBIN / "sshd")},
        "mpiConfig": {"script": ["python", "train.py", "--epochs", "1"]},
        "runPolicy": {"cleanUpWorkers": True},
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 2,
                "template": {"spec": {"containers": [ssh_container("worker")]}},
            },
            {"type": "launcher", "replicas": 1, "template": {}},
        ],
    },
}
COLOSSALAI = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "ColossalAIJob",
    "spec": {
        "ssh": {"sshdPath": str(FAKEBIN / "sshd")},
        "torchConfig": {"procPerWorker": 1, "script": ["train.py", "--dummy_data=True"]},
        "replicaSpecs": [
            {"type": "launcher", "template": {"spec": {"containers": [ssh_container("launcher")]}}},
            {
                "type": "worker",
                "replicas": 2,
                "template": {"spec": {"containers": [ssh_container("worker")]}},
            },
        ],
    },
}
BEAM = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "BeamJob",
    "spec": {
        "flinkClusterTemplate": {
            "spec": {"flinkVersion": "1.17", "image": {"name": "flink:1.17"}, "taskManager": {"replicas": 1}}
        },
        "jobTemplate": {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            container(
                                "submit", "import os; print('beam pipeline for', os.environ['FLINK_MASTER'])"
                            )
                        ],
                    }
                },
            }
        },
    },
}

SLEEPER = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "replicaSpecs": [
            replica("worker", "main", "import time; time.sleep(300)", policy={"policy": "Never"})
        ]
    },
}

TICKER = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "replicaSpecs": [
            replica(
                "worker",
                "main",
                "import time\nfor i in range(8):\n    print(f'tick {i}', flush=True)\n    time.sleep(1)",
                policy={"policy": "Never"},
            )
        ]
    },
}

COMMON: dict[str, Any] = {
    "poll_interval": 1.0,
    "startup_timeout": 180,
    "execution_timeout": timedelta(minutes=4),
}


class LoseWorkerAfterSubmit(GenericJobOperator):
    """Simulates a worker lost right after submitting: the first try ends while its job keeps running."""

    def execute(self, context: Any) -> Any:
        self.first_try = context["ti"].try_number == 1
        return super().execute(context)

    def _wait_in_worker(self, *args: Any, **kwargs: Any) -> Any:
        if self.first_try:
            raise AirflowException("simulated worker loss after submission")
        return super()._wait_in_worker(*args, **kwargs)


class LoseResultAfterSuccess(GenericJobOperator):
    """Simulates Airflow losing a reported success (apache/airflow#72716: a stale executor event fails the
    try resumed from deferral): the first try concludes, then fails on the Airflow side."""

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        result = super().execute_complete(context, event)
        if context["ti"].try_number == 1:
            raise AirflowException("simulated: Airflow lost the result of try 1")
        return result


def named(name: str, manifest: dict[str, Any]) -> dict[str, Any]:
    return {**manifest, "metadata": {"name": name}}


def single_task_dag(dag_id: str, factory: Any) -> DAG:
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, tags=["t9k-it"]) as dag:
        factory()
    return dag


def in_both_modes(dag_id: str, operator: Any, deferring: dict[str, Any]) -> None:
    """``dag_id``, whose task waits in the worker, and ``<dag_id>_deferrable``, whose task defers
    (``deferring``: its other options): ``operator(**mode)`` builds the task."""
    for suffix, mode in (("", {"deferrable": False}), ("_deferrable", {"deferrable": True, **deferring})):
        single_task_dag(dag_id + suffix, lambda mode=mode: operator(**mode))


single_task_dag(
    "it_generic", lambda: GenericJobOperator(task_id="job", manifest=GENERIC, deferrable=False, **COMMON)
)
single_task_dag(
    "it_generic_deferrable",
    lambda: GenericJobOperator(
        task_id="job", manifest=GENERIC, deferrable=True, wait_before_defer=0, **COMMON
    ),
)
single_task_dag(
    "it_link_deferrable",
    lambda: GenericJobOperator(
        task_id="job",
        manifest=GENERIC,
        deferrable=True,
        wait_before_defer=0,
        job_url_template="https://t9k.example/{namespace}/{kind}/{name}?uid={uid}",
        **COMMON,
    ),
)
single_task_dag(
    "it_pytorch",
    lambda: PyTorchTrainingJobOperator(task_id="job", manifest=PYTORCH, deferrable=True, **COMMON),
)
single_task_dag(
    "it_tensorflow",
    lambda: TensorFlowTrainingJobOperator(task_id="job", manifest=TENSORFLOW, deferrable=False, **COMMON),
)
single_task_dag(
    "it_xgboost",
    lambda: XGBoostTrainingJobOperator(task_id="job", manifest=XGBOOST, deferrable=True, **COMMON),
)
single_task_dag("it_failing", lambda: T9kJobOperator(task_id="job", manifest=FAILING, **COMMON))
single_task_dag(
    "it_failing_deferrable",
    lambda: T9kJobOperator(task_id="job", manifest=FAILING, deferrable=True, wait_before_defer=0, **COMMON),
)
single_task_dag("it_oom", lambda: T9kJobOperator(task_id="job", manifest=OOM, deferrable=True, **COMMON))
in_both_modes(
    "it_unplaceable",
    lambda **mode: T9kJobOperator(task_id="job", manifest=UNPLACEABLE, pod_error_timeout=2, **COMMON, **mode),
    {"wait_before_defer": 0},
)
single_task_dag(
    "it_adopt",
    lambda: LoseWorkerAfterSubmit(
        task_id="job",
        manifest=named("adopted", SLOW),
        retries=1,
        retry_delay=timedelta(seconds=0),
        deferrable=False,
        **COMMON,
    ),
)
single_task_dag("it_mpi", lambda: MPIJobOperator(task_id="job", manifest=MPI, deferrable=False, **COMMON))
single_task_dag(
    "it_colossalai",
    lambda: ColossalAIJobOperator(task_id="job", manifest=COLOSSALAI, deferrable=True, **COMMON),
)
single_task_dag("it_beam", lambda: BeamJobOperator(task_id="job", manifest=BEAM, deferrable=True, **COMMON))


with DAG("it_sensor", schedule=None, start_date=START, catchup=False, tags=["t9k-it"]):
    submitted = GenericJobOperator(task_id="submit", manifest=SLOW, wait_for_completion=False, **COMMON)
    job_name = "{{ ti.xcom_pull(task_ids='submit', key='t9k_job')['name'] }}"
    deferred = T9kJobSensor(
        task_id="wait_deferred", kind="GenericJob", name=job_name, deferrable=True, poke_interval=1
    )
    poked = T9kJobSensor(task_id="wait_poke", kind="GenericJob", name=job_name, poke_interval=1, timeout=120)
    submitted >> deferred >> poked

single_task_dag(
    "it_timeout_deferrable",
    lambda: GenericJobOperator(
        task_id="job",
        manifest=SLEEPER,
        deferrable=True,
        wait_before_defer=0,
        poll_interval=1.0,
        execution_timeout=timedelta(seconds=8),
    ),
)

single_task_dag(
    "it_logging_interval",
    lambda: GenericJobOperator(
        task_id="job", manifest=TICKER, deferrable=True, wait_before_defer=0, logging_interval=2, **COMMON
    ),
)

single_task_dag(
    "it_no_deferral",  # a short job ends within the default wait before deferring
    lambda: GenericJobOperator(task_id="job", manifest=GENERIC, deferrable=True, **COMMON),
)
single_task_dag(  # the worker's wait follows a watch: a 60 s poll interval does not delay the end
    "it_watched",
    lambda: GenericJobOperator(
        task_id="job", manifest=GENERIC, deferrable=False, startup_timeout=180, poll_interval=60
    ),
)
single_task_dag(
    "it_lost_result",
    lambda: LoseResultAfterSuccess(
        task_id="job",
        manifest=GENERIC,
        deferrable=True,
        wait_before_defer=0,
        retries=1,
        retry_delay=timedelta(seconds=0),
        **COMMON,
    ),
)

with DAG("it_mapped_names", schedule=None, start_date=START, catchup=False, tags=["t9k-it"]):
    GenericJobOperator.partial(task_id="job", deferrable=False, **COMMON).expand(
        manifest=[named("sweep", GENERIC) for _ in range(3)]
    )

with DAG("it_named_daily", schedule="@daily", start_date=START, catchup=False, tags=["t9k-it"]):
    GenericJobOperator(task_id="job", manifest=named("nightly", GENERIC), deferrable=False, **COMMON)

#: Two workers print a numbered line every 0.2 s for 6 s and a last line right before they exit;
#: ``cleanUpPolicy: All`` deletes their pods, logs included, as soon as the job has succeeded.
CHATTY_CLEANED = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "cleanUpPolicy": "All",
        "successRules": [{"worker": [0, 1]}],
        "replicaSpecs": [
            replica(
                "worker",
                "main",
                "import os, time\nrank = os.environ.get('HOSTNAME', '?')[-1]\n"
                "for i in range(30):\n    print(f'rank {rank} line {i} at {time.time():.3f}', flush=True)\n"
                "    time.sleep(0.2)\n"
                "print(f'rank {rank} last at {time.time():.3f}', flush=True)",
                replicas=2,
                policy={"policy": "Never"},
            )
        ],
    },
}
in_both_modes(
    "it_live_logs",
    lambda **mode: GenericJobOperator(
        task_id="job",
        manifest=CHATTY_CLEANED,
        log_replicas="worker",
        **{**COMMON, "poll_interval": 3.0},
        **mode,
    ),
    {"wait_before_defer": 1.5},
)

#: Rank 1 fails at once with a distinctive error, rank 0 two seconds after it with a connection error (as a
#: collective whose peer died). ``failureRules`` fail the job only once both have, so both are reported.
#: Rank 0 waits for a file rank 1 creates as it fails (pods are host processes): however late rank 1's pod
#: starts, it fails first. The file is named after the job and the cluster's API port.
RANK_1_FAILS_FIRST = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "failureRules": [{"worker": [0, 1]}],
        "replicaSpecs": [
            replica(
                "worker",
                "main",
                "import os, sys, tempfile, time\njob, _, rank = os.environ['HOSTNAME'].rsplit('-', 2)\n"
                "port = os.environ['KUBERNETES_SERVICE_PORT']\n"
                "failed = os.path.join(tempfile.gettempdir(), f't9k-it-{job}-{port}-rank-1-failed')\n"
                "if rank == '1':\n"
                "    print('rank 1: ValueError: shard 7 of the dataset holds no samples', flush=True)\n"
                "    open(failed, 'w').close()\n"
                "    sys.exit(3)\n"
                "deadline = time.time() + 60\n"
                "while not os.path.exists(failed) and time.time() < deadline:\n"
                "    time.sleep(0.1)\n"
                "os.remove(failed)\n"
                "time.sleep(2)\n"
                "print('rank 0: RuntimeError: connection reset by peer', flush=True)\n"
                "sys.exit(1)",
                replicas=2,
                policy={"policy": "Never"},
            )
        ],
    },
}
in_both_modes(
    "it_first_failure",
    lambda **mode: GenericJobOperator(task_id="job", manifest=RANK_1_FAILS_FIRST, **COMMON, **mode),
    {"wait_before_defer": 0},
)
