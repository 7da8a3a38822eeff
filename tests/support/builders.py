"""Builders for the objects tests create: containers, pod templates, pods and T9k Jobs.

Each takes what a test varies and fills in the rest, so a test reads as what it is about::

    make_pod("late", make_container(py="import time; time.sleep(60)"), activeDeadlineSeconds=2)
    make_job("GenericJob", "gj", {"replicaSpecs": [{"type": "worker", "template": make_template()}]})

The local cluster ignores images (it runs the host's programs), so the image is whatever a reader expects.
"""

from __future__ import annotations

import sys
from typing import Any

from t9k_provider.jobs import API_VERSION

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
