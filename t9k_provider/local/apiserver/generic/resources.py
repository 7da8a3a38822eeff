"""What a served resource is: its names in one group/version (`Resource`) and the strategy that governs it
(`Strategy`), the hooks it has in the generic write pipeline, after Kubernetes' registry strategies.

``objects.py`` runs the same steps for every resource (decode, admission, preconditions, status reset,
canonical form, validation, one store commit) and asks the resource's strategy only what differs. The
defaults are those of an object with no behaviour of its own (a ConfigMap): a strategy overrides the rest.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from t9k_provider.kube.timestamps import normalize_fields
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.jsonvalues import get_path
from t9k_provider.local.machinery.names import NameCheck, name_is_dns_subdomain
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age
from t9k_provider.local.machinery.selectors import FieldGetter
from t9k_provider.local.machinery.strategicpatch import MergeField
from t9k_provider.local.storage.store import Store

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_OBJECT_TIMES = ("metadata.creationTimestamp", "metadata.deletionTimestamp")


class Strategy:
    """One resource's behaviour: its scope, served subresources and the registry hooks
    (``RESTCreateStrategy``, ``RESTUpdateStrategy``, ``RESTDeleteStrategy``, ``TableConvertor``, selectable
    fields).

    Class attributes declare the facts; methods are the hooks. Built-in resources use one instance each;
    custom resources get one per served CRD version (``custom.CustomResourceStrategy``).
    """

    #: objects live in a namespace (else cluster-scoped)
    namespaced: bool = True
    #: served subresources; with "status", the main resource keeps the stored status on update
    subresources: tuple[str, ...] = ()
    #: the verbs discovery lists for the main resource
    verbs: tuple[str, ...] = ALL_VERBS
    #: CRD-backed: unstructured objects, so list items keep ``kind`` and ``apiVersion``
    custom: bool = False
    #: ``metadata.generation`` starts at 1 and counts changes of everything but metadata (and split status)
    tracks_generation: bool = False
    #: a PUT of a missing object creates it
    allow_create_on_update: bool = False
    #: a PUT without ``metadata.resourceVersion`` is accepted (else 422)
    allow_unconditional_update: bool = True
    #: DELETE answers with the deleted object rather than a Status
    return_deleted_object: bool = False
    #: the rule ``metadata.name`` and ``generateName`` follow
    name_check: NameCheck = staticmethod(name_is_dns_subdomain)
    #: dotted paths of ``metav1.Time`` / ``MicroTime`` fields besides the metadata's
    times: tuple[str, ...] = ()
    micro_times: tuple[str, ...] = ()
    #: strategic merge patch fields of the kind besides metadata (``patchMergeKey`` tags); None: strategic
    #: merge is not accepted (custom resources)
    merge_fields: dict[str, MergeField] | None = {}
    #: field selector fields besides ``metadata.name`` and ``metadata.namespace``
    field_selectors: dict[str, FieldGetter] = {}
    #: Table column definitions; ``cells`` gives a row in the same order
    columns: list[dict[str, Any]] = [NAME_COLUMN, AGE_COLUMN]
    #: the scale subresource's replica paths (``specReplicasPath``, ``statusReplicasPath``,
    #: ``labelSelectorPath``), for a resource serving "scale"
    scale: dict[str, str] | None = None

    @property
    def status_subresource(self) -> bool:
        return "status" in self.subresources

    # -- versions ------------------------------------------------------------------------------------------

    def to_version(self, obj: dict[str, Any], res: Resource) -> dict[str, Any]:
        """The stored object as served through ``res`` (return ``obj`` itself when nothing differs)."""
        return obj

    def from_version(self, body: dict[str, Any], res: Resource) -> dict[str, Any]:
        """A decoded request body in the stored version."""
        body["apiVersion"] = res.group_version
        return body

    # -- create and update ---------------------------------------------------------------------------------

    def prepare_for_create(self, obj: dict[str, Any], store: Store) -> None:
        """Defaults and server-set fields of a new object (``PrepareForCreate``)."""

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        """An update of the main resource keeps the stored status when status is a subresource."""
        if not self.status_subresource:
            return
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)

    def prepare_for_status_update(self, new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        """An update through /status keeps the stored spec; and, as ``podStatusStrategy`` does for all
        built-ins here, the stored ownerReferences (old kubelets corrupted them through /status)."""
        if "spec" in old:
            new["spec"] = copy.deepcopy(old["spec"])
        else:
            new.pop("spec", None)
        meta, old_meta = new["metadata"], old["metadata"]
        if "ownerReferences" in old_meta:
            meta["ownerReferences"] = copy.deepcopy(old_meta["ownerReferences"])
        else:
            meta.pop("ownerReferences", None)
        return new

    def canonicalize(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored form of a prepared object (``Canonicalize``): timestamps as the server writes them."""
        normalize_fields(obj, (*_OBJECT_TIMES, *self.times), self.micro_times)
        return obj

    def unknown_fields(self, obj: dict[str, Any]) -> list[str]:
        """Fields ``fieldValidation=Strict`` rejects: none for built-in kinds, which have no schema here."""
        return []

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        """The kind's rules for a new object (metadata rules are the pipeline's, for every resource)."""

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        """The kind's rules for replacing ``old`` by ``new`` (immutable fields), after ``validate(new)``."""

    # -- delete --------------------------------------------------------------------------------------------

    def grace_period(self, obj: dict[str, Any], requested: int | None) -> int:
        """Seconds a deleted object lingers before it goes (``CheckGracefulDelete``): none by default."""
        return 0

    def prepare_for_delete(self, obj: dict[str, Any], finalizers: list[str]) -> None:
        """What a first DELETE changes besides the deletion timestamp; may add to ``finalizers``."""

    def deletion_pending(self, obj: dict[str, Any]) -> bool:
        """Whether a deleted object without metadata finalizers still waits: by default for the end of its
        grace period (a pod until its kubelet confirms with a zero grace delete)."""
        return bool(obj["metadata"].get("deletionGracePeriodSeconds"))

    # -- reading -------------------------------------------------------------------------------------------

    def scale_selector(self, obj: dict[str, Any]) -> str | None:
        """The label selector a Scale's status shows (the string at ``labelSelectorPath``)."""
        path = (self.scale or {}).get("labelSelectorPath")
        return get_path(obj, path) if path else None

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        """One Table row, in the order of ``columns``."""
        meta = obj["metadata"]
        return [meta["name"], age(meta.get("creationTimestamp"))]


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
