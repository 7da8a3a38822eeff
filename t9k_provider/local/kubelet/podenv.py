"""Pod spec -> process: environment, `$(VAR)` expansion and argv, as the real kubelet computes them."""

from __future__ import annotations

import base64
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

DEFAULT_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
POD_PATH_ENV = "T9K_LOCAL_POD_PATH"
# An env var name as Kubernetes accepts it for envFrom (C identifiers plus `-` and `.`).
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_FIELD_LABEL = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class ContainerConfigError(Exception):
    """The container cannot be configured (missing ConfigMap/Secret key...): `CreateContainerConfigError`."""


def pod_path() -> str:
    """PATH for pods: the cluster's interpreter directory first, unless `T9K_LOCAL_POD_PATH` is set."""
    override = os.environ.get(POD_PATH_ENV)
    if override:
        return override
    return f"{os.path.dirname(sys.executable)}:{DEFAULT_SYSTEM_PATH}"


def expand(template: str, lookup: Callable[[str], str | None]) -> str:
    """Kubernetes `$(VAR)` expansion: unknown references stay as written, `$$` escapes a `$`."""
    out: list[str] = []
    i, n = 0, len(template)
    while i < n:
        ch = template[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = template[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = template.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
                continue
            name = template[i + 2 : close]
            value = lookup(name)
            out.append(f"$({name})" if value is None else value)
            i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


@dataclass
class PodContext:
    """What env resolution needs besides the pod: referenced objects and runtime facts."""

    configmaps: Mapping[str, dict] = field(default_factory=dict)
    secrets: Mapping[str, dict] = field(default_factory=dict)
    pod_ip: str = ""
    host_ip: str = ""


def object_bytes(obj: dict, *, secret: bool) -> dict[str, bytes]:
    """Key -> bytes of a ConfigMap (data + binaryData) or Secret (base64 data + stringData)."""
    if secret:
        out = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        out.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
    else:
        out = {k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()}
        out.update({k: v.encode() for k, v in (obj.get("data") or {}).items()})
    return out


def object_data(obj: dict, *, secret: bool) -> dict[str, str]:
    return {k: v.decode("utf-8", "replace") for k, v in object_bytes(obj, secret=secret).items()}


def referenced_names(pod: dict) -> tuple[set[str], set[str]]:
    """ConfigMap and Secret names the pod refers to in env, envFrom and volumes."""
    spec = pod.get("spec") or {}
    # (a holder, its ConfigMap key, its Secret key, the Secret's name field)
    refs: list[tuple[dict, str, str, str]] = []
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        refs += [(src, "configMapRef", "secretRef", "name") for src in c.get("envFrom") or []]
        refs += [
            (env.get("valueFrom") or {}, "configMapKeyRef", "secretKeyRef", "name")
            for env in c.get("env") or []
        ]
    for vol in spec.get("volumes") or []:
        refs.append((vol, "configMap", "secret", "secretName"))
        refs += [
            (src, "configMap", "secret", "name") for src in (vol.get("projected") or {}).get("sources") or []
        ]
    cms = {holder[cm]["name"] for holder, cm, _, _ in refs if cm in holder}
    secrets = {holder[secret][key] for holder, _, secret, key in refs if secret in holder}
    return cms, secrets


def field_ref(pod: dict, path: str, ctx: PodContext) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": ctx.pod_ip,
        "status.podIPs": ctx.pod_ip,
        "status.hostIP": ctx.host_ip,
        "status.hostIPs": ctx.host_ip,
    }
    if path in simple:
        return simple[path]
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    m = _FIELD_LABEL.match(path)
    if m:
        return (meta.get(m.group(1)) or {}).get(m.group(2), "")
    raise ContainerConfigError(f"unsupported fieldRef fieldPath: {path!r}")


def _key_ref(kind: str, ref: dict, objects: Mapping[str, dict], env_name: str) -> str | None:
    name, key, optional = ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional"))
    obj = objects.get(name)
    if obj is None:
        if optional:
            return None
        raise ContainerConfigError(f'{kind} "{name}" not found (env {env_name})')
    data = object_data(obj, secret=kind == "secret")
    if key not in data:
        if optional:
            return None
        raise ContainerConfigError(f"couldn't find key {key} in {kind} {name} (env {env_name})")
    return data[key]


def container_env(pod: dict, container: dict, ctx: PodContext) -> dict[str, str]:
    """The variables the pod spec defines: envFrom, then env (each `$(VAR)`-expanded in order).

    The process gets `ctx.base_env` overlaid with these; `$(VAR)` references only see these, as in Kubernetes.
    """
    defined: dict[str, str] = {}
    for src in container.get("envFrom") or []:
        prefix = src.get("prefix", "")
        if "configMapRef" in src:
            ref, objects, kind = src["configMapRef"], ctx.configmaps, "configmap"
        elif "secretRef" in src:
            ref, objects, kind = src["secretRef"], ctx.secrets, "secret"
        else:
            continue
        obj = objects.get(ref.get("name", ""))
        if obj is None:
            if ref.get("optional"):
                continue
            raise ContainerConfigError(f'{kind} "{ref.get("name")}" not found (envFrom)')
        for key, value in object_data(obj, secret=kind == "secret").items():
            if _ENV_NAME.match(prefix + key):
                defined[prefix + key] = value
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" in item:
            vf = item["valueFrom"]
            if "fieldRef" in vf:
                value: str | None = field_ref(pod, vf["fieldRef"]["fieldPath"], ctx)
            elif "configMapKeyRef" in vf:
                value = _key_ref("configmap", vf["configMapKeyRef"], ctx.configmaps, name)
            elif "secretKeyRef" in vf:
                value = _key_ref("secret", vf["secretKeyRef"], ctx.secrets, name)
            elif "resourceFieldRef" in vf:
                value = resource_field(container, vf["resourceFieldRef"])
            else:
                raise ContainerConfigError(f"env {name}: unsupported valueFrom {sorted(vf)}")
            if value is None:
                continue
        else:
            value = expand(item.get("value", ""), lambda ref: defined.get(ref))
        defined[name] = value
    return defined


def resource_field(container: dict, ref: dict) -> str:
    section, _, name = ref.get("resource", "").partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(name)
    return str(value) if value is not None else "0"


def container_argv(container: dict, env: Mapping[str, str]) -> list[str]:
    """command + args with `$(VAR)` expanded against the variables from `container_env`."""
    parts = list(container.get("command") or []) + list(container.get("args") or [])
    return [expand(str(p), env.get) for p in parts]
