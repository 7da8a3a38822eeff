"""The job over a ``KubeApi``, async: read it, list its pods and what the largest node gives (for a wait's
``feed``), and stop it (the trigger's kill path).

It holds no connection of its own: its user gives it the API of the client lease it holds (leases are
shared by every wait on the event loop), so the kill path, which must build nothing, only needs a lease
taken earlier. Stopping follows the same ``stopping`` policy as the worker's kill path.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from t9k_provider.jobclient.stopping import STOP_ATTEMPTS, Stopped, preconditions, stop_action
from t9k_provider.kube.resources import NODES, PODS, ResourceType
from t9k_provider.waiting.placement import NODES_TTL_SECONDS, largest_allocatable

if TYPE_CHECKING:
    from t9k_provider.kube.api import KubeApi


class AsyncJobClient:
    def __init__(self, api: KubeApi, rt: ResourceType, namespace: str, name: str) -> None:
        self.api = api
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self._largest: tuple[float, dict[str, int] | None] | None = None

    async def read(self) -> dict[str, Any]:
        """The job; raises kube's ``ApiError`` (the trigger tells 404, 401 and transient failures apart)."""
        return await self.api.get(self.rt, self.namespace, self.name)

    async def pods(self, selector: str | None, log: logging.Logger | Any) -> list[dict[str, Any]]:
        """The job's pods for the wait's checks; none without a selector, and a failed read only skips this
        look."""
        if not selector:
            return []
        try:
            pods, _ = await self.api.list(PODS, self.namespace, label_selector=selector)
            return pods
        except Exception as exc:
            log.debug("cannot list pods of job %s: %s", self.name, exc)
            return []

    async def largest_node(self, log: logging.Logger | Any) -> dict[str, int] | None:
        """The most of each extended resource one node can give (``waiting.placement``), read at most once a
        minute; None when the connection may not list nodes (the wait then leaves that check out)."""
        if self._largest is None or time.monotonic() - self._largest[0] > NODES_TTL_SECONDS:
            try:
                nodes, _ = await self.api.list(NODES, None)
                largest: dict[str, int] | None = largest_allocatable(nodes)
            except Exception as exc:
                log.debug("cannot list nodes (no check of what they can give): %s", exc)
                largest = None
            self._largest = (time.monotonic(), largest)
        return self._largest[1]

    async def cordoned_nodes(self, log: logging.Logger | Any) -> set[str]:
        """The nodes marked unschedulable now (a drain cordons its node before it evicts); none when the
        connection may not list nodes."""
        try:
            nodes, _ = await self.api.list(NODES, None)
        except Exception as exc:
            log.debug("cannot list nodes (a drain is told as an eviction): %s", exc)
            return set()
        return {n["metadata"]["name"] for n in nodes if (n.get("spec") or {}).get("unschedulable")}

    async def stop(self, uid: str | None, identity: dict[str, str] | None = None) -> Stopped:
        """Stop the job per ``stopping``; raises what the API raises (the kill path reports it)."""
        for _ in range(STOP_ATTEMPTS):
            try:
                job: dict[str, Any] | None = await self.read()
            except Exception as exc:  # kube's ApiError, told by its flags
                if not getattr(exc, "not_found", False):
                    raise
                job = None
            action = stop_action(job, uid, identity)
            if action != "delete":
                return action
            seen_uid, version = preconditions(job or {})
            try:
                await self.api.delete(
                    self.rt, self.namespace, self.name, uid=seen_uid, resource_version=version,
                    propagation="Foreground",
                )  # fmt: skip
            except Exception as exc:
                if getattr(exc, "not_found", False):
                    return "gone"
                if not getattr(exc, "conflict", False):
                    raise
                continue  # it changed since the read: decide again on a fresh one
            return "deleted"
        return "changing"
