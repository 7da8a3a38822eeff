"""How a replica pod built by ``fakes.pod`` ran: its containers' states, as a kubelet reports them."""

from __future__ import annotations

from typing import Any


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


def with_gpus(pod: dict[str, Any], gpus: int) -> dict[str, Any]:
    """The first container is limited to ``gpus`` GPUs (none: no limit)."""
    if gpus:
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return pod
