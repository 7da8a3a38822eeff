"""The resources the server serves: the built-in ones, one line each, and those Established CRDs add."""

from __future__ import annotations

from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.strategies import (
    accessreviews,
    apiservices,
    apps,
    configdata,
    crds,
    endpoints,
    events,
    jobs,
    leases,
    namespaces,
    nodes,
    poddisruptionbudgets,
    pods,
    podtemplates,
    priorityclasses,
    rbac,
    replicationcontrollers,
    serviceaccounts,
    services,
)

#: Every built-in resource, in discovery order; adding one is a strategy module and a line here.
BUILTIN: list[Resource] = [
    namespaces.RESOURCE,
    nodes.RESOURCE,
    pods.RESOURCE,
    services.RESOURCE,
    endpoints.RESOURCE,
    configdata.CONFIGMAPS,
    configdata.SECRETS,
    serviceaccounts.RESOURCE,
    events.CORE,
    podtemplates.RESOURCE,
    replicationcontrollers.RESOURCE,
    apps.DEPLOYMENTS,
    apps.REPLICASETS,
    apps.STATEFULSETS,
    apps.DAEMONSETS,
    events.V1,
    jobs.RESOURCE,
    poddisruptionbudgets.RESOURCE,
    accessreviews.SELF_SUBJECT_REVIEWS,
    accessreviews.SELF_SUBJECT_ACCESS_REVIEWS,
    accessreviews.SUBJECT_ACCESS_REVIEWS,
    accessreviews.SELF_SUBJECT_RULES_REVIEWS,
    rbac.ROLES,
    rbac.CLUSTER_ROLES,
    rbac.ROLE_BINDINGS,
    rbac.CLUSTER_ROLE_BINDINGS,
    leases.RESOURCE,
    priorityclasses.RESOURCE,
    crds.RESOURCE,
    apiservices.RESOURCE,
]


class ServedResources:
    """Resources by (group, version, plural) plus kind lookup; custom resources come and go with CRDs."""

    def __init__(self) -> None:
        self._builtin = {(r.group, r.version, r.plural): r for r in BUILTIN}
        self._custom: dict[str, list[Resource]] = {}  # CRD name -> resources

    def all(self) -> list[Resource]:
        return [*self._builtin.values(), *(r for rs in self._custom.values() for r in rs)]

    def lookup(self, group: str, version: str, plural: str) -> Resource | None:
        key = (group, version, plural)
        if key in self._builtin:
            return self._builtin[key]
        for resources in self._custom.values():
            for r in resources:
                if (r.group, r.version, r.plural) == key:
                    return r
        return None

    def storage_versions(self, group: str, plural: str) -> list[Resource]:
        """Every served version of one stored resource (used to find a custom resource's CRD)."""
        return [r for r in self.all() if r.storage_group == group and r.storage_resource == plural]

    def group_versions(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in self.all():
            versions = out.setdefault(r.group, [])
            if r.version not in versions:
                versions.append(r.version)
        return out

    def in_version(self, group: str, version: str) -> list[Resource]:
        return [r for r in self.all() if r.group == group and r.version == version]

    def namespaced_storage(self) -> list[tuple[str, str]]:
        """Distinct storage keys of namespaced resources (for namespace deletion)."""
        seen: dict[tuple[str, str], None] = {}
        for r in self.all():
            if r.namespaced:
                seen.setdefault((r.storage_group, r.storage_resource), None)
        return list(seen)

    def set_crd(self, name: str, resources: list[Resource]) -> None:
        self._custom[name] = resources

    def drop_crd(self, name: str) -> None:
        self._custom.pop(name, None)

    def crd_names(self) -> list[str]:
        return list(self._custom)

    def conflicts(self, crd_name: str, group: str, plural: str, kind: str) -> str | None:
        """Why these names clash with a resource already served in the group, or None."""
        for r in self.all():
            if r.group != group:
                continue
            if r in self._custom.get(crd_name, ()):
                continue
            if r.plural == plural:
                return f'"{plural}" is already in use'
            if r.kind == kind:
                return f'"{kind}" is already in use'
        return None
