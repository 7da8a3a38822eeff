"""Operators and jobs for the Airflow tests: job phases, an operator bound to a fake hook, the job a task
instance owns, and a job whose replica sleeps until it is stopped."""

from __future__ import annotations

from typing import Any

from t9k_provider.jobclient import identity as ident
from t9k_provider.operators import T9kJobOperator
from tests.airflow.fakes import FakeHook, FakeTI, generic_manifest, with_status

SUCCEEDED = ("Succeeded", (("Completed", "Succeeded", "The job has finished successfully."),))
RUNNING = ("Running", (("Running", "", "All pods are running normally."),))
PENDING = ("Pending", ())
FAILED = ("Failed", (("Failed", "Failed", "The job is failed with rule: { worker: [1] }"),))


def make(hook: FakeHook, cls: type[T9kJobOperator] = T9kJobOperator, **kwargs: Any) -> T9kJobOperator:
    kwargs.setdefault("manifest", generic_manifest())
    kwargs.setdefault("poll_interval", 0.01)
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("wait_before_defer", 0)  # deferrable tests defer at once unless they test that wait
    op = cls(task_id="train", **kwargs)
    op.__dict__["hook"] = hook
    return op


def our_job(ti: FakeTI, phase: tuple, *, checked: bool = False, namespace: str = "conn-ns") -> dict[str, Any]:
    identity = ident.task_identity(ti)
    job = generic_manifest(ident.job_name(identity), namespace=namespace)
    job["metadata"]["annotations"] = ident.annotations(identity, 1)
    if checked:
        job["metadata"]["annotations"][ident.CHECKED] = "true"
    return with_status(job, phase[0], *phase[1])


SLEEPER = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "spec": {
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "main", "image": "python:3.11"}]}},
            }
        ]
    },
}
