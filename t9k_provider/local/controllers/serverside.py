"""What the API server's own controllers share: they run in the server's process, on its store, and write
through the same pipeline as clients (finalizers, watch events and validation apply to their writes too)."""

from __future__ import annotations

import logging
from collections.abc import Callable
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
        again); other refusals are logged."""
        try:
            return action(*args)
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                log.warning("%s: %s", what, exc.message)
            return None

    def delete(self, what: str, res: Resource, namespace: str, name: str, **options: Any) -> None:
        self.attempt(what, self.objects.delete, res, namespace, name, DeleteOptions(**options))


class ServerController(Protocol):
    """One server-side controller: a pass brings what it owns in line with the store."""

    def sync(self) -> None:
        """One pass; it may raise, and the next pass tries again."""
        ...
