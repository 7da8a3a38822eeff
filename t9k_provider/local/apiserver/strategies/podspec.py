"""The pod template every workload embeds: its defaults, validation and strategic merge fields.

Pods, Jobs and PodTemplates share it (so will Deployments, ReplicaSets, StatefulSets and DaemonSets), as
``pkg/apis/core/v1/defaults.go`` and ``ValidatePodSpec`` are shared upstream.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from t9k_provider.local.apiserver.generic.validation import (
    CONFIG_KEY,
    CONFIG_KEY_MSG,
    validate_labels,
    validate_port,
    validate_protocol,
)
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.names import (
    is_dns1123_label,
    is_qualified_name,
    name_is_dns_subdomain,
    regex_error,
)
from t9k_provider.local.machinery.quantity import QUANTITY_ERROR, parse_quantity
from t9k_provider.local.machinery.strategicpatch import OBJECT_META, MergeField

_CONTAINER_FIELDS: dict[str, MergeField] = {
    "ports": MergeField("merge", "containerPort"),
    "env": MergeField("merge", "name"),
    "volumeMounts": MergeField("merge", "mountPath"),
    "volumeDevices": MergeField("merge", "devicePath"),
}
POD_SPEC_FIELDS: dict[str, MergeField] = {
    "containers": MergeField("merge", "name", node=_CONTAINER_FIELDS),
    "initContainers": MergeField("merge", "name", node=_CONTAINER_FIELDS),
    "ephemeralContainers": MergeField("merge", "name", node=_CONTAINER_FIELDS),
    "imagePullSecrets": MergeField("merge", "name"),
    "volumes": MergeField("merge", "name"),
    "hostAliases": MergeField("merge", "ip"),
    "topologySpreadConstraints": MergeField("merge", "topologyKey"),
    "schedulingGates": MergeField("merge", "name"),
    "resourceClaims": MergeField("merge", "name"),
}
POD_TEMPLATE_FIELDS: dict[str, MergeField] = {
    "metadata": MergeField(node=OBJECT_META),
    "spec": MergeField(node=POD_SPEC_FIELDS),
}
RESTART_POLICIES = ["Always", "OnFailure", "Never"]


# ----------------------------------------------------------------------------------------- defaults


def items(value: Any) -> list[Any]:
    """A list field as a list; anything else (left for validation to report) as empty."""
    return value if isinstance(value, list) else []


def _image_pull_policy(image: str) -> str:
    last = (image or "").rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _default_container(c: dict[str, Any]) -> None:
    image = c.get("image")
    c.setdefault("imagePullPolicy", _image_pull_policy(image if isinstance(image, str) else ""))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for port in items(c.get("ports")):
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    res = c["resources"]
    if isinstance(res, dict) and isinstance(res.get("limits"), dict) and not res.get("requests"):
        res["requests"] = dict(res["limits"])


def default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for c in [*items(spec.get("containers")), *items(spec.get("initContainers"))]:
        if isinstance(c, dict):
            _default_container(c)


# ----------------------------------------------------------------------------------------- validation

_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*\Z")
_ENV_NAME_MSG = regex_error(
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
    "and must not start with a digit",
    "[-._a-zA-Z][-._a-zA-Z0-9]*",
    "my.env-name",
    "MY_ENV.NAME",
    "MyEnvName1",
)
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
        ref = decoding.object_field(source, key, f"{path}.{key}", out)
        if key == "fieldRef":
            _field_ref(ref, f"{path}.fieldRef", out)
        elif key == "resourceFieldRef":
            decoding.required_text(ref, "resource", f"{path}.resourceFieldRef.resource", out)
        else:
            key_name = decoding.required_text(ref, "key", f"{path}.{key}.key", out)
            if key_name and not CONFIG_KEY.match(key_name):
                out.append(fe.invalid(f"{path}.{key}.key", key_name, CONFIG_KEY_MSG))
    if not present:
        detail = "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
        out.append(fe.invalid(path, "", detail))
    elif value:
        out.append(fe.invalid(path, "", "may not be specified when `value` is not empty"))
    elif len(present) > 1:
        out.append(fe.invalid(path, "", "may not have more than one field specified at a time"))


def _field_ref(ref: dict, path: str, out: list[Cause]) -> None:
    field_path = decoding.required_text(ref, "fieldPath", f"{path}.fieldPath", out)
    if not field_path:
        return
    subscript = _SUBSCRIPT.match(field_path)
    if subscript is not None:
        key = subscript.group(2)
        out += [fe.invalid(f"{path}.fieldPath", key, m) for m in is_qualified_name(key.lower())]
    elif field_path not in _ENV_FIELD_PATHS or field_path in ("metadata.labels", "metadata.annotations"):
        supported = [p for p in _ENV_FIELD_PATHS if p not in ("metadata.labels", "metadata.annotations")]
        out.append(fe.not_supported(f"{path}.fieldPath", field_path, supported))


def _container(base: str, c: dict, volumes: set[str], seen: set[str], out: list[Cause]) -> None:
    name = decoding.required_text(c, "name", f"{base}.name", out)
    if name:
        out += [fe.invalid(f"{base}.name", name, m) for m in is_dns1123_label(name)]
        if name in seen:
            out.append(fe.duplicate(f"{base}.name", name))
        seen.add(name)
    decoding.required_text(c, "image", f"{base}.image", out)
    decoding.string_items(c, "command", f"{base}.command", out)
    decoding.string_items(c, "args", f"{base}.args", out)
    for env_path, env in decoding.object_items(c, "env", f"{base}.env", out):
        env_name = decoding.required_text(env, "name", f"{env_path}.name", out)
        if env_name and not _ENV_NAME.match(env_name):
            out.append(fe.invalid(f"{env_path}.name", env_name, _ENV_NAME_MSG))
        value = decoding.text_field(env, "value", f"{env_path}.value", out)
        if env.get("valueFrom") is not None:
            source = decoding.object_field(env, "valueFrom", f"{env_path}.valueFrom", out)
            _env_source(source, value, f"{env_path}.valueFrom", out)
    port_names: set[str] = set()
    for port_path, port in decoding.object_items(c, "ports", f"{base}.ports", out):
        validate_port(port, "containerPort", f"{port_path}.containerPort", out)
        port_name = decoding.text_field(port, "name", f"{port_path}.name", out)
        if port_name:
            if port_name in port_names:
                out.append(fe.duplicate(f"{port_path}.name", port_name))
            port_names.add(port_name)
        validate_protocol(port, f"{port_path}.protocol", out)
    _resources(decoding.object_field(c, "resources", f"{base}.resources", out), f"{base}.resources", out)
    for mount_path, mount in decoding.object_items(c, "volumeMounts", f"{base}.volumeMounts", out):
        mount_name = decoding.required_text(mount, "name", f"{mount_path}.name", out)
        if mount_name and mount_name not in volumes:
            out.append(fe.not_found(f"{mount_path}.name", mount_name))
        decoding.required_text(mount, "mountPath", f"{mount_path}.mountPath", out)


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
    limits = _quantities(
        decoding.object_field(resources, "limits", f"{path}.limits", out), f"{path}.limits", out
    )
    requests = _quantities(
        decoding.object_field(resources, "requests", f"{path}.requests", out), f"{path}.requests", out
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
        source = decoding.object_field(volume, key, f"{path}.{key}", out)
        needed = _VOLUME_REQUIRED.get(key)
        if needed:
            decoding.required_text(source, needed, f"{path}.{key}.{needed}", out)
        for item_path, item in decoding.object_items(source, "items", f"{path}.{key}.items", out):
            # configMap/secret items name a key; downwardAPI items name a field instead
            if key != "downwardAPI":
                decoding.required_text(item, "key", f"{item_path}.key", out)
            decoding.required_text(item, "path", f"{item_path}.path", out)


def validate_pod_spec(
    spec: dict, path: str, out: list[Cause], restart_policies: list[str] = RESTART_POLICIES
) -> None:
    volumes: set[str] = set()
    for volume_path, volume in decoding.object_items(spec, "volumes", f"{path}.volumes", out):
        vname = decoding.required_text(volume, "name", f"{volume_path}.name", out)
        if not vname:
            continue
        out += [fe.invalid(f"{volume_path}.name", vname, m) for m in is_dns1123_label(vname)]
        if vname in volumes:
            out.append(fe.duplicate(f"{volume_path}.name", vname))
        volumes.add(vname)
        _volume_source(volume, volume_path, out)
    containers = decoding.object_items(spec, "containers", f"{path}.containers", out)
    if not spec.get("containers"):
        out.append(fe.required(f"{path}.containers"))
    seen: set[str] = set()
    for base, c in decoding.object_items(spec, "initContainers", f"{path}.initContainers", out) + containers:
        _container(base, c, volumes, seen, out)
    policy = decoding.text_field(spec, "restartPolicy", f"{path}.restartPolicy", out)
    if policy and policy not in restart_policies:
        out.append(fe.not_supported(f"{path}.restartPolicy", policy, restart_policies))
    deadline = decoding.int_field(spec, "activeDeadlineSeconds", f"{path}.activeDeadlineSeconds", out)
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        detail = "must be between 1 and 2147483647, inclusive"
        out.append(fe.invalid(f"{path}.activeDeadlineSeconds", deadline, detail))
    decoding.int_field(spec, "terminationGracePeriodSeconds", f"{path}.terminationGracePeriodSeconds", out)
    for key in ("hostname", "subdomain"):
        value = decoding.text_field(spec, key, f"{path}.{key}", out)
        if value:
            out += [fe.invalid(f"{path}.{key}", value, m) for m in is_dns1123_label(value)]
    account = decoding.text_field(spec, "serviceAccountName", f"{path}.serviceAccountName", out)
    if account:
        out += [
            fe.invalid(f"{path}.serviceAccountName", account, m)
            for m in name_is_dns_subdomain(account, False)
        ]
    validate_labels(spec, "nodeSelector", f"{path}.nodeSelector", out)
