"""Create/update validation of built-in resources, as the registries' strategies do it.

Covers object metadata (``apimachinery/pkg/api/validation/objectmeta.go``) for every resource, custom
resources included, and the kind rules the local cluster's clients can trip over
(``pkg/apis/core/validation``, batch and coordination validation, apiextensions CRD validation).
Each function returns field-error causes; the server answers 422 Invalid when there is any.

Bodies are untyped JSON here (the real server decodes into Go structs first), so a value of the wrong
JSON type becomes a ``FieldValueTypeInvalid`` cause instead of an exception.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from t9k_provider.local.apiserver import fielderrors as fe
from t9k_provider.local.apiserver import jsonfields as jf
from t9k_provider.local.apiserver.fielderrors import Cause
from t9k_provider.local.apiserver.jsonvalues import json_equal
from t9k_provider.local.apiserver.names import (
    is_dns1123_label,
    is_qualified_name,
    is_valid_label_value,
    name_is_dns1035_label,
    name_is_dns_label,
    name_is_dns_subdomain,
    regex_error,
)
from t9k_provider.local.apiserver.quantity import QUANTITY_ERROR, parse_quantity
from t9k_provider.local.apiserver.schema import check_crd

NameCheck = Callable[[str, bool], list[str]]

_NAME_CHECKS: dict[str, NameCheck] = {
    "services": name_is_dns1035_label,
    "namespaces": name_is_dns_label,
}
_CLUSTER_SCOPED = {"namespaces", "nodes", "customresourcedefinitions"}
_NAMESPACED = {
    "pods",
    "services",
    "configmaps",
    "secrets",
    "events",
    "leases",
    "jobs",
    "serviceaccounts",
    "endpoints",
    "podtemplates",
}
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
_CONFIG_SIZE_LIMIT = 1024 * 1024
IMMUTABLE = "field is immutable"
TOO_DEEP = fe.invalid("", "<value omitted>", "the object is nested too deeply to be validated")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")
_CONFIG_KEY_MSG = regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
    "[-._a-zA-Z0-9]+",
    "key.name",
    "KEY_NAME",
    "key-name",
)


def invalid_message(kind: str, group: str, name: str, causes: list[Cause]) -> str:
    """``NewInvalid``'s message: ``<Kind>[.<group>] "<name>" is invalid: <field>: <error>[, ...]``."""
    qualified = f"{kind}.{group}" if group else kind
    return f'{qualified} "{name}" is invalid: {fe.aggregate(causes)}'


def validate_create(resource: str, obj: dict) -> list[Cause]:
    """Causes that make creating ``obj`` in ``resource`` (a plural, e.g. "pods") a 422."""
    out: list[Cause] = []
    try:
        _create(resource, obj, out)
    except RecursionError:
        return [TOO_DEEP]
    return out


def validate_update(resource: str, old: dict, new: dict) -> list[Cause]:
    """Causes that make replacing ``old`` by ``new`` a 422 (metadata immutability, kind rules)."""
    out: list[Cause] = []
    try:
        _create(resource, new, out)
        # Type errors in ``new`` are already reported; update rules read leniently.
        _object_meta_update(_map(old.get("metadata")), _map(new.get("metadata")), out)
        rule = _UPDATE_RULES.get(resource)
        if rule is not None:
            rule(old, new, out)
    except RecursionError:
        return [TOO_DEEP]
    return out


def _create(resource: str, obj: dict, out: list[Cause]) -> None:
    _object_meta(resource, jf.object_field(obj, "metadata", "metadata", out), out)
    rule = _CREATE_RULES.get(resource)
    if rule is not None:
        rule(obj, out)


def _length(value: Any) -> int:
    return len(value) if isinstance(value, list) else 0


def _map(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _string_set(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ----------------------------------------------------------------------------------------- metadata


def _object_meta(resource: str, meta: dict, out: list[Cause]) -> None:
    check = _NAME_CHECKS.get(resource, name_is_dns_subdomain)
    generate = jf.text_field(meta, "generateName", "metadata.generateName", out)
    if generate:
        out += [fe.invalid("metadata.generateName", generate, m) for m in check(generate, True)]
    name = jf.text_field(meta, "name", "metadata.name", out)
    if not name:
        out.append(fe.required("metadata.name", "name or generateName is required"))
    else:
        out += [fe.invalid("metadata.name", name, m) for m in check(name, False)]
    namespace = jf.text_field(meta, "namespace", "metadata.namespace", out)
    if resource in _CLUSTER_SCOPED and namespace:
        out.append(fe.forbidden("metadata.namespace", "not allowed on this type"))
    elif resource in _NAMESPACED:
        if not namespace:
            out.append(fe.required("metadata.namespace"))
        else:
            problems = name_is_dns_label(namespace, False)
            out += [fe.invalid("metadata.namespace", namespace, m) for m in problems]
    generation = jf.int_field(meta, "generation", "metadata.generation", out)
    if generation is not None and generation < 0:
        out.append(fe.invalid("metadata.generation", generation, "must be greater than or equal to 0"))
    _labels(meta, "labels", "metadata.labels", out)
    _annotations(meta, out)
    _owner_references(meta, out)
    _finalizers(meta, out)


def _labels(parent: dict, key: str, path: str, out: list[Cause]) -> None:
    for name, value in jf.string_map(parent, key, path, out).items():
        out += [fe.invalid(path, name, m) for m in is_qualified_name(name)]
        out += [fe.invalid(path, value, m) for m in is_valid_label_value(value)]


def _annotations(meta: dict, out: list[Cause]) -> None:
    path = "metadata.annotations"
    size = 0
    for name, value in jf.string_map(meta, "annotations", path, out).items():
        out += [fe.invalid(path, name, m) for m in is_qualified_name(name.lower())]
        size += len(name.encode()) + len(value.encode())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        out.append(fe.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))


def _owner_references(meta: dict, out: list[Cause]) -> None:
    path = "metadata.ownerReferences"
    controller = ""
    for ref_path, ref in jf.object_items(meta, "ownerReferences", path, out):
        # Upstream reports these on the list path, without the index.
        api_version = jf.text_field(ref, "apiVersion", f"{ref_path}.apiVersion", out)
        if not api_version.split("/")[-1]:
            out.append(fe.invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not jf.text_field(ref, key, f"{ref_path}.{key}", out):
                out.append(fe.invalid(f"{path}.{key}", "", f"{key} must not be empty"))
        if ref.get("controller") is True:
            name = _text(ref.get("name"))
            if controller:
                detail = (
                    'Only one reference can have Controller set to true. Found "true" in references for '
                    f"{controller} and {name}"
                )
                out.append(fe.invalid(path, meta["ownerReferences"], detail))
            controller = controller or name


def _finalizers(meta: dict, out: list[Cause]) -> None:
    path = "metadata.finalizers"
    finalizers = jf.string_items(meta, "finalizers", path, out)
    for item in finalizers:
        out += [fe.invalid(path, item, m) for m in is_qualified_name(item)]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        out.append(fe.invalid(path, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"))


def _object_meta_update(old: dict, new: dict, out: list[Cause]) -> None:
    for key in ("name", "namespace"):
        if _text(new.get(key)) != _text(old.get(key)):
            out.append(fe.invalid(f"metadata.{key}", _text(new.get(key)), IMMUTABLE))
    for key in ("uid", "creationTimestamp"):
        # Empty values are filled from the stored object by the server before validation.
        if new.get(key) and new.get(key) != old.get(key):
            out.append(fe.invalid(f"metadata.{key}", new[key], IMMUTABLE))
    if old.get("deletionTimestamp"):
        added = sorted(_string_set(new.get("finalizers")) - _string_set(old.get("finalizers")))
        if added:
            shown = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
            detail = (
                "no new finalizers can be added if the object is being deleted, found new finalizers " + shown
            )
            out.append(fe.forbidden("metadata.finalizers", detail))


# ----------------------------------------------------------------------------------------- pods

_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*\Z")
_ENV_NAME_MSG = regex_error(
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
    "and must not start with a digit",
    "[-._a-zA-Z][-._a-zA-Z0-9]*",
    "my.env-name",
    "MY_ENV.NAME",
    "MyEnvName1",
)
_RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_PROTOCOLS = ["SCTP", "TCP", "UDP"]


def _port(parent: dict, key: str, path: str, out: list[Cause], required: bool = True) -> None:
    """Ports are Go ints: a missing required port decodes as 0 and fails the range check."""
    if parent.get(key) is None and not required:
        return
    port = jf.int_field({key: parent.get(key, 0)}, key, path, out)
    if port is not None and not 1 <= port <= 65535:
        out.append(fe.invalid(path, port, "must be between 1 and 65535, inclusive"))


def _protocol(parent: dict, path: str, out: list[Cause]) -> None:
    protocol = jf.text_field(parent, "protocol", path, out)
    if protocol and protocol not in _PROTOCOLS:
        out.append(fe.not_supported(path, protocol, _PROTOCOLS))


_ENV_FIELD_PATHS = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
]
_SUBSCRIPT = re.compile(r"(metadata\.(?:labels|annotations))\['(.*)'\]\Z")
_ENV_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")


def _env_source(source: dict, value: str, path: str, out: list[Cause]) -> None:
    """``validateEnvVarValueFrom``: exactly one source, and not together with ``value``."""
    present = [key for key in _ENV_SOURCES if source.get(key) is not None]
    for key in present:
        ref = jf.object_field(source, key, f"{path}.{key}", out)
        if key == "fieldRef":
            _field_ref(ref, f"{path}.fieldRef", out)
        elif key == "resourceFieldRef":
            if not jf.text_field(ref, "resource", f"{path}.resourceFieldRef.resource", out):
                out.append(fe.required(f"{path}.resourceFieldRef.resource"))
        else:
            key_name = jf.text_field(ref, "key", f"{path}.{key}.key", out)
            if not key_name:
                out.append(fe.required(f"{path}.{key}.key"))
            elif not _CONFIG_KEY.match(key_name):
                out.append(fe.invalid(f"{path}.{key}.key", key_name, _CONFIG_KEY_MSG))
    if not present:
        detail = "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
        out.append(fe.invalid(path, "", detail))
    elif value:
        out.append(fe.invalid(path, "", "may not be specified when `value` is not empty"))
    elif len(present) > 1:
        out.append(fe.invalid(path, "", "may not have more than one field specified at a time"))


def _field_ref(ref: dict, path: str, out: list[Cause]) -> None:
    field_path = jf.text_field(ref, "fieldPath", f"{path}.fieldPath", out)
    if not field_path:
        out.append(fe.required(f"{path}.fieldPath"))
        return
    subscript = _SUBSCRIPT.match(field_path)
    if subscript is not None:
        key = subscript.group(2)
        out += [fe.invalid(f"{path}.fieldPath", key, m) for m in is_qualified_name(key.lower())]
    elif field_path not in _ENV_FIELD_PATHS or field_path in ("metadata.labels", "metadata.annotations"):
        supported = [p for p in _ENV_FIELD_PATHS if p not in ("metadata.labels", "metadata.annotations")]
        out.append(fe.not_supported(f"{path}.fieldPath", field_path, supported))


def _container(base: str, c: dict, volumes: set[str], seen: set[str], out: list[Cause]) -> None:
    name = jf.text_field(c, "name", f"{base}.name", out)
    if not name:
        out.append(fe.required(f"{base}.name"))
    else:
        out += [fe.invalid(f"{base}.name", name, m) for m in is_dns1123_label(name)]
        if name in seen:
            out.append(fe.duplicate(f"{base}.name", name))
        seen.add(name)
    if not jf.text_field(c, "image", f"{base}.image", out):
        out.append(fe.required(f"{base}.image"))
    jf.string_items(c, "command", f"{base}.command", out)
    jf.string_items(c, "args", f"{base}.args", out)
    for env_path, env in jf.object_items(c, "env", f"{base}.env", out):
        env_name = jf.text_field(env, "name", f"{env_path}.name", out)
        if not env_name:
            out.append(fe.required(f"{env_path}.name"))
        elif not _ENV_NAME.match(env_name):
            out.append(fe.invalid(f"{env_path}.name", env_name, _ENV_NAME_MSG))
        value = jf.text_field(env, "value", f"{env_path}.value", out)
        if env.get("valueFrom") is not None:
            source = jf.object_field(env, "valueFrom", f"{env_path}.valueFrom", out)
            _env_source(source, value, f"{env_path}.valueFrom", out)
    port_names: set[str] = set()
    for port_path, port in jf.object_items(c, "ports", f"{base}.ports", out):
        _port(port, "containerPort", f"{port_path}.containerPort", out)
        port_name = jf.text_field(port, "name", f"{port_path}.name", out)
        if port_name:
            if port_name in port_names:
                out.append(fe.duplicate(f"{port_path}.name", port_name))
            port_names.add(port_name)
        _protocol(port, f"{port_path}.protocol", out)
    _resources(jf.object_field(c, "resources", f"{base}.resources", out), f"{base}.resources", out)
    for mount_path, mount in jf.object_items(c, "volumeMounts", f"{base}.volumeMounts", out):
        mount_name = jf.text_field(mount, "name", f"{mount_path}.name", out)
        if not mount_name:
            out.append(fe.required(f"{mount_path}.name"))
        elif mount_name not in volumes:
            out.append(fe.not_found(f"{mount_path}.name", mount_name))
        if not jf.text_field(mount, "mountPath", f"{mount_path}.mountPath", out):
            out.append(fe.required(f"{mount_path}.mountPath"))


_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    return (
        not _is_native(name)
        and not name.startswith("requests.")
        and not is_qualified_name("requests." + name)
    )


def _resource_name_errors(name: str, path: str) -> list[Cause]:
    errors = [fe.invalid(path, name, m) for m in is_qualified_name(name)]
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errors.append(fe.invalid(path, name, "must be a standard resource for containers"))
    elif not _is_native(name) and not _is_extended(name):
        errors.append(fe.invalid(path, name, "doesn't follow extended resource name standard"))
    return errors


def _quantities(section: dict, path: str, out: list[Cause]) -> dict[str, tuple[str, Decimal]]:
    """Valid entries of ``limits``/``requests`` as (printed value, exact value)."""
    found = {}
    for name, raw in section.items():
        entry = f"{path}[{name}]"
        errors = _resource_name_errors(name, entry)
        value = parse_quantity(raw) if isinstance(raw, (str, int, float)) else None
        if value is None:
            errors.append(fe.invalid(entry, raw, QUANTITY_ERROR))
        elif value < 0:
            errors.append(fe.invalid(entry, str(raw), "must be greater than or equal to 0"))
        elif _is_extended(name) and value != value.to_integral_value():
            errors.append(fe.invalid(entry, str(raw), "must be an integer"))
        out += errors
        if value is not None and not errors:
            found[name] = (str(raw), value)
    return found


def _resources(resources: dict, path: str, out: list[Cause]) -> None:
    """``ValidateResourceRequirements``: names, quantities, requests within limits."""
    limits = _quantities(jf.object_field(resources, "limits", f"{path}.limits", out), f"{path}.limits", out)
    requests = _quantities(
        jf.object_field(resources, "requests", f"{path}.requests", out), f"{path}.requests", out
    )
    for name, (printed, value) in requests.items():
        overcommit = _is_native(name) and not name.startswith("hugepages-")
        if name in limits:
            limit_printed, limit = limits[name]
            if value != limit and not overcommit:
                detail = f"must be equal to {name} limit of {limit_printed}"
                out.append(fe.invalid(f"{path}.requests", printed, detail))
            elif value > limit:
                detail = f"must be less than or equal to {name} limit of {limit_printed}"
                out.append(fe.invalid(f"{path}.requests", printed, detail))
        elif not overcommit:
            out.append(fe.required(f"{path}.limits", "Limit must be set for non overcommitable resources"))


# Volume sources whose required field the local kubelet needs; any other source key still counts.
_VOLUME_REQUIRED = {
    "configMap": "name",
    "secret": "secretName",
    "hostPath": "path",
    "persistentVolumeClaim": "claimName",
}


def _volume_source(volume: dict, path: str, out: list[Cause]) -> None:
    """``validateVolumeSource``: exactly one source per volume, with its required field."""
    sources = [key for key, value in volume.items() if key != "name" and value is not None]
    if not sources:
        out.append(fe.required(path, "must specify a volume type"))
    for extra in sources[1:]:
        out.append(fe.forbidden(f"{path}.{extra}", "may not specify more than 1 volume type"))
    for key in sources[:1]:
        source = jf.object_field(volume, key, f"{path}.{key}", out)
        needed = _VOLUME_REQUIRED.get(key)
        if needed and not jf.text_field(source, needed, f"{path}.{key}.{needed}", out):
            out.append(fe.required(f"{path}.{key}.{needed}"))
        for item_path, item in jf.object_items(source, "items", f"{path}.{key}.items", out):
            # configMap/secret items name a key; downwardAPI items name a field instead
            if key != "downwardAPI" and not jf.text_field(item, "key", f"{item_path}.key", out):
                out.append(fe.required(f"{item_path}.key"))
            if not jf.text_field(item, "path", f"{item_path}.path", out):
                out.append(fe.required(f"{item_path}.path"))


def _pod_spec(
    spec: dict, path: str, out: list[Cause], restart_policies: list[str] = _RESTART_POLICIES
) -> None:
    volumes: set[str] = set()
    for volume_path, volume in jf.object_items(spec, "volumes", f"{path}.volumes", out):
        vname = jf.text_field(volume, "name", f"{volume_path}.name", out)
        if not vname:
            out.append(fe.required(f"{volume_path}.name"))
            continue
        out += [fe.invalid(f"{volume_path}.name", vname, m) for m in is_dns1123_label(vname)]
        if vname in volumes:
            out.append(fe.duplicate(f"{volume_path}.name", vname))
        volumes.add(vname)
        _volume_source(volume, volume_path, out)
    containers = jf.object_items(spec, "containers", f"{path}.containers", out)
    if not spec.get("containers"):
        out.append(fe.required(f"{path}.containers"))
    seen: set[str] = set()
    for base, c in jf.object_items(spec, "initContainers", f"{path}.initContainers", out) + containers:
        _container(base, c, volumes, seen, out)
    policy = jf.text_field(spec, "restartPolicy", f"{path}.restartPolicy", out)
    if policy and policy not in restart_policies:
        out.append(fe.not_supported(f"{path}.restartPolicy", policy, restart_policies))
    deadline = jf.int_field(spec, "activeDeadlineSeconds", f"{path}.activeDeadlineSeconds", out)
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        detail = "must be between 1 and 2147483647, inclusive"
        out.append(fe.invalid(f"{path}.activeDeadlineSeconds", deadline, detail))
    jf.int_field(spec, "terminationGracePeriodSeconds", f"{path}.terminationGracePeriodSeconds", out)
    for key in ("hostname", "subdomain"):
        value = jf.text_field(spec, key, f"{path}.{key}", out)
        if value:
            out += [fe.invalid(f"{path}.{key}", value, m) for m in is_dns1123_label(value)]
    account = jf.text_field(spec, "serviceAccountName", f"{path}.serviceAccountName", out)
    if account:
        out += [
            fe.invalid(f"{path}.serviceAccountName", account, m)
            for m in name_is_dns_subdomain(account, False)
        ]
    _labels(spec, "nodeSelector", f"{path}.nodeSelector", out)


def _pod(obj: dict, out: list[Cause]) -> None:
    _pod_spec(jf.object_field(obj, "spec", "spec", out), "spec", out)


_POD_MUTABLE_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _significant(value: Any) -> Any:
    """Drop what JSON ``omitempty`` would drop, so absent and empty compare equal."""
    if isinstance(value, dict):
        kept = {k: _significant(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, "", [], {}, False)}
    if isinstance(value, list):
        return [_significant(v) for v in value]
    return value


def _differences(old: Any, new: Any, path: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new)):
            found += _differences(old.get(key), new.get(key), f"{path}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            found += _differences(a, b, f"{path}[{i}]")
        return found
    if json_equal(old, new):
        return []
    before = fe.go_value(old) if old is not None else "unset"
    after = fe.go_value(new) if new is not None else "unset"
    return [f"  {path}: {before} -> {after}"]


def _pod_update(old: dict, new: dict, out: list[Cause]) -> None:
    old_spec, new_spec = _map(old.get("spec")), _map(new.get("spec"))
    for key in ("containers", "initContainers"):
        if _length(old_spec.get(key)) != _length(new_spec.get(key)):
            out.append(fe.forbidden(f"spec.{key}", "pod updates may not add or remove containers"))
            return
    munged = dict(new_spec)
    for key in ("containers", "initContainers"):
        if isinstance(munged.get(key), list):
            munged[key] = [
                {**c, "image": o.get("image")} if isinstance(c, dict) and isinstance(o, dict) else c
                for c, o in zip(munged[key], old_spec.get(key) or [], strict=True)
            ]
    old_deadline, new_deadline = old_spec.get("activeDeadlineSeconds"), new_spec.get("activeDeadlineSeconds")
    if isinstance(old_deadline, int):
        if new_deadline is None:
            detail = "must not update from a positive integer to nil value"
            out.append(fe.invalid("spec.activeDeadlineSeconds", None, detail))
        elif isinstance(new_deadline, int) and new_deadline > old_deadline:
            detail = "must be less than or equal to previous value"
            out.append(fe.invalid("spec.activeDeadlineSeconds", new_deadline, detail))
    munged["activeDeadlineSeconds"] = old_deadline
    new_tolerations = new_spec.get("tolerations") if isinstance(new_spec.get("tolerations"), list) else []
    for toleration in old_spec.get("tolerations") or []:
        if not any(json_equal(toleration, t) for t in new_tolerations):
            detail = "existing toleration can not be modified except its tolerationSeconds"
            out.append(fe.forbidden("spec.tolerations", detail))
            break
    munged["tolerations"] = old_spec.get("tolerations")
    munged["schedulingGates"] = old_spec.get("schedulingGates")
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and new_spec.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    diff = _differences(_significant(old_spec), _significant(munged), "spec")
    if diff:
        out.append(fe.forbidden("spec", _POD_MUTABLE_MESSAGE + "\n" + "\n".join(diff)))


# ----------------------------------------------------------------------------------------- services

_SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]


def _service(obj: dict, out: list[Cause]) -> None:
    spec = jf.object_field(obj, "spec", "spec", out)
    kind = jf.text_field(spec, "type", "spec.type", out)
    if kind and kind not in _SERVICE_TYPES:
        out.append(fe.not_supported("spec.type", kind, _SERVICE_TYPES))
    ports = jf.object_items(spec, "ports", "spec.ports", out)
    cluster_ip = jf.text_field(spec, "clusterIP", "spec.clusterIP", out)
    headless = cluster_ip == "None"
    if cluster_ip and not headless and not _is_ip(cluster_ip):
        detail = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        out.append(fe.invalid("spec.clusterIP", cluster_ip, detail))
    if not spec.get("ports") and kind != "ExternalName" and not headless:
        out.append(fe.required("spec.ports"))
    names: set[str] = set()
    for base, port in ports:
        name = jf.text_field(port, "name", f"{base}.name", out)
        if len(ports) > 1 and not name:
            out.append(fe.required(f"{base}.name"))
        elif name:
            out += [fe.invalid(f"{base}.name", name, m) for m in is_dns1123_label(name)]
            if name in names:
                out.append(fe.duplicate(f"{base}.name", name))
            names.add(name)
        _port(port, "port", f"{base}.port", out)
        _protocol(port, f"{base}.protocol", out)
        if not isinstance(port.get("targetPort"), str):
            _port(port, "targetPort", f"{base}.targetPort", out, required=False)
    _labels(spec, "selector", "spec.selector", out)


def _service_update(old: dict, new: dict, out: list[Cause]) -> None:
    old_ip = _text(_map(old.get("spec")).get("clusterIP"))
    new_ip = _text(_map(new.get("spec")).get("clusterIP"))
    if old_ip and new_ip and old_ip != new_ip:
        out.append(fe.invalid("spec.clusterIP", new_ip, IMMUTABLE))


# ----------------------------------------------------------------------------------------- config data


def _config_keys(obj: dict, sections: tuple[str, ...], out: list[Cause]) -> None:
    seen: dict[str, str] = {}
    size = 0
    for section in sections:
        for key, value in jf.string_map(obj, section, section, out).items():
            path = f"{section}[{key}]"
            if len(key) > 253:
                out.append(fe.invalid(path, key, "must be no more than 253 characters"))
            if not _CONFIG_KEY.match(key):
                out.append(fe.invalid(path, key, _CONFIG_KEY_MSG))
            if key in (".", ".."):
                out.append(fe.invalid(path, key, f"must not be '{key}'"))
            if key in seen:
                out.append(fe.invalid(path, key, f"duplicate of key present in {seen[key]}"))
            seen.setdefault(key, section)
            size += len(value)
    if size > _CONFIG_SIZE_LIMIT:
        out.append(fe.too_long("", _CONFIG_SIZE_LIMIT))


def _configmap(obj: dict, out: list[Cause]) -> None:
    _config_keys(obj, ("data", "binaryData"), out)


def _secret(obj: dict, out: list[Cause]) -> None:
    _config_keys(obj, ("data",), out)
    for key, value in _map(obj.get("data")).items():
        if isinstance(value, str) and not _is_base64(value):
            out.append(fe.invalid(f"data[{key}]", "<value omitted>", "must be base64 encoded"))
    jf.text_field(obj, "type", "type", out)


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _namespace(obj: dict, out: list[Cause]) -> None:
    """``spec.finalizers`` entries are standard (``kubernetes``) or domain-qualified names."""
    path = "spec.finalizers"
    for name in jf.string_items(jf.object_field(obj, "spec", "spec", out), "finalizers", path, out):
        out += [fe.invalid(path, name, m) for m in is_qualified_name(name)]
        if "/" not in name and name != "kubernetes":
            out.append(
                fe.invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified")
            )


def _immutable_data(old: dict, new: dict, sections: tuple[str, ...], out: list[Cause]) -> None:
    if old.get("immutable") is not True:
        return
    detail = "field is immutable when `immutable` is set"
    if new.get("immutable") is not True:
        out.append(fe.forbidden("immutable", detail))
    for key in sections:
        if not json_equal(_map(old.get(key)), _map(new.get(key))):
            out.append(fe.forbidden(key, detail))


def _configmap_update(old: dict, new: dict, out: list[Cause]) -> None:
    _immutable_data(old, new, ("data", "binaryData"), out)


def _secret_update(old: dict, new: dict, out: list[Cause]) -> None:
    _immutable_data(old, new, ("data",), out)
    if (_text(old.get("type")) or "Opaque") != (_text(new.get("type")) or "Opaque"):
        out.append(fe.invalid("type", _text(new.get("type")), IMMUTABLE))


# ----------------------------------------------------------------------------------------- events, leases


def _event(obj: dict, out: list[Cause]) -> None:
    """Legacy (core/v1) event rules; events.k8s.io's stricter ones are the server's events view."""
    namespace = _text(_map(obj.get("metadata")).get("namespace"))
    involved = jf.object_field(obj, "involvedObject", "involvedObject", out)
    involved_ns = jf.text_field(involved, "namespace", "involvedObject.namespace", out)
    mismatch = fe.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not obj.get("eventTime"):
        if namespace != involved_ns and not (not involved_ns and namespace == "default"):
            out.append(mismatch)
        return
    if not involved_ns and namespace not in ("default", "kube-system"):
        out.append(mismatch)
    component = jf.text_field(obj, "reportingComponent", "reportingComponent", out)
    if not component:
        out.append(fe.required("reportingComponent"))
    out += [fe.invalid("reportingComponent", component, m) for m in is_qualified_name(component)]
    for key in ("reportingInstance", "action", "reason"):
        value = jf.text_field(obj, key, key, out)
        if not value:
            out.append(fe.required(key))
        elif len(value) > 128:
            out.append(fe.invalid(key, "", "can have at most 128 characters"))
    if len(jf.text_field(obj, "message", "message", out)) > 1024:
        out.append(fe.invalid("message", "", "can have at most 1024 characters"))


def _lease(obj: dict, out: list[Cause]) -> None:
    spec = jf.object_field(obj, "spec", "spec", out)
    jf.text_field(spec, "holderIdentity", "spec.holderIdentity", out)
    duration = jf.int_field(spec, "leaseDurationSeconds", "spec.leaseDurationSeconds", out)
    if duration is not None and duration <= 0:
        out.append(fe.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = jf.int_field(spec, "leaseTransitions", "spec.leaseTransitions", out)
    if transitions is not None and transitions < 0:
        out.append(fe.invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))


# ----------------------------------------------------------------------------------------- jobs

_JOB_COUNTERS = (
    "parallelism",
    "completions",
    "backoffLimit",
    "activeDeadlineSeconds",
    "ttlSecondsAfterFinished",
)


def _job(obj: dict, out: list[Cause]) -> None:
    spec = jf.object_field(obj, "spec", "spec", out)
    for key in _JOB_COUNTERS:
        value = jf.int_field(spec, key, f"spec.{key}", out)
        if value is not None and value < 0:
            out.append(fe.invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    if not isinstance(spec.get("template"), dict):
        out.append(fe.required("spec.template"))
        return
    template = spec["template"]
    template_meta = jf.object_field(template, "metadata", "spec.template.metadata", out)
    _labels(template_meta, "labels", "spec.template.metadata.labels", out)
    pod_spec = jf.object_field(template, "spec", "spec.template.spec", out)
    _pod_spec(pod_spec, "spec.template.spec", out, ["OnFailure", "Never"])
    if pod_spec.get("restartPolicy") is None:
        out.append(fe.required("spec.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))


def _job_update(old: dict, new: dict, out: list[Cause]) -> None:
    old_spec, new_spec = _map(old.get("spec")), _map(new.get("spec"))
    for key in ("selector", "completions", "completionMode"):
        if key in old_spec and not json_equal(old_spec.get(key), new_spec.get(key)):
            out.append(fe.invalid(f"spec.{key}", new_spec.get(key), IMMUTABLE))
    if not json_equal(_significant(old_spec.get("template")), _significant(new_spec.get("template"))):
        out.append(fe.invalid("spec.template", new_spec.get("template"), IMMUTABLE))


# ----------------------------------------------------------------------------------------- CRDs


def _crd(obj: dict, out: list[Cause]) -> None:
    out += check_crd(obj)


def _crd_update(old: dict, new: dict, out: list[Cause]) -> None:
    old_spec, new_spec = _map(old.get("spec")), _map(new.get("spec"))
    for key in ("scope", "group"):
        if _text(old_spec.get(key)) != _text(new_spec.get(key)):
            out.append(fe.invalid(f"spec.{key}", _text(new_spec.get(key)), IMMUTABLE))


_CREATE_RULES: dict[str, Callable[[dict, list[Cause]], None]] = {
    "namespaces": _namespace,
    "pods": _pod,
    "services": _service,
    "configmaps": _configmap,
    "secrets": _secret,
    "events": _event,
    "leases": _lease,
    "jobs": _job,
    "customresourcedefinitions": _crd,
}
_UPDATE_RULES: dict[str, Callable[[dict, dict, list[Cause]], None]] = {
    "pods": _pod_update,
    "services": _service_update,
    "configmaps": _configmap_update,
    "secrets": _secret_update,
    "jobs": _job_update,
    "customresourcedefinitions": _crd_update,
}
