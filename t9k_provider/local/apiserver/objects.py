"""The write pipeline shared by HTTP handlers and in-server controllers: create, update, patch, delete.

Order per write (spec section 4): decode, admission (namespace lifecycle, generateName, preconditions),
defaulting, status split, validation (built-in rules or the CRD schema), pruning, then one store commit.
Nothing reaches the store before every check passed, so a rejected write never leaves a half-written object.
"""

from __future__ import annotations

import copy
import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import yaml

from t9k_provider.local.apiserver import errors, kinds
from t9k_provider.local.apiserver.fielderrors import Cause
from t9k_provider.local.apiserver.patch import PatchError, apply_patch, merge_patch, strategic_merge_patch
from t9k_provider.local.apiserver.resources import Registry, Resource
from t9k_provider.local.apiserver.schema import apply_defaults, prune
from t9k_provider.local.apiserver.schema import validate as validate_schema
from t9k_provider.local.apiserver.selectors import SelectorError, parse_field_selector, parse_label_selector
from t9k_provider.local.apiserver.validation import invalid_message, validate_create, validate_update
from t9k_provider.local.store import Compacted, Conflict, Key, Store

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SYSTEM_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"


@dataclass
class DeleteOptions:
    grace_period: int | None = None
    propagation: str | None = None
    orphan_dependents: bool | None = None
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False


@dataclass
class DeleteResult:
    body: dict[str, Any]
    code: int


def store_key(res: Resource, namespace: str, name: str) -> Key:
    return (res.storage_group, res.storage_resource, namespace if res.namespaced else "", name)


def deep_copy(obj: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(obj))


def _cause_dicts(causes: list[Any]) -> list[dict[str, str]]:
    return [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes]


def _strip_system(obj: dict[str, Any], *, include_status: bool) -> dict[str, Any]:
    """The part of an object whose change bumps ``generation``."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status" if include_status else "")}


class Objects:
    """Typed access to stored objects with the real API server's semantics."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry

    # -- views ---------------------------------------------------------------------------------------------

    def view(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as served through ``res`` (requested apiVersion, events.k8s.io field names)."""
        if res.group == "events.k8s.io":
            return kinds.event_to_v1(obj)
        if res.custom and obj.get("apiVersion") != res.group_version:
            return {**obj, "apiVersion": res.group_version}
        return obj

    def text(self, res: Resource, obj: dict[str, Any]) -> str:
        """``view(res, obj)`` as JSON: the committed text when the view is the stored object itself."""
        view = self.view(res, obj)
        text = self._stored_text(res, obj) if view is obj else None
        return text if text is not None else json.dumps(view, separators=(",", ":"))

    def copy(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """A private copy of ``obj``, decoded from its committed text when it is the stored object."""
        text = self._stored_text(res, obj)
        return json.loads(text) if text is not None else deep_copy(obj)

    def _stored_text(self, res: Resource, obj: dict[str, Any]) -> str | None:
        meta = obj["metadata"]
        return self.store.text(store_key(res, meta.get("namespace", ""), meta["name"]), obj)

    def get(self, res: Resource, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(store_key(res, namespace, name))
        if obj is None:
            raise errors.not_found(res.plural, res.group, name)
        return obj

    def list(
        self,
        res: Resource,
        namespace: str | None,
        label_selector: str = "",
        field_selector: str = "",
        revision: int | None = None,
    ) -> list[dict[str, Any]]:
        """Matching objects now, or as they were at ``revision`` (410 Expired once compacted away)."""
        match = self.matcher(res, label_selector, field_selector)
        scope = namespace if res.namespaced else None
        if revision is None:
            items = self.store.list(res.storage_group, res.storage_resource, scope)
        else:
            try:
                items = self.store.list_at(res.storage_group, res.storage_resource, scope, revision)
            except Compacted as exc:
                raise errors.expired(str(exc)) from None
        return [o for o in items if match(o)]

    def matcher(self, res: Resource, label_selector: str, field_selector: str) -> Any:
        try:
            labels = parse_label_selector(label_selector) if label_selector else None
            fields = parse_field_selector(field_selector, res.kind) if field_selector else None
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc

        def match(obj: dict[str, Any] | None) -> bool:
            if obj is None:
                return False
            if labels is not None and not labels.matches(obj["metadata"].get("labels")):
                return False
            return fields is None or fields.matches(obj)

        return match

    # -- create --------------------------------------------------------------------------------------------

    def decode(self, res: Resource, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request(f"Object 'Kind' is missing in '{json.dumps(body)[:200]}'")
        kind = body.get("kind")
        if kind and kind != res.kind:
            raise errors.bad_request(
                f'{kind} in version "{res.version}" cannot be handled as a {res.kind}: '
                f"the kind in the request ({kind}) does not match the expected kind ({res.kind})"
            )
        if body.get("metadata") is None:
            body["metadata"] = {}
        if not isinstance(body["metadata"], dict):
            raise errors.bad_request(
                f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: '
                "json: cannot unmarshal into Go struct field .metadata of type v1.ObjectMeta"
            )
        if res.group == "events.k8s.io":
            causes = kinds.events_v1_causes(body)
            if causes:
                raise self._invalid(
                    res, body["metadata"].get("name", ""), [Cause(r, m, f) for r, f, m in causes]
                )
            body = kinds.event_from_v1(body)
        body["apiVersion"] = res.group_version if res.group != "events.k8s.io" else "v1"
        body["kind"] = res.kind
        return body

    def create(
        self, res: Resource, namespace: str, body: Any, *, dry_run: bool = False, strict: bool = False
    ) -> dict[str, Any]:
        obj = self.decode(res, body)
        if strict:
            self._check_declared(res, obj)
        meta = obj["metadata"]
        self._check_namespace(res, namespace, meta)
        if meta.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        for field in _SYSTEM_META:
            meta.pop(field, None)
        self._admit_namespace(res, namespace)
        generated = not meta.get("name") and bool(meta.get("generateName"))
        for _ in range(8):
            if generated:
                meta["name"] = str(meta["generateName"])[:58] + "".join(
                    secrets.choice(_NAME_CHARS) for _ in range(5)
                )
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = kinds.now_time()
            prepared = self._prepare_create(res, deep_copy(obj))
            if dry_run:
                return prepared
            try:
                return self.store.create(res.storage_group, res.storage_resource, prepared)
            except Conflict:
                if not generated:
                    raise errors.already_exists(res.plural, res.group, meta.get("name", "")) from None
        exhausted = errors.already_exists(res.plural, res.group, meta.get("name", ""))
        assert exhausted.details is not None
        exhausted.details["retryAfterSeconds"] = 1  # generateName kept colliding: the client may retry
        raise exhausted

    def _prepare_create(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        if res.tracks_generation:
            meta["generation"] = 1
        plural = res.storage_resource if not res.custom else ""
        if plural == "pods":
            kinds.prepare_pod(obj)
        elif plural == "services":
            kinds.prepare_service(obj, self._used_cluster_ips())
        elif plural == "namespaces":
            kinds.prepare_namespace(obj)
        elif plural == "jobs" and res.group == "batch":
            kinds.prepare_job(obj)
        elif plural == "customresourcedefinitions":
            obj["status"] = {
                "conditions": [],
                "acceptedNames": {"plural": "", "kind": ""},
                "storedVersions": [],
            }
        if res.custom:
            if res.status_split:
                obj.pop("status", None)
            obj = self._prune_and_default(res, obj)
        kinds.normalize_timestamps(res.storage_resource, obj)
        self._validate(res, obj, None)
        return obj

    def _used_cluster_ips(self) -> set[str]:
        return {(s.get("spec") or {}).get("clusterIP", "") for s in self.store.list("", "services")}

    # -- update and patch ----------------------------------------------------------------------------------

    def update(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = False,
    ) -> dict[str, Any]:
        obj = self.decode(res, body)
        if strict:
            self._check_declared(res, obj)
        meta = obj["metadata"]
        self._check_namespace(res, namespace, meta)
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        current = self.store.get(store_key(res, namespace, name))
        if current is None:
            if res.create_on_update and not subresource:
                meta.pop("resourceVersion", None)
                return self.create(res, namespace, obj, dry_run=dry_run, strict=strict)
            raise errors.not_found(res.plural, res.group, name)
        rv = meta.get("resourceVersion")
        if rv:
            if rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(res.plural, res.group, name)
        elif not res.unconditional_update:
            raise self._invalid(
                res,
                name,
                [
                    Cause(
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                        "metadata.resourceVersion",
                    )
                ],
            )
        return self._write_update(res, current, obj, subresource=subresource, dry_run=dry_run)

    def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: bytes,
        content_type: str,
        *,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = False,
    ) -> dict[str, Any]:
        current = self.get(res, namespace, name)
        base = self.view(res, current)
        base = self.copy(res, current) if base is current else deep_copy(base)
        try:
            patched = apply_patch(base, body, content_type, kind=res.kind, custom=res.custom)
        except PatchError as exc:
            raise errors.ApiError(exc.code, exc.reason, exc.message) from exc
        return self._write_patched(res, namespace, name, current, patched, subresource, dry_run, strict)

    def apply(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: bytes,
        *,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """Server-side apply, approximated: create when missing, else merge the applied configuration in
        (strategic merge for built-in kinds, merge patch for custom resources). There is no field ownership:
        fields a manager stops applying are kept, and conflicts are never reported. Returns (object, created).
        """
        try:
            applied = yaml.load(body, Loader=_YAML_LOADER)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from None
        if not isinstance(applied, dict):
            raise errors.bad_request("the applied configuration must be an object")
        meta = applied.setdefault("metadata", {})
        if not isinstance(meta, dict) or meta.get("name", name) != name:
            raise errors.bad_request(
                "the name of the applied configuration does not match the name on the URL"
            )
        meta["name"] = name
        current = self.store.get(store_key(res, namespace, name))
        if current is None:
            if subresource:
                raise errors.not_found(res.plural, res.group, name)
            return self.create(res, namespace, applied, dry_run=dry_run, strict=strict), True
        base = self.view(res, current)
        base = self.copy(res, current) if base is current else deep_copy(base)
        try:
            merged = (
                merge_patch(base, applied) if res.custom else strategic_merge_patch(base, applied, res.kind)
            )
        except PatchError as exc:
            raise errors.ApiError(exc.code, exc.reason, exc.message) from exc
        return self._write_patched(res, namespace, name, current, merged, subresource, dry_run, strict), False

    def _write_patched(
        self,
        res: Resource,
        namespace: str,
        name: str,
        current: dict[str, Any],
        patched: Any,
        subresource: str,
        dry_run: bool,
        strict: bool,
    ) -> dict[str, Any]:
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patch result is not an object")
        rv = patched["metadata"].get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(res.plural, res.group, name)
        patched["metadata"]["name"] = name
        if res.namespaced:
            patched["metadata"]["namespace"] = namespace
        obj = self.decode(res, patched)
        if strict:
            self._check_declared(res, obj)
        return self._write_update(res, current, obj, subresource=subresource, dry_run=dry_run)

    def write_status(self, res: Resource, current: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """Server-internal status write (controllers), bypassing the HTTP layer."""
        new = self.copy(res, current)
        new["status"] = status
        return self._write_update(res, current, new, subresource="status")

    def write(self, res: Resource, current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Server-internal update of the main resource."""
        return self._write_update(res, current, new)

    def _write_update(
        self,
        res: Resource,
        current: dict[str, Any],
        obj: dict[str, Any],
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> dict[str, Any]:
        old = current
        new = deep_copy(obj)
        meta, old_meta = new["metadata"], old["metadata"]
        for field in _SYSTEM_META:
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if subresource == "status":
            new = self._status_only(res, old, new)
            meta = new["metadata"]
        elif res.status_split:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        if old_meta.get("deletionTimestamp"):
            new_finalizers = meta.get("finalizers") if isinstance(meta.get("finalizers"), list) else []
            added = [f for f in new_finalizers if f not in (old_meta.get("finalizers") or ())]
            if added:
                raise self._invalid(
                    res,
                    meta["name"],
                    [
                        Cause(
                            "FieldValueForbidden",
                            "Forbidden: no new finalizers can be added if the object is being "
                            "deleted, found new finalizers []string{"
                            + ", ".join(json.dumps(f) for f in added)
                            + "}",
                            "metadata.finalizers",
                        )
                    ],
                )
        if res.custom:
            new = self._prune_and_default(res, new)
            meta = new["metadata"]
        kinds.normalize_timestamps(res.storage_resource, new)
        if res.tracks_generation and _strip_system(new, include_status=res.status_split) != _strip_system(
            old, include_status=res.status_split
        ):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        self._validate(res, new, old)
        if new == old:
            return old
        if dry_run:
            return new
        if self._finished_deleting(res, new):
            return self.store.delete(store_key(res, meta.get("namespace", ""), meta["name"]))
        return self.store.update(res.storage_group, res.storage_resource, new)

    def _status_only(self, res: Resource, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        if res.custom:
            result = self.copy(res, old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            return result
        if "spec" in old:
            new["spec"] = copy.deepcopy(old["spec"])
        else:
            new.pop("spec", None)
        # as podStatusStrategy: old kubelets corrupted ownerReferences through /status, so they are kept
        meta, old_meta = new["metadata"], old["metadata"]
        if "ownerReferences" in old_meta:
            meta["ownerReferences"] = copy.deepcopy(old_meta["ownerReferences"])
        else:
            meta.pop("ownerReferences", None)
        return new

    def _finished_deleting(self, res: Resource, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        if res.storage_resource == "namespaces" and not res.custom:
            return not (obj.get("spec") or {}).get("finalizers")
        if res.storage_resource == "pods" and not res.custom:
            return not meta.get("deletionGracePeriodSeconds")
        return True

    # -- delete --------------------------------------------------------------------------------------------

    def delete(self, res: Resource, namespace: str, name: str, opts: DeleteOptions) -> DeleteResult:
        current = self.get(res, namespace, name)
        meta = current["metadata"]
        if opts.uid and opts.uid != meta.get("uid"):
            raise errors.conflict(
                res.plural,
                res.group,
                name,
                f"Precondition failed: UID in precondition: {opts.uid}, "
                f"UID in object meta: {meta.get('uid')}",
            )
        if opts.resource_version and opts.resource_version != meta["resourceVersion"]:
            raise errors.conflict(
                res.plural,
                res.group,
                name,
                f"Precondition failed: ResourceVersion in precondition: {opts.resource_version}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )
        policy = opts.propagation or ("Orphan" if opts.orphan_dependents else "Background")
        if policy not in ("Background", "Foreground", "Orphan"):
            raise self._invalid(
                res,
                name,
                [
                    Cause(
                        "FieldValueNotSupported",
                        f'Unsupported value: "{policy}": supported values: '
                        '"Foreground", "Background", "Orphan"',
                        "propagationPolicy",
                    )
                ],
            )
        new = self.copy(res, current)
        new_meta = new["metadata"]
        finalizers = list(new_meta.get("finalizers") or ())
        if not meta.get("deletionTimestamp"):
            if policy == "Foreground" and FOREGROUND not in finalizers:
                finalizers.append(FOREGROUND)
            elif policy == "Orphan" and ORPHAN not in finalizers:
                finalizers.append(ORPHAN)
        builtin = not res.custom
        if builtin and res.storage_resource == "namespaces":
            if not meta.get("deletionTimestamp"):
                new_meta["deletionTimestamp"] = kinds.now_time()
                new_meta["deletionGracePeriodSeconds"] = 0
                new.setdefault("status", {})["phase"] = "Terminating"
            return self._pending(res, new, current, opts)
        if (
            builtin
            and res.storage_resource == "customresourcedefinitions"
            and CRD_CLEANUP not in finalizers
            and not meta.get("deletionTimestamp")
        ):
            finalizers.append(CRD_CLEANUP)
            conditions = [
                c for c in (new.get("status") or {}).get("conditions") or () if c.get("type") != "Terminating"
            ]
            conditions.append(
                {
                    "type": "Terminating",
                    "status": "True",
                    "reason": "InstanceDeletionPending",
                    "message": "CustomResourceDefinition marked for deletion; "
                    "CustomResource deletion will begin soon",
                    "lastTransitionTime": kinds.now_time(),
                }
            )
            new.setdefault("status", {})["conditions"] = conditions
        grace = self._pod_grace(current, opts) if builtin and res.storage_resource == "pods" else 0
        if meta.get("deletionTimestamp"):
            old_grace = meta.get("deletionGracePeriodSeconds") or 0
            if grace < old_grace:
                new_meta["deletionGracePeriodSeconds"] = grace
                new_meta["deletionTimestamp"] = _after(grace)
                if grace == 0 and not finalizers:
                    return self._remove(res, current, opts)
                return self._pending(res, new, current, opts)
            return DeleteResult(self.view(res, current), 200)
        if finalizers or grace > 0:
            new_meta["finalizers"] = finalizers
            new_meta["deletionTimestamp"] = _after(grace)
            new_meta["deletionGracePeriodSeconds"] = grace
            if res.tracks_generation:
                new_meta["generation"] = int(meta.get("generation") or 0) + 1
            return self._pending(res, new, current, opts)
        return self._remove(res, current, opts)

    def _pending(
        self, res: Resource, new: dict[str, Any], current: dict[str, Any], opts: DeleteOptions
    ) -> DeleteResult:
        code = 202 if opts.orphan_dependents is False else 200
        if new == current or opts.dry_run:
            return DeleteResult(self.view(res, new), code)
        stored = self.store.update(res.storage_group, res.storage_resource, new)
        return DeleteResult(self.view(res, stored), code)

    def _remove(self, res: Resource, current: dict[str, Any], opts: DeleteOptions) -> DeleteResult:
        meta = current["metadata"]
        if opts.dry_run:
            deleted = current
        else:
            deleted = self.store.delete(store_key(res, meta.get("namespace", ""), meta["name"]))
        if res.return_deleted_object:
            return DeleteResult(self.view(res, deleted), 200)
        details: dict[str, Any] = {"name": meta["name"]}
        if res.group:
            details["group"] = res.group
        details["kind"] = res.plural
        details["uid"] = meta.get("uid", "")
        return DeleteResult(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details},
            200,
        )

    @staticmethod
    def _pod_grace(pod: dict[str, Any], opts: DeleteOptions) -> int:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        grace = (
            opts.grace_period
            if opts.grace_period is not None
            else spec.get("terminationGracePeriodSeconds", 30)
        )
        return max(int(grace or 0), 0)

    # -- shared checks -------------------------------------------------------------------------------------

    def _check_namespace(self, res: Resource, namespace: str, meta: dict[str, Any]) -> None:
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)

    def _admit_namespace(self, res: Resource, namespace: str) -> None:
        if not res.namespaced:
            return
        ns = self.store.get(("", "namespaces", "", namespace))
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                f'{res.plural} "" is forbidden: unable to create new content in namespace {namespace} '
                "because it is being terminated",
                namespace,
                res.plural,
                res.group,
            )

    def _check_declared(self, res: Resource, obj: dict[str, Any]) -> None:
        """``fieldValidation=Strict``: fields the CRD schema would prune are a 400 instead of a silent drop.

        Built-in kinds have no schema here, so they are not checked (documented difference).
        """
        if not (res.custom and res.schema):
            return
        unknown = _dropped_fields(obj, prune(res.schema, obj), "")
        if unknown:
            raise errors.bad_request(
                "strict decoding error: " + ", ".join(f'unknown field "{f}"' for f in unknown)
            )

    def _prune_and_default(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        if not res.schema:
            return obj
        obj = apply_defaults(res.schema, prune(res.schema, obj))
        obj["apiVersion"], obj["kind"] = res.group_version, res.kind
        return obj

    def _validate(self, res: Resource, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = new["metadata"].get("name", "")
        if not name:
            raise self._invalid(
                res,
                "",
                [
                    Cause(
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                        "metadata.name",
                    )
                ],
            )
        resource = res.storage_resource if not res.custom else "customresources"
        causes = validate_create(resource, new) if old is None else validate_update(resource, old, new)
        if res.custom and res.schema:
            causes = [*causes, *validate_schema(res.schema, new)]
        if causes:
            raise self._invalid(res, name, causes)

    def _invalid(self, res: Resource, name: str, causes: list[Any]) -> errors.ApiError:
        message = invalid_message(res.kind, res.group, name, causes)
        return errors.invalid(res.kind, res.group, name, _cause_dicts(causes), message)


def _after(seconds: int) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dropped_fields(before: Any, after: Any, path: str) -> list[str]:
    """Paths present (and not null) in ``before`` but missing from its pruned form ``after``."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key, value in before.items():
            child = f"{path}.{key}" if path else key
            if key not in after:
                if value is not None:
                    out.append(child)
            else:
                out += _dropped_fields(value, after[key], child)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            f
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            for f in _dropped_fields(b, a, f"{path}[{i}]")
        ]
    return []
