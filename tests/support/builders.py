"""Builders for the objects tests create or read: containers, pod templates, pods and T9k Jobs, and the
jobs and replica pods the provider's tests read back as an API server would answer (their status set).

Each takes what a test varies and fills in the rest, so a test reads as what it is about::

    make_pod("late", make_container(py="import time; time.sleep(60)"), activeDeadlineSeconds=2)
    make_job("GenericJob", "gj", {"replicaSpecs": [{"type": "worker", "template": make_template()}]})
    terminated(replica_pod("j-worker-1", "worker", 1, "j"), started=0, finished=3, exit_code=1)

The local cluster ignores images (it runs the host's programs), so the image is whatever a reader expects.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from t9k_provider.jobclient import identity as ident
from t9k_provider.jobs import API_VERSION
from t9k_provider.kube.resources import GPU

#: The interpreter the tests run on: containers that run Python run it too (its packages, torch included).
PY = sys.executable


def make_container(
    name: str = "main",
    *,
    py: str | None = None,
    sh: str | None = None,
    command: list[str] | None = None,
    image: str = "python:3.11",
    **fields: Any,
) -> dict[str, Any]:
    """A container that runs ``py`` with this interpreter (``-c``), ``sh`` with ``sh -c``, or ``command``;
    with none of them, ``true``. ``fields``: anything else of the container (``env``, ``resources``...)."""
    if py is not None:
        command = [PY, "-c", py]
    elif sh is not None:
        command = ["sh", "-c", sh]
    return {"name": name, "image": image, "command": command or ["true"], **fields}


def make_template(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A pod template of ``containers`` (one that runs ``true`` when none is given) and ``spec`` fields."""
    return {"spec": {"containers": list(containers) or [make_container()], **spec}}


def make_pod(
    name: str,
    *containers: dict[str, Any],
    labels: dict[str, str] | None = None,
    restart_policy: str = "Never",
    **spec: Any,
) -> dict[str, Any]:
    """A Pod of ``containers`` (one that runs ``true`` when none is given), not restarted unless
    ``restart_policy`` says so; ``spec``: any other field of its spec (``initContainers``...)."""
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "restartPolicy": restart_policy,
            "containers": list(containers) or [make_container()],
            **spec,
        },
    }


def make_job(kind: str, name: str, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """A T9k Job of ``kind``; ``metadata``: namespace, labels, uid... as the test needs them."""
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name, **metadata}, "spec": spec}


# -- jobs and replica pods as the provider reads them -------------------------------------------------------

SUCCEEDED = ("Succeeded", (("Completed", "Succeeded", "The job has finished successfully."),))
RUNNING = ("Running", (("Running", "", "All pods are running normally."),))
PENDING = ("Pending", ())
FAILED = ("Failed", (("Failed", "Failed", "The job is failed with rule: { worker: [1] }"),))

#: A GenericJob whose one replica (the host's ``python:3.11``) runs until it is stopped.
SLEEPER = {
    "apiVersion": API_VERSION,
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


def generic_manifest(name: str | None = None, **meta: Any) -> dict[str, Any]:
    """A GenericJob of two ``worker`` replicas; ``meta``: its metadata besides the name."""
    metadata: dict[str, Any] = dict(meta)
    if name:
        metadata["name"] = name
    template = {"spec": {"containers": [{"name": "main", "image": "python:3.11", "command": ["true"]}]}}
    return {
        "apiVersion": API_VERSION,
        "kind": "GenericJob",
        "metadata": metadata,
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": template}]},
    }


def with_status(
    job: dict[str, Any], phase: str, *conditions: tuple[str, str, str], **extra: Any
) -> dict[str, Any]:
    """A copy of ``job`` carrying ``status.phase`` and ``(type, reason, message)`` conditions set True."""
    out = copy.deepcopy(job)
    out["status"] = {
        "phase": phase,
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": r,
                "message": m,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
            for t, r, m in conditions
        ],
        **extra,
    }
    return out


def our_job(ti: Any, phase: tuple, *, checked: bool = False, namespace: str = "conn-ns") -> dict[str, Any]:
    """The job the task instance ``ti`` owns (its name and annotations), in ``phase``; ``checked``: an
    earlier try reported its outcome."""
    identity = ident.task_identity(ti)
    job = generic_manifest(ident.job_name(identity), namespace=namespace)
    job["metadata"]["annotations"] = ident.annotations(identity, 1)
    if checked:
        job["metadata"]["annotations"][ident.CHECKED] = "true"
    return with_status(job, phase[0], *phase[1])


def replica_pod(
    name: str, replica_type: str, index: int, job: str, containers: tuple[str, ...] = ("main",)
) -> dict[str, Any]:
    """A replica pod of the job ``job`` as the API lists it, its containers running."""
    return {
        "metadata": {
            "name": name,
            "uid": f"pod-{name}",
            "labels": {
                "tensorstack.dev/owner-name": job,
                "batch.tensorstack.dev/replica-type": replica_type,
                "batch.tensorstack.dev/replica-index": str(index),
            },
        },
        "spec": {"containers": [{"name": c} for c in containers]},
        "status": {"containerStatuses": [{"name": c, "state": {"running": {}}} for c in containers]},
    }


def stamp(second: int) -> str:
    """A whole-second RFC 3339 time on 2026-01-01 (kubelets write whole seconds)."""
    return f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}Z"


def terminated(
    pod: dict[str, Any],
    started: int,
    finished: int,
    exit_code: int,
    reason: str | None = None,
    gpus: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    """``pod``'s containers ran from second ``started`` to ``finished`` and exited ``exit_code``."""
    state = {
        "exitCode": exit_code,
        "reason": reason or ("Completed" if exit_code == 0 else "Error"),
        "startedAt": stamp(started),
        "finishedAt": stamp(finished),
        **extra,
    }
    pod["status"] = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "containerStatuses": [
            {"name": c["name"], "state": {"terminated": dict(state)}} for c in pod["spec"]["containers"]
        ],
    }
    return with_gpus(pod, gpus)


def running(pod: dict[str, Any], started: str, gpus: int = 0) -> dict[str, Any]:
    """``pod``'s containers run since ``started`` (RFC 3339)."""
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": c["name"], "state": {"running": {"startedAt": started}}}
            for c in pod["spec"]["containers"]
        ],
    }
    return with_gpus(pod, gpus)


def waiting(pod: dict[str, Any], reason: str, message: str = "x") -> dict[str, Any]:
    """``pod``'s containers wait to start for ``reason`` (``ErrImagePull``...); the rest of its status
    stays."""
    pod["status"] = {
        **(pod.get("status") or {}),
        "phase": "Pending",
        "containerStatuses": [
            {"name": c["name"], "state": {"waiting": {"reason": reason, "message": message}}}
            for c in pod["spec"]["containers"]
        ],
    }
    return pod


def unschedulable(pod: dict[str, Any], message: str) -> dict[str, Any]:
    """``pod`` is Pending: the scheduler could not place it and said ``message``; the rest of its status
    stays."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    pod["status"] = {**(pod.get("status") or {}), "phase": "Pending", "conditions": [condition]}
    return pod


def with_gpus(pod: dict[str, Any], gpus: int) -> dict[str, Any]:
    """The first container is limited to ``gpus`` GPUs (none: no limit)."""
    if gpus:
        pod["spec"]["containers"][0]["resources"] = {"limits": {GPU: str(gpus)}}
    return pod
