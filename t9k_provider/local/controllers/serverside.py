"""What the API server's own controllers share: they run in the server's process, on its store, and write
through the same pipeline as clients (finalizers, watch events and validation apply to their writes too).

A pass handles each object on its own (`Retries.run`): an object whose step raises is logged with its key and
left out of the passes until its backoff has passed, and the pass goes on with the others."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.objects import DeleteOptions, Objects
from t9k_provider.local.apiserver.served import ServedResources

log = logging.getLogger(__name__)


class ServerSide:
    """What the server-side controllers write through, and the failures they take in their stride."""

    def __init__(self, objects: Objects, registry: ServedResources) -> None:
        self.objects = objects
        self.registry = registry
        self.store = objects.store

    def resource(self, group: str, resource: str) -> Resource | None:
        """The served resource that stores ``group``/``resource`` (None once its CRD is gone)."""
        served = self.registry.storage_versions(group, resource)
        return served[0] if served else None

    def attempt(self, what: str, action: Callable[..., Any], *args: Any) -> Any:
        """``action(*args)``, or None when the object has gone or changed meanwhile (the next pass sees it
        again). Any other refusal raises, naming ``what``: the step's `Retries` logs it with the object's key
        and backs off, where a refusal tried again on every pass would be a hot loop."""
        try:
            return action(*args)
        except errors.ApiError as exc:
            if exc.code in (404, 409):
                return None
            raise RuntimeError(f"{what}: {exc.code} {exc.message}") from exc

    def delete(self, what: str, res: Resource, namespace: str, name: str, **options: Any) -> None:
        self.attempt(what, self.objects.delete, res, namespace, name, DeleteOptions(**options))


class ServerController(Protocol):
    """One server-side controller: a pass brings what it owns in line with the store."""

    def sync(self) -> None:
        """One pass; it may raise, and the next pass tries again."""
        ...

    def due_in(self) -> float | None:
        """Seconds until a pass is due though nothing changed (a backoff ending, a budget's recheck); None
        when only a change makes one due."""
        ...


#: An object whose step failed is tried again after this long, doubling up to RETRY_MAX_DELAY.
RETRY_BASE_DELAY = 0.5
RETRY_MAX_DELAY = 60.0


class Retries:
    """Per-object failure isolation and backoff for a controller's passes (the pass-based counterpart of
    `WorkQueue.add_rate_limited`): ``run(key, step)`` runs ``step`` unless the key is backing off."""

    def __init__(self, controller: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.controller = controller
        self._clock = clock
        self._failures: dict[Hashable, tuple[int, float]] = {}  # key -> (failures, not before)

    def run(self, key: Hashable, step: Callable[[], Any]) -> bool:
        """Whether ``step`` ran and succeeded: False when it raised (logged with the key; tried again after
        the backoff) or the key is still backing off. The next pass calls ``run`` again for what is due."""
        failures, not_before = self._failures.get(key, (0, 0.0))
        now = self._clock()
        if now < not_before:
            return False
        try:
            step()
        except Exception:
            delay = min(RETRY_BASE_DELAY * 2**failures, RETRY_MAX_DELAY)
            self._failures[key] = (failures + 1, now + delay)
            log.exception("%s %s: failed, retrying in %.1fs", self.controller, _describe(key), delay)
            return False
        self._failures.pop(key, None)
        return True

    def due_in(self) -> float | None:
        """Seconds until the next key backing off may be tried again; None when none is waiting (a key whose
        time has passed was tried by a pass then, or its object has gone)."""
        now = self._clock()
        waiting = [not_before - now for _, not_before in self._failures.values() if not_before > now]
        return min(waiting, default=None)


def _describe(key: Hashable) -> str:
    """A store key ``(group, resource, namespace, name)`` as ``resource namespace/name``, others as is."""
    if isinstance(key, tuple) and len(key) == 4:
        _group, resource, namespace, name = key
        return f"{resource} {namespace}/{name}" if namespace else f"{resource} {name}"
    return str(key)
