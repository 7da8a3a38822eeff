"""The loop the queue-driven node agents share (scheduler, workload controllers, simulated kubelet,
flink-operator), and the shape of a workload controller.

Level-triggered like a controller-runtime reconciler: the queue holds keys, never events, and a sync reads
the object's current state from an informer. A failed sync, whatever it raised, is logged with the object's
key and retried with per-key exponential backoff (`WorkQueue.add_rate_limited`), and one object's failure
never stops the agent for the others. `supervise` keeps each of the agents' long-running loops going: one
that fails (or ends) is logged by name and started again with backoff, instead of ending the others.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import Informer, controller_ref, object_key
from t9k_provider.kube.resources import ResourceType
from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.machinery.statuswrites import patch_status

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)

#: A supervised loop that failed is started again after this long, doubling up to RESTART_MAX_DELAY; the
#: delay starts over once the loop has run that long.
RESTART_BASE_DELAY = 0.5
RESTART_MAX_DELAY = 30.0


async def run(queue: WorkQueue[Key], sync: Callable[[Key], Awaitable[None]], what: str) -> None:
    """Sync keys until the queue shuts down; `what` names the objects in log messages."""
    while (key := await queue.get()) is not None:
        try:
            await sync(key)
        except (ApiError, OSError, asyncio.TimeoutError) as exc:
            delay = queue.add_rate_limited(key)
            log.warning("%s %s/%s: sync failed, retrying in %.2fs: %s", what, *key, delay, exc)
        except Exception:
            delay = queue.add_rate_limited(key)
            log.exception("%s %s/%s: sync failed, retrying in %.2fs", what, *key, delay)
        else:
            queue.forget(key)
        finally:
            queue.done(key)


async def supervise(name: str, start: Callable[[], Awaitable[None]], *, ends: bool = False) -> None:
    """Run ``start()`` until cancelled; a failure is logged with ``name`` and ``start()`` is called again
    after a backoff. A return is a failure too (an agent's loop must not stop), unless ``ends``: then it is
    the loop's own end (a pod worker whose pod is gone)."""
    loop = asyncio.get_running_loop()
    delay = RESTART_BASE_DELAY
    while True:
        began = loop.time()
        error: Exception | None = None
        try:
            await start()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
        else:
            if ends:
                return
        if loop.time() - began >= RESTART_MAX_DELAY:
            delay = RESTART_BASE_DELAY
        pause = delay * (0.5 + random.random())
        how = "failed" if error is not None else "stopped"
        log.error("%s %s; starting it again in %.1fs", name, how, pause, exc_info=error)
        await asyncio.sleep(pause)
        delay = min(delay * 2, RESTART_MAX_DELAY)


class OwnerController:
    """A controller of one owner ``resource`` (Jobs, ReplicaSets, ...) that also follows the objects it
    controls: a change of an owner, or of a child whose controller reference names one, queues that owner; a
    sync sees an owner that is not being deleted. Subclasses implement ``sync``."""

    #: the owners' type; its kind is what children's controller references name
    resource: ResourceType

    def __init__(self, kube: KubeApi, owners: Informer, children: Informer) -> None:
        self.kube = kube
        self.owners = owners
        self.children = children
        self.queue: WorkQueue[Key] = WorkQueue()

    def on_owner(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self.queue.add(object_key(new or old or {}))

    def on_child(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for child in (old, new):
            ref = controller_ref(child) if child is not None else None
            if ref is not None and ref.get("kind") == self.resource.kind:
                self.queue.add((object_key(child)[0], ref["name"]))

    async def run(self) -> None:
        await self.owners.synced.wait()
        await self.children.synced.wait()
        await run(self.queue, self._sync_key, self.resource.kind.lower())

    async def _sync_key(self, key: Key) -> None:
        owner = self.owners.get(*key)
        if owner is not None and not owner["metadata"].get("deletionTimestamp"):
            await self.sync(owner)

    async def sync(self, owner: dict[str, Any]) -> None:
        raise NotImplementedError

    async def write_status(self, owner: dict[str, Any], status: dict[str, Any]) -> None:
        """Merge-patch ``owner``'s status unless nothing changes (a None value removes a field); the result
        goes straight into the owner informer, so the next sync starts from it."""
        if {k: v for k, v in status.items() if v is not None} == (owner.get("status") or {}):
            return
        await patch_status(self.kube, self.resource, owner, status, self.owners)
