"""All informers of one controller, addressed by resource type: jobs by key, children by owner uid."""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.informer import OWNER_INDEX, Informer
from t9k_provider.kube.resources import ResourceType


class Caches:
    def __init__(self, job_types: list[ResourceType], child_types: list[ResourceType]) -> None:
        self.job_types = {rt.kind: rt for rt in job_types}
        self.child_types = list(child_types)
        self._types = {(rt.api_version, rt.kind): rt for rt in [*child_types, *job_types]}
        self._informers: dict[tuple[str, str], list[Informer]] = {}

    def add(self, informer: Informer) -> None:
        self._informers.setdefault((informer.rt.api_version, informer.rt.kind), []).append(informer)

    @property
    def informers(self) -> list[Informer]:
        return [inf for group in self._informers.values() for inf in group]

    def resource_type(self, api_version: str, kind: str) -> ResourceType:
        try:
            return self._types[(api_version, kind)]
        except KeyError:
            raise ValueError(f"the controller does not manage {kind} ({api_version})") from None

    def _informer(self, rt: ResourceType, namespace: str) -> Informer | None:
        for inf in self._informers.get((rt.api_version, rt.kind), []):
            if inf.namespace in (None, namespace):
                return inf
        return None

    def job(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        inf = self._informer(self.job_types[kind], namespace)
        return inf.get(namespace, name) if inf is not None else None

    def children_of(self, namespace: str, uid: str) -> list[dict[str, Any]]:
        children: list[dict[str, Any]] = []
        for rt in self.child_types:
            inf = self._informer(rt, namespace)
            if inf is not None:
                children.extend(inf.by_index(OWNER_INDEX, uid))
        return children

    def observe(self, obj: dict[str, Any]) -> None:
        rt = self.resource_type(obj.get("apiVersion", ""), obj.get("kind", ""))
        inf = self._informer(rt, (obj.get("metadata") or {}).get("namespace") or "")
        if inf is not None:
            inf.observe(obj)

    def observe_deleted(
        self, rt: ResourceType, namespace: str, name: str, resource_version: int | None
    ) -> None:
        inf = self._informer(rt, namespace)
        if inf is not None:
            inf.observe_deleted(namespace, name, resource_version)
