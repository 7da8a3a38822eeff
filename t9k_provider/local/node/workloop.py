"""The loop the queue-driven node agents share (scheduler, Job controller, simulated kubelet, flink-operator).

Level-triggered like a controller-runtime reconciler: the queue holds keys, never events, and a sync reads
the object's current state from an informer. A failed sync is retried with per-key exponential backoff
(`WorkQueue.add_rate_limited`), and one object's failure never stops the agent for the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from t9k_provider.kube.api import ApiError
from t9k_provider.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)


async def run(queue: WorkQueue[Key], sync: Callable[[Key], Awaitable[None]], what: str) -> None:
    """Sync keys until the queue shuts down; `what` names the objects in log messages."""
    while (key := await queue.get()) is not None:
        try:
            await sync(key)
        except (ApiError, OSError, asyncio.TimeoutError) as exc:
            log.warning("%s %s/%s: sync failed: %s", what, *key, exc)
            queue.add_rate_limited(key)
        except Exception:
            log.exception("%s %s/%s: sync failed", what, *key)
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
        finally:
            queue.done(key)
