"""Probes of pods through the generated client, for tests' waits (``wait_for``): each returns None (or a
falsy value) until what it looks for is there, and never trips on a status the kubelet has not written yet."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client


def pod_names(core: client.CoreV1Api, ns: str, label_selector: str = "") -> list[str]:
    """The names of the namespace's pods (those ``label_selector`` selects)."""
    return [p.metadata.name for p in core.list_namespaced_pod(ns, label_selector=label_selector).items]


def phase_is(core: client.CoreV1Api, name: str, ns: str, *phases: str) -> Callable[[], Any]:
    """A probe: the pod once its phase is one of ``phases``."""

    def probe() -> Any:
        pod = core.read_namespaced_pod(name, ns)
        return pod if pod.status.phase in phases else None

    return probe


def container_state(core: client.CoreV1Api, name: str, ns: str) -> client.V1ContainerState | None:
    """The state of the pod's first container, None until the kubelet wrote its status."""
    statuses = core.read_namespaced_pod(name, ns).status.container_statuses or []
    return statuses[0].state if statuses else None


def waiting_state(core: client.CoreV1Api, name: str, ns: str) -> client.V1ContainerStateWaiting | None:
    """The first container's waiting state, None while it has no status or does not wait."""
    state = container_state(core, name, ns)
    return state.waiting if state else None


def terminated(core: client.CoreV1Api, name: str, ns: str) -> client.V1ContainerStateTerminated | None:
    """The first container's terminated state, None while it has no status or has not ended."""
    state = container_state(core, name, ns)
    return state.terminated if state else None


def pod_log(core: client.CoreV1Api, name: str, ns: str, **params: Any) -> str:
    """Raw log text (the generated client mangles `str` responses into a bytes repr, so read it raw)."""
    return core.read_namespaced_pod_log(name, ns, _preload_content=False, **params).data.decode()
