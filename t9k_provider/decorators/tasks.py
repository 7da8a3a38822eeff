"""The ``@task.t9k*`` decorators the provider registers (``task-decorators`` in its provider info).

``from airflow.sdk import task`` (Airflow 3) or ``from airflow.decorators import task`` (Airflow 2.11), then
``@task.t9k_pytorch(workers=2)`` on a module-level function: each call in a DAG is a task that runs the
function on every replica of a PyTorchTrainingJob and returns rank 0's return value as its XCom.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.providers.common.compat.sdk import TaskDecorator, task_decorator_factory

from t9k_provider.decorators.operator import decorated_operator
from t9k_provider.decorators.source import check


def _decorator(name: str, doc: str) -> Callable[..., TaskDecorator]:
    def decorator(
        python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
    ) -> Any:
        operator_class = decorated_operator(name)
        # Checked here, when the DAG file is parsed: a mapped task's operator is built only when it runs.
        operator_class.check_options(kwargs)

        def decorate(function: Callable[..., Any]) -> TaskDecorator:
            check(function)
            return task_decorator_factory(
                python_callable=function,
                multiple_outputs=multiple_outputs,
                decorated_operator_class=operator_class,
                **kwargs,
            )

        return decorate if python_callable is None else decorate(python_callable)

    decorator.__name__ = decorator.__qualname__ = f"{name}_task"
    decorator.__doc__ = doc + "\n\nOptions: see ``T9kDecoratedOperator``."
    return decorator


t9k_task = _decorator(
    "t9k",
    "``@task.t9k``: the function runs in a GenericJob (once; ``replicas=N`` runs it N times, RANK 0..N-1).",
)
t9k_pytorch_task = _decorator(
    "t9k_pytorch",
    "``@task.t9k_pytorch(workers=N)``: the function runs on every replica of a PyTorchTrainingJob with "
    "RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set, so ``init_process_group()`` works as is; "
    "``nproc_per_node=K`` starts K processes per replica through torchrun.",
)
t9k_tensorflow_task = _decorator(
    "t9k_tensorflow",
    "``@task.t9k_tensorflow(workers=N)``: the function runs on every worker of a TensorFlowTrainingJob, with "
    "TF_CONFIG set; worker 0 is rank 0.",
)
t9k_xgboost_task = _decorator(
    "t9k_xgboost",
    "``@task.t9k_xgboost(workers=N)``: the function runs on the master and N workers of an "
    "XGBoostTrainingJob (RANK 0 is the master; MASTER_ADDR, MASTER_PORT, WORLD_SIZE set).",
)
t9k_deepspeed_task = _decorator(
    "t9k_deepspeed",
    "``@task.t9k_deepspeed(workers=N, slots_per_worker=K)``: DeepSpeed's launcher runs the function in K "
    "processes on each of the N workers of a DeepSpeedJob (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_* set).",
)
