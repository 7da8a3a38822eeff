"""What the server serves: one resource in one group/version, named, and the strategy that governs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from t9k_provider.local.apiserver.strategies.base import Strategy


@dataclass
class Resource:
    """One served resource in one group/version; its behaviour, scope and subresources are its ``strategy``'s.

    ``stored_as`` names the store's (group, resource) when it differs: events.k8s.io events share the core
    events' storage. Custom resources keep one storage key for all their versions.
    """

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    strategy: Strategy
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    stored_as: tuple[str, str] | None = None

    @classmethod
    def builtin(cls, group: str, kind: str, strategy: Strategy, **names: Any) -> Resource:
        """A built-in resource of ``group``/v1, named after its kind (ReplicaSet: replicaset, replicasets)."""
        singular = kind.lower()
        return cls(group, "v1", f"{singular}s", singular, kind, strategy, **names)

    @property
    def namespaced(self) -> bool:
        return self.strategy.namespaced

    @property
    def subresources(self) -> tuple[str, ...]:
        return self.strategy.subresources

    @property
    def storage_group(self) -> str:
        return self.stored_as[0] if self.stored_as else self.group

    @property
    def storage_resource(self) -> str:
        return self.stored_as[1] if self.stored_as else self.plural

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"
