"""The write pipeline shared by HTTP handlers and in-server controllers: create, update, patch, apply, delete.

Every resource takes the same steps: decode, admission (namespace lifecycle, generateName),
preconditions, the strategy's preparation (defaults, status reset), its canonical form, validation (object
metadata, then the strategy's kind rules or CRD schema), then one store commit. What differs per resource is
asked of its strategy (``strategies/``): nothing here names a resource. Nothing reaches the store before
every check passed, so a rejected write never leaves a half-written object.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.generic.validation import invalid, validate_create, validate_update
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.apiserver.strategies import namespaces
from t9k_provider.local.apiserver.wire import load_yaml
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.jsonvalues import json_copy
from t9k_provider.local.machinery.patch import apply_patch, merge_patch
from t9k_provider.local.machinery.patcherrors import PatchError
from t9k_provider.local.machinery.selectors import SelectorError, parse_field_selector, parse_label_selector
from t9k_provider.local.machinery.strategicpatch import strategic_merge_patch
from t9k_provider.local.storage.store import Compacted, Conflict, Key, Store

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
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


@dataclass
class DeleteOptions:
    grace_period: int | None = None
    propagation: str | None = None
    orphan_dependents: bool | None = None
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class WriteOptions:
    """A write request's options: the subresource, ``dryRun=All``, ``fieldValidation=Strict``."""

    subresource: str = ""
    dry_run: bool = False
    strict: bool = False


WRITE = WriteOptions()
STATUS_WRITE = WriteOptions(subresource="status")


@dataclass
class DeleteResult:
    body: dict[str, Any]
    code: int


def store_key(res: Resource, namespace: str, name: str) -> Key:
    return (res.storage_group, res.storage_resource, namespace if res.namespaced else "", name)


def _strip_system(obj: dict[str, Any], *, include_status: bool) -> dict[str, Any]:
    """The part of an object whose change bumps ``generation``."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status" if include_status else "")}


class Objects:
    """Typed access to stored objects with the real API server's semantics."""

    def __init__(self, store: Store, registry: ServedResources) -> None:
        self.store = store
        self.registry = registry

    # -- views ---------------------------------------------------------------------------------------------

    def view(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as served through ``res`` (requested apiVersion, events.k8s.io field names)."""
        return res.strategy.to_version(obj, res)

    def text(self, res: Resource, obj: dict[str, Any]) -> str:
        """``view(res, obj)`` as JSON: the committed text when the view is the stored object itself."""
        view = self.view(res, obj)
        text = self._stored_text(res, obj) if view is obj else None
        return text if text is not None else json.dumps(view, separators=(",", ":"))

    def copy(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """A private copy of ``obj``, decoded from its committed text when it is the stored object."""
        text = self._stored_text(res, obj)
        return json.loads(text) if text is not None else json_copy(obj)

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
            fields = (
                parse_field_selector(field_selector, res.strategy.field_selectors) if field_selector else None
            )
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc

        def match(obj: dict[str, Any] | None) -> bool:
            if obj is None:
                return False
            if labels is not None and not labels.matches(obj["metadata"].get("labels")):
                return False
            return fields is None or fields.matches(obj)

        return match

    # -- decoding ------------------------------------------------------------------------------------------

    def decode(self, res: Resource, body: Any) -> dict[str, Any]:
        """A request body as an object of ``res`` in its stored version (400 when it is not one)."""
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
        body = res.strategy.from_version(body, res)
        body["kind"] = res.kind
        return body

    def _accept(self, res: Resource, namespace: str, body: Any, strict: bool) -> dict[str, Any]:
        """Decode a written object, refuse fields ``fieldValidation=Strict`` forbids, scope it to the URL's
        namespace (cluster-scoped objects have none)."""
        obj = self.decode(res, body)
        if strict:
            unknown = res.strategy.unknown_fields(obj)
            if unknown:
                raise errors.bad_request(
                    "strict decoding error: " + ", ".join(f'unknown field "{f}"' for f in unknown)
                )
        meta = obj["metadata"]
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return obj

    # -- create --------------------------------------------------------------------------------------------

    def create(self, res: Resource, namespace: str, body: Any, opts: WriteOptions = WRITE) -> dict[str, Any]:
        obj = self._accept(res, namespace, body, opts.strict)
        meta = obj["metadata"]
        if _nonzero_version(meta.pop("resourceVersion", None)):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        for field in _SYSTEM_META:
            meta.pop(field, None)
        namespaces.admit(self.store, res, namespace)
        generated = not meta.get("name") and bool(meta.get("generateName"))
        for _ in range(8):
            if generated:
                meta["name"] = str(meta["generateName"])[:58] + "".join(
                    secrets.choice(_NAME_CHARS) for _ in range(5)
                )
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            prepared = self._prepare_create(res, json_copy(obj))
            if opts.dry_run:
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
        strategy = res.strategy
        if strategy.tracks_generation:
            obj["metadata"]["generation"] = 1
        strategy.prepare_for_create(obj, self.store)
        obj = strategy.canonicalize(obj)
        self._validate(res, obj, None)
        return obj

    # -- update, patch and apply ---------------------------------------------------------------------------

    def update(
        self, res: Resource, namespace: str, name: str, body: Any, opts: WriteOptions = WRITE
    ) -> dict[str, Any]:
        obj = self._accept(res, namespace, body, opts.strict)
        meta = obj["metadata"]
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        current = self.store.get(store_key(res, namespace, name))
        if current is None:
            if res.strategy.allow_create_on_update and not opts.subresource:
                meta.pop("resourceVersion", None)
                return self.create(res, namespace, obj, opts)
            raise errors.not_found(res.plural, res.group, name)
        conditional = not res.strategy.allow_unconditional_update
        return self._write(res, current, obj, opts, conditional=conditional)

    def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: bytes,
        content_type: str,
        opts: WriteOptions = WRITE,
    ) -> dict[str, Any]:
        current = self.get(res, namespace, name)
        fields = res.strategy.merge_fields
        return self._write_merged(
            res, namespace, name, current, lambda base: apply_patch(base, body, content_type, fields), opts
        )

    def apply(
        self, res: Resource, namespace: str, name: str, body: bytes, opts: WriteOptions = WRITE
    ) -> tuple[dict[str, Any], bool]:
        """Server-side apply, approximated: create when missing, else merge the applied configuration in
        (strategic merge for built-in kinds, merge patch for custom resources). There is no field ownership:
        fields a manager stops applying are kept, and conflicts are never reported. Returns (object, created).
        """
        try:
            applied = load_yaml(body)
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
            if opts.subresource:
                raise errors.not_found(res.plural, res.group, name)
            return self.create(res, namespace, applied, opts), True
        fields = res.strategy.merge_fields

        def merge(base: dict[str, Any]) -> dict[str, Any]:
            return (
                merge_patch(base, applied) if fields is None else strategic_merge_patch(base, applied, fields)
            )

        return self._write_merged(res, namespace, name, current, merge, opts), False

    def _write_merged(
        self,
        res: Resource,
        namespace: str,
        name: str,
        current: dict[str, Any],
        merge: Callable[[dict[str, Any]], Any],
        opts: WriteOptions,
    ) -> dict[str, Any]:
        """Write ``merge`` applied to a private copy of the object as the client sees it."""
        base = self.view(res, current)
        base = self.copy(res, current) if base is current else json_copy(base)
        try:
            patched = merge(base)
        except PatchError as exc:
            raise errors.ApiError(exc.code, exc.reason, exc.message) from exc
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patch result is not an object")
        patched["metadata"]["name"] = name
        if res.namespaced:
            patched["metadata"]["namespace"] = namespace
        obj = self._accept(res, namespace, patched, opts.strict)
        return self._write(res, current, obj, opts)

    def write_status(self, res: Resource, current: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """Server-internal status write (controllers), bypassing the HTTP layer."""
        new = self.copy(res, current)
        new["status"] = status
        return self._write(res, current, new, STATUS_WRITE)

    def write(self, res: Resource, current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Server-internal update of the main resource; a resourceVersion in ``new`` is a precondition."""
        return self._write(res, current, new)

    def _write(
        self,
        res: Resource,
        current: dict[str, Any],
        obj: dict[str, Any],
        opts: WriteOptions = WRITE,
        *,
        conditional: bool = False,
    ) -> dict[str, Any]:
        """The one path of every update: precondition, preparation, canonical form, validation, commit."""
        old, old_meta = current, current["metadata"]
        rv = obj["metadata"].get("resourceVersion")
        if rv:
            if rv != old_meta["resourceVersion"]:
                raise errors.conflict(res.plural, res.group, old_meta["name"])
        elif conditional:
            msg = "Invalid value: 0x0: must be specified for an update"
            cause = Cause("FieldValueInvalid", msg, "metadata.resourceVersion")
            raise invalid(res, old_meta["name"], [cause])
        strategy = res.strategy
        new = json_copy(obj)
        meta = new["metadata"]
        for field in _SYSTEM_META:
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if opts.subresource == "status":
            new = strategy.prepare_for_status_update(new, old)
        else:
            strategy.prepare_for_update(new, old)
        new = strategy.canonicalize(new)
        meta = new["metadata"]
        split = strategy.status_subresource
        if strategy.tracks_generation and _strip_system(new, include_status=split) != _strip_system(
            old, include_status=split
        ):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        self._validate(res, new, old)
        if new == old:
            return old
        if opts.dry_run:
            return new
        if self._finished_deleting(res, new):
            return self.store.delete(store_key(res, meta.get("namespace", ""), meta["name"]))
        return self.store.update(res.storage_group, res.storage_resource, new)

    def _finished_deleting(self, res: Resource, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        return not res.strategy.deletion_pending(obj)

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
            supported = ["Foreground", "Background", "Orphan"]
            raise invalid(res, name, [fe.not_supported("propagationPolicy", policy, supported)])
        strategy = res.strategy
        new = self.copy(res, current)
        new_meta = new["metadata"]
        finalizers = list(new_meta.get("finalizers") or ())
        grace = strategy.grace_period(current, opts.grace_period)
        if meta.get("deletionTimestamp"):
            if grace < (meta.get("deletionGracePeriodSeconds") or 0):
                new_meta["deletionGracePeriodSeconds"] = grace
                new_meta["deletionTimestamp"] = now_rfc3339(after=grace)
                if not finalizers and not strategy.deletion_pending(new):
                    return self._remove(res, current, opts)
            return self._pending(res, new, current, opts)
        if policy == "Foreground" and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        elif policy == "Orphan" and ORPHAN not in finalizers:
            finalizers.append(ORPHAN)
        strategy.prepare_for_delete(new, finalizers)
        new_meta["deletionTimestamp"] = now_rfc3339(after=grace)
        new_meta["deletionGracePeriodSeconds"] = grace
        if finalizers:
            new_meta["finalizers"] = finalizers
        elif not strategy.deletion_pending(new):
            return self._remove(res, current, opts)
        if strategy.tracks_generation:
            new_meta["generation"] = int(meta.get("generation") or 0) + 1
        return self._pending(res, new, current, opts)

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
        if res.strategy.return_deleted_object:
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

    # -- validation ----------------------------------------------------------------------------------------

    def _validate(self, res: Resource, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = new["metadata"].get("name", "")
        if not name:
            raise invalid(res, "", [fe.required("metadata.name", "name or generateName is required")])
        causes = validate_create(res, new) if old is None else validate_update(res, old, new)
        if causes:
            raise invalid(res, name, causes)


def _nonzero_version(value: Any) -> bool:
    """Whether a create's resourceVersion is one kube-apiserver refuses: only a non-zero unsigned integer
    (``ParseResourceVersion``); anything else ("v1", "0", "-1") is dropped as the object is prepared."""
    return isinstance(value, str) and value.isascii() and value.isdigit() and 0 < int(value) < 2**64
