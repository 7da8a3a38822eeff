"""Create/update validation of built-in resources, as the registries' strategies do it.

Covers object metadata (``apimachinery/pkg/api/validation/objectmeta.go``) for every resource, custom
resources included, and the kind rules the local cluster's clients can trip over
(``pkg/apis/core/validation``, batch and coordination validation, apiextensions CRD validation).
Each function returns field-error causes; the server answers 422 Invalid when there is any.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from t9k_provider.local.apiserver import fielderrors as fe
from t9k_provider.local.apiserver.fielderrors import Cause
from t9k_provider.local.apiserver.names import (
    is_dns1123_label,
    is_qualified_name,
    is_valid_label_value,
    name_is_dns1035_label,
    name_is_dns_label,
    name_is_dns_subdomain,
    regex_error,
)
from t9k_provider.local.apiserver.patch import json_equal
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


def _map(value: Any) -> dict:
    """Malformed bodies must yield causes, not crashes: treat a non-object where one belongs as empty."""
    return value if isinstance(value, dict) else {}


def invalid_message(kind: str, group: str, name: str, causes: list[Cause]) -> str:
    """``NewInvalid``'s message: ``<Kind>[.<group>] "<name>" is invalid: <field>: <error>[, ...]``."""
    qualified = f"{kind}.{group}" if group else kind
    return f'{qualified} "{name}" is invalid: {fe.aggregate(causes)}'


def validate_create(resource: str, obj: dict) -> list[Cause]:
    """Causes that make creating ``obj`` in ``resource`` (a plural, e.g. "pods") a 422."""
    causes = _object_meta(resource, _map(obj.get("metadata")))
    rule = _CREATE_RULES.get(resource)
    if rule is not None:
        causes += rule(obj)
    return causes


def validate_update(resource: str, old: dict, new: dict) -> list[Cause]:
    """Causes that make replacing ``old`` by ``new`` a 422 (metadata immutability, kind rules)."""
    causes = _object_meta_update(_map(old.get("metadata")), _map(new.get("metadata")))
    causes += validate_create(resource, new)
    rule = _UPDATE_RULES.get(resource)
    if rule is not None:
        causes += rule(old, new)
    return causes


# ----------------------------------------------------------------------------------------- metadata


def _object_meta(resource: str, meta: dict) -> list[Cause]:
    out: list[Cause] = []
    check = _NAME_CHECKS.get(resource, name_is_dns_subdomain)
    generate = meta.get("generateName") or ""
    if generate:
        out += [fe.invalid("metadata.generateName", generate, m) for m in check(generate, True)]
    name = meta.get("name") or ""
    if not name:
        out.append(fe.required("metadata.name", "name or generateName is required"))
    else:
        out += [fe.invalid("metadata.name", name, m) for m in check(name, False)]
    namespace = meta.get("namespace") or ""
    if resource in _CLUSTER_SCOPED and namespace:
        out.append(fe.forbidden("metadata.namespace", "not allowed on this type"))
    elif resource in _NAMESPACED:
        if not namespace:
            out.append(fe.required("metadata.namespace"))
        else:
            problems = name_is_dns_label(namespace, False)
            out += [fe.invalid("metadata.namespace", namespace, m) for m in problems]
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        out.append(fe.invalid("metadata.generation", generation, "must be greater than or equal to 0"))
    out += _labels(meta.get("labels"), "metadata.labels")
    out += _annotations(meta.get("annotations"))
    out += _owner_references(meta.get("ownerReferences"))
    out += _finalizers(meta.get("finalizers"))
    return out


def _labels(labels: Any, path: str) -> list[Cause]:
    if not labels:
        return []
    if not isinstance(labels, dict):
        return [fe.type_invalid(path, labels, "must be a map of string keys to string values")]
    out: list[Cause] = []
    for key, value in labels.items():
        out += [fe.invalid(path, key, m) for m in is_qualified_name(key)]
        if not isinstance(value, str):
            out.append(fe.type_invalid(path, value, "label values must be strings"))
            continue
        out += [fe.invalid(path, value, m) for m in is_valid_label_value(value)]
    return out


def _annotations(annotations: Any) -> list[Cause]:
    path = "metadata.annotations"
    if not annotations:
        return []
    if not isinstance(annotations, dict):
        return [fe.type_invalid(path, annotations, "must be a map of string keys to string values")]
    out: list[Cause] = []
    size = 0
    for key, value in annotations.items():
        out += [fe.invalid(path, key, m) for m in is_qualified_name(key.lower())]
        size += len(key.encode()) + len(str(value).encode())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        out.append(fe.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return out


def _owner_references(refs: Any) -> list[Cause]:
    path = "metadata.ownerReferences"
    if not refs:
        return []
    out: list[Cause] = []
    controller = ""
    for ref in refs if isinstance(refs, list) else []:
        ref = ref if isinstance(ref, dict) else {}
        api_version = ref.get("apiVersion") or ""
        if not api_version.split("/")[-1]:
            out.append(fe.invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                out.append(fe.invalid(f"{path}.{key}", ref.get(key) or "", f"{key} must not be empty"))
        if ref.get("controller") is True:
            if controller:
                detail = (
                    'Only one reference can have Controller set to true. Found "true" in references for '
                    f"{controller} and {ref.get('name', '')}"
                )
                out.append(fe.invalid(path, refs, detail))
            controller = controller or ref.get("name", "")
    return out


def _finalizers(finalizers: Any) -> list[Cause]:
    path = "metadata.finalizers"
    if not finalizers:
        return []
    out: list[Cause] = []
    for item in finalizers:
        out += [fe.invalid(path, item, m) for m in is_qualified_name(str(item))]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        out.append(fe.invalid(path, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"))
    return out


def _object_meta_update(old: dict, new: dict) -> list[Cause]:
    out: list[Cause] = []
    for key in ("name", "namespace"):
        if (new.get(key) or "") != (old.get(key) or ""):
            out.append(fe.invalid(f"metadata.{key}", new.get(key) or "", IMMUTABLE))
    for key in ("uid", "creationTimestamp"):
        # Empty values are filled from the stored object by the server before validation.
        if new.get(key) and new.get(key) != old.get(key):
            out.append(fe.invalid(f"metadata.{key}", new[key], IMMUTABLE))
    if old.get("deletionTimestamp"):
        added = sorted(set(new.get("finalizers") or []) - set(old.get("finalizers") or []))
        if added:
            shown = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
            detail = (
                "no new finalizers can be added if the object is being deleted, found new finalizers " + shown
            )
            out.append(fe.forbidden("metadata.finalizers", detail))
    return out


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


def _port_range(path: str, port: Any) -> list[Cause]:
    if isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535:
        return []
    return [fe.invalid(path, port, "must be between 1 and 65535, inclusive")]


def _containers(containers: Any, path: str, volumes: set[str], seen: set[str]) -> list[Cause]:
    out: list[Cause] = []
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        base = f"{path}[{i}]"
        if not isinstance(c, dict):
            out.append(fe.type_invalid(base, c, "must be an object"))
            continue
        name = c.get("name") or ""
        if not name:
            out.append(fe.required(f"{base}.name"))
        else:
            out += [fe.invalid(f"{base}.name", name, m) for m in is_dns1123_label(name)]
            if name in seen:
                out.append(fe.duplicate(f"{base}.name", name))
            seen.add(name)
        if not c.get("image"):
            out.append(fe.required(f"{base}.image"))
        for j, env in enumerate(c.get("env") or []):
            env_name = env.get("name") or "" if isinstance(env, dict) else ""
            if not env_name:
                out.append(fe.required(f"{base}.env[{j}].name"))
            elif not _ENV_NAME.match(env_name):
                out.append(fe.invalid(f"{base}.env[{j}].name", env_name, _ENV_NAME_MSG))
        port_names: set[str] = set()
        for j, port in enumerate(c.get("ports") or []):
            port = port if isinstance(port, dict) else {}
            out += _port_range(f"{base}.ports[{j}].containerPort", port.get("containerPort"))
            port_name = port.get("name")
            if port_name:
                if port_name in port_names:
                    out.append(fe.duplicate(f"{base}.ports[{j}].name", port_name))
                port_names.add(port_name)
            protocol = port.get("protocol")
            if protocol is not None and protocol not in _PROTOCOLS:
                out.append(fe.not_supported(f"{base}.ports[{j}].protocol", protocol, _PROTOCOLS))
        for j, mount in enumerate(c.get("volumeMounts") or []):
            mount = mount if isinstance(mount, dict) else {}
            mount_name = mount.get("name") or ""
            if not mount_name:
                out.append(fe.required(f"{base}.volumeMounts[{j}].name"))
            elif mount_name not in volumes:
                out.append(fe.not_found(f"{base}.volumeMounts[{j}].name", mount_name))
            if not mount.get("mountPath"):
                out.append(fe.required(f"{base}.volumeMounts[{j}].mountPath"))
    return out


def _pod_spec(spec: Any, path: str, restart_policies: list[str] = _RESTART_POLICIES) -> list[Cause]:
    if not isinstance(spec, dict):
        return [fe.required(path)]
    out: list[Cause] = []
    volumes: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or []):
        vname = volume.get("name") or "" if isinstance(volume, dict) else ""
        if not vname:
            out.append(fe.required(f"{path}.volumes[{i}].name"))
            continue
        out += [fe.invalid(f"{path}.volumes[{i}].name", vname, m) for m in is_dns1123_label(vname)]
        if vname in volumes:
            out.append(fe.duplicate(f"{path}.volumes[{i}].name", vname))
        volumes.add(vname)
    if not spec.get("containers"):
        out.append(fe.required(f"{path}.containers"))
    seen: set[str] = set()
    out += _containers(spec.get("initContainers"), f"{path}.initContainers", volumes, seen)
    out += _containers(spec.get("containers"), f"{path}.containers", volumes, seen)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in restart_policies:
        out.append(fe.not_supported(f"{path}.restartPolicy", policy, restart_policies))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not (isinstance(deadline, int) and 1 <= deadline <= 2**31 - 1):
        detail = "must be between 1 and 2147483647, inclusive"
        out.append(fe.invalid(f"{path}.activeDeadlineSeconds", deadline, detail))
    out += _labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    return out


def _pod(obj: dict) -> list[Cause]:
    return _pod_spec(obj.get("spec"), "spec")


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


def _pod_update(old: dict, new: dict) -> list[Cause]:
    old_spec = _map(old.get("spec"))
    new_spec = _map(new.get("spec"))
    out: list[Cause] = []
    if len(new_spec.get("containers") or []) != len(old_spec.get("containers") or []):
        return [fe.forbidden("spec.containers", "pod updates may not add or remove containers")]
    if len(new_spec.get("initContainers") or []) != len(old_spec.get("initContainers") or []):
        return [fe.forbidden("spec.initContainers", "pod updates may not add or remove containers")]
    munged = dict(new_spec)
    for key in ("containers", "initContainers"):
        if key in munged:
            olds = old_spec.get(key) or []
            munged[key] = [
                {**c, "image": o.get("image")} if isinstance(c, dict) and isinstance(o, dict) else c
                for c, o in zip(munged[key], olds, strict=True)
            ]
    old_deadline, new_deadline = old_spec.get("activeDeadlineSeconds"), new_spec.get("activeDeadlineSeconds")
    if old_deadline is not None:
        if new_deadline is None:
            out.append(
                fe.invalid(
                    "spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value"
                )
            )
        elif isinstance(new_deadline, int) and new_deadline > old_deadline:
            out.append(
                fe.invalid(
                    "spec.activeDeadlineSeconds", new_deadline, "must be less than or equal to previous value"
                )
            )
    munged["activeDeadlineSeconds"] = old_deadline
    old_tolerations = old_spec.get("tolerations") or []
    for toleration in old_tolerations:
        if not any(json_equal(toleration, t) for t in new_spec.get("tolerations") or []):
            detail = "existing toleration can not be modified except its tolerationSeconds"
            out.append(fe.forbidden("spec.tolerations", detail))
            break
    munged["tolerations"] = old_spec.get("tolerations")
    munged["schedulingGates"] = old_spec.get("schedulingGates")
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    new_grace = new_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and new_grace == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    diff = _differences(_significant(old_spec), _significant(munged), "spec")
    if diff:
        out.append(fe.forbidden("spec", _POD_MUTABLE_MESSAGE + "\n" + "\n".join(diff)))
    return out


# ----------------------------------------------------------------------------------------- other kinds

_SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]


def _service(obj: dict) -> list[Cause]:
    spec = _map(obj.get("spec"))
    out: list[Cause] = []
    kind = spec.get("type")
    if kind is not None and kind not in _SERVICE_TYPES:
        out.append(fe.not_supported("spec.type", kind, _SERVICE_TYPES))
    ports = spec.get("ports") or []
    if not ports and kind != "ExternalName" and spec.get("clusterIP") != "None":
        out.append(fe.required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        port = port if isinstance(port, dict) else {}
        base = f"spec.ports[{i}]"
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            out.append(fe.required(f"{base}.name"))
        elif name:
            out += [fe.invalid(f"{base}.name", name, m) for m in is_dns1123_label(name)]
            if name in names:
                out.append(fe.duplicate(f"{base}.name", name))
            names.add(name)
        out += _port_range(f"{base}.port", port.get("port"))
        protocol = port.get("protocol")
        if protocol is not None and protocol not in _PROTOCOLS:
            out.append(fe.not_supported(f"{base}.protocol", protocol, _PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, int) and not isinstance(target, bool):
            out += _port_range(f"{base}.targetPort", target)
    out += _labels(spec.get("selector"), "spec.selector")
    return out


def _service_update(old: dict, new: dict) -> list[Cause]:
    old_ip = _map(old.get("spec")).get("clusterIP") or ""
    new_ip = _map(new.get("spec")).get("clusterIP") or ""
    if old_ip and new_ip and old_ip != new_ip:
        return [fe.invalid("spec.clusterIP", new_ip, IMMUTABLE)]
    return []


_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")
_CONFIG_KEY_MSG = regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
    "[-._a-zA-Z0-9]+",
    "key.name",
    "KEY_NAME",
    "key-name",
)


def _config_keys(obj: dict, fields: tuple[str, ...]) -> list[Cause]:
    out: list[Cause] = []
    seen: dict[str, str] = {}
    size = 0
    for section in fields:
        data = obj.get(section) or {}
        if not isinstance(data, dict):
            out.append(fe.type_invalid(section, data, "must be a map of string keys to string values"))
            continue
        for key, value in data.items():
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
            size += len(str(value))
    if size > _CONFIG_SIZE_LIMIT:
        out.append(fe.too_long("", _CONFIG_SIZE_LIMIT))
    return out


def _configmap(obj: dict) -> list[Cause]:
    return _config_keys(obj, ("data", "binaryData"))


def _secret(obj: dict) -> list[Cause]:
    return _config_keys(obj, ("data",))


def _immutable_data(old: dict, new: dict, fields: tuple[str, ...]) -> list[Cause]:
    if old.get("immutable") is not True:
        return []
    detail = "field is immutable when `immutable` is set"
    out: list[Cause] = []
    if new.get("immutable") is not True:
        out.append(fe.forbidden("immutable", detail))
    for key in fields:
        if not json_equal(_map(old.get(key)), _map(new.get(key))):
            out.append(fe.forbidden(key, detail))
    return out


def _configmap_update(old: dict, new: dict) -> list[Cause]:
    return _immutable_data(old, new, ("data", "binaryData"))


def _secret_update(old: dict, new: dict) -> list[Cause]:
    out = _immutable_data(old, new, ("data",))
    if (old.get("type") or "Opaque") != (new.get("type") or "Opaque"):
        out.append(fe.invalid("type", new.get("type") or "", IMMUTABLE))
    return out


def _event(obj: dict) -> list[Cause]:
    """Legacy (core/v1) event rules; events.k8s.io's stricter ones are applied by the server's view."""
    out: list[Cause] = []
    namespace = _map(obj.get("metadata")).get("namespace") or ""
    involved = _map(obj.get("involvedObject"))
    involved_ns = involved.get("namespace") or ""
    mismatch = fe.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not obj.get("eventTime"):
        if namespace != involved_ns and not (not involved_ns and namespace == "default"):
            out.append(mismatch)
        return out
    if not involved_ns and namespace not in ("default", "kube-system"):
        out.append(mismatch)
    component = obj.get("reportingComponent") or ""
    if not component:
        out.append(fe.required("reportingComponent"))
    out += [fe.invalid("reportingComponent", component, m) for m in is_qualified_name(component)]
    for key, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
        value = obj.get(key) or ""
        if not value:
            out.append(fe.required(key))
        elif len(value) > limit:
            out.append(fe.invalid(key, "", f"can have at most {limit} characters"))
    if len(obj.get("message") or "") > 1024:
        out.append(fe.invalid("message", "", "can have at most 1024 characters"))
    return out


def _lease(obj: dict) -> list[Cause]:
    spec = _map(obj.get("spec"))
    out: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and not (isinstance(duration, int) and duration > 0):
        out.append(fe.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and not (isinstance(transitions, int) and transitions >= 0):
        out.append(fe.invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
    return out


def _job(obj: dict) -> list[Cause]:
    spec = _map(obj.get("spec"))
    out: list[Cause] = []
    counters = (
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    )
    for key in counters:
        value = spec.get(key)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            out.append(fe.invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    template = spec.get("template")
    if not isinstance(template, dict):
        return [*out, fe.required("spec.template")]
    out += _labels(_map(template.get("metadata")).get("labels"), "spec.template.metadata.labels")
    pod_spec = template.get("spec")
    out += _pod_spec(pod_spec, "spec.template.spec", ["OnFailure", "Never"])
    if isinstance(pod_spec, dict) and pod_spec.get("restartPolicy") is None:
        out.append(fe.required("spec.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))
    return out


def _job_update(old: dict, new: dict) -> list[Cause]:
    old_spec, new_spec = _map(old.get("spec")), _map(new.get("spec"))
    out: list[Cause] = []
    for key in ("selector", "completions", "completionMode"):
        if key in old_spec and not json_equal(old_spec.get(key), new_spec.get(key)):
            out.append(fe.invalid(f"spec.{key}", new_spec.get(key), IMMUTABLE))
    if not json_equal(_significant(old_spec.get("template")), _significant(new_spec.get("template"))):
        out.append(fe.invalid("spec.template", new_spec.get("template"), IMMUTABLE))
    return out


def _crd(obj: dict) -> list[Cause]:
    return check_crd(obj)


def _crd_update(old: dict, new: dict) -> list[Cause]:
    old_spec, new_spec = _map(old.get("spec")), _map(new.get("spec"))
    return [
        fe.invalid(f"spec.{key}", new_spec.get(key) or "", IMMUTABLE)
        for key in ("scope", "group")
        if (old_spec.get(key) or "") != (new_spec.get(key) or "")
    ]


_CREATE_RULES: dict[str, Callable[[dict], list[Cause]]] = {
    "pods": _pod,
    "services": _service,
    "configmaps": _configmap,
    "secrets": _secret,
    "events": _event,
    "leases": _lease,
    "jobs": _job,
    "customresourcedefinitions": _crd,
}
_UPDATE_RULES: dict[str, Callable[[dict, dict], list[Cause]]] = {
    "pods": _pod_update,
    "services": _service_update,
    "configmaps": _configmap_update,
    "secrets": _secret_update,
    "jobs": _job_update,
    "customresourcedefinitions": _crd_update,
}
