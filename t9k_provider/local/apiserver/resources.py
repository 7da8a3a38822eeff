"""What the server serves: built-in resources and those CRDs add; they drive routing and discovery."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
CRD_GROUP = "apiextensions.k8s.io"


@dataclass
class Resource:
    """One served resource in one group/version.

    ``stored_as`` names the store's (group, resource) when it differs: events.k8s.io events share the core
    events' storage. Custom resources keep one storage key for all their versions.
    """

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    subresources: tuple[str, ...] = ()
    status_split: bool = False  # the main endpoint keeps old status; /status only changes status
    return_deleted_object: bool = False
    unconditional_update: bool = True
    create_on_update: bool = False
    tracks_generation: bool = False
    review: bool = False  # create-only and never stored: answered from the request (access reviews)
    custom: bool = False
    schema: dict[str, Any] | None = None
    printer_columns: list[dict[str, Any]] = field(default_factory=list)
    scale: dict[str, Any] | None = None
    stored_as: tuple[str, str] | None = None

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


def _core(plural: str, singular: str, kind: str, namespaced: bool = True, **kw: Any) -> Resource:
    return Resource("", "v1", plural, singular, kind, namespaced, **kw)


BUILTIN: list[Resource] = [
    _core(
        "namespaces",
        "namespace",
        "Namespace",
        False,
        short_names=["ns"],
        subresources=("status", "finalize"),
        status_split=True,
    ),
    _core("nodes", "node", "Node", False, short_names=["no"], subresources=("status",), status_split=True),
    _core(
        "pods",
        "pod",
        "Pod",
        short_names=["po"],
        categories=["all"],
        subresources=("status", "log", "binding", "exec", "attach"),
        status_split=True,
        return_deleted_object=True,
    ),
    _core(
        "services",
        "service",
        "Service",
        short_names=["svc"],
        categories=["all"],
        subresources=("status",),
        status_split=True,
        return_deleted_object=True,
    ),
    _core("endpoints", "endpoints", "Endpoints", short_names=["ep"]),
    _core("configmaps", "configmap", "ConfigMap", short_names=["cm"]),
    _core("secrets", "secret", "Secret"),
    _core("serviceaccounts", "serviceaccount", "ServiceAccount", short_names=["sa"]),
    _core("events", "event", "Event", short_names=["ev"]),
    _core("podtemplates", "podtemplate", "PodTemplate"),
    Resource(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        True,
        short_names=["ev"],
        stored_as=("", "events"),
    ),
    Resource(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        True,
        categories=["all"],
        subresources=("status",),
        status_split=True,
        tracks_generation=True,
    ),
    Resource(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        False,
        review=True,
    ),
    Resource(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        True,
        unconditional_update=False,
        create_on_update=True,
    ),
    Resource(
        CRD_GROUP,
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        short_names=["crd", "crds"],
        categories=["api-extensions"],
        subresources=("status",),
        status_split=True,
        return_deleted_object=True,
        tracks_generation=True,
    ),
]

# Verbs per subresource, as the real server lists them in discovery.
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "log": ["get"],
    "exec": ["create", "get"],
    "attach": ["create", "get"],
    "binding": ["create"],
    "finalize": ["update"],
}

# Discovery lists these groups first, in this order (as a real server does); others follow sorted.
GROUP_ORDER = [
    "",
    "apiextensions.k8s.io",
    "authorization.k8s.io",
    "batch",
    "coordination.k8s.io",
    "events.k8s.io",
]


def resources_from_crd(crd: dict[str, Any]) -> list[Resource]:
    """The resources an Established CRD serves, one per served version, named by ``status.acceptedNames``."""
    spec = crd.get("spec") or {}
    names = (crd.get("status") or {}).get("acceptedNames") or spec.get("names") or {}
    group = spec["group"]
    plural = names["plural"]
    served = []
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        sub = version.get("subresources") or {}
        subresources = tuple(s for s in ("status", "scale") if s in sub)
        served.append(
            Resource(
                group,
                version["name"],
                plural,
                names.get("singular") or names["kind"].lower(),
                names["kind"],
                spec.get("scope", "Namespaced") == "Namespaced",
                short_names=list(names.get("shortNames") or ()),
                categories=list(names.get("categories") or ()),
                subresources=subresources,
                status_split="status" in sub,
                tracks_generation=True,
                custom=True,
                schema=(version.get("schema") or {}).get("openAPIV3Schema"),
                printer_columns=list(version.get("additionalPrinterColumns") or ()),
                scale=sub.get("scale"),
            )
        )
    return served


class Registry:
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
            if r.custom and crd_name in self._custom and r in self._custom[crd_name]:
                continue
            if r.plural == plural:
                return f'"{plural}" is already in use'
            if r.kind == kind:
                return f'"{kind}" is already in use'
        return None
