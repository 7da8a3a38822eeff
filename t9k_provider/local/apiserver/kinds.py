"""Per-kind create defaults and views of built-in kinds, as the real registry strategies apply them."""

from __future__ import annotations

import ipaddress
import platform
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

NODE_NAME = "t9k-local-node"
BOOT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/16")


def now_time() -> str:
    """``metav1.Time``: RFC 3339, UTC, whole seconds."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime | None:
    text = value.strip()
    if text.endswith("Z") or text.endswith("z"):
        text = text[:-1] + "+00:00"
    match = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
    if not match:
        return None
    frac = (match.group(2) or ".0")[1:][:6].ljust(6, "0")
    try:
        parsed = datetime.fromisoformat(f"{match.group(1)}.{frac}{match.group(3)}")
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def normalize_time(value: Any, micro: bool) -> Any:
    """Re-serialise a timestamp as the real server does (``Time``: whole seconds; ``MicroTime``: 6 digits)."""
    if not isinstance(value, str):
        return value
    parsed = parse_time(value)
    if parsed is None:
        return value
    if micro:
        return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return parsed.strftime("%Y-%m-%dT%H:%M:%SZ")


def _normalize_fields(obj: dict[str, Any], times: tuple[str, ...], micro_times: tuple[str, ...]) -> None:
    for path, micro in [*((p, False) for p in times), *((p, True) for p in micro_times)]:
        *parents, leaf = path.split(".")
        node: Any = obj
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(leaf) is not None:
            node[leaf] = normalize_time(node[leaf], micro)


def normalize_timestamps(plural: str, obj: dict[str, Any]) -> None:
    _normalize_fields(obj, ("metadata.creationTimestamp", "metadata.deletionTimestamp"), ())
    if plural == "events":
        _normalize_fields(obj, ("firstTimestamp", "lastTimestamp"), ("eventTime", "series.lastObservedTime"))
    elif plural == "leases":
        _normalize_fields(obj, (), ("spec.acquireTime", "spec.renewTime"))


# -- pods ----------------------------------------------------------------------------------------------------


def _items(value: Any) -> list[Any]:
    """A list field as a list; anything else (left for validation to report) as empty."""
    return value if isinstance(value, list) else []


def _image_pull_policy(image: str) -> str:
    last = (image or "").rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _qos_class(spec: dict[str, Any]) -> str:
    containers = [*_items(spec.get("containers")), *_items(spec.get("initContainers"))]
    requests_seen = limits_seen = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") if isinstance(c, dict) else None
        res = res if isinstance(res, dict) else {}
        requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
        limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
        requests_seen = requests_seen or bool(requests)
        limits_seen = limits_seen or bool(limits)
        for r in ("cpu", "memory"):
            if r not in limits or requests.get(r, limits[r]) != limits[r]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_container(c: dict[str, Any]) -> None:
    image = c.get("image")
    c.setdefault("imagePullPolicy", _image_pull_policy(image if isinstance(image, str) else ""))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for port in _items(c.get("ports")):
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
    for c in [*_items(spec.get("containers")), *_items(spec.get("initContainers"))]:
        if isinstance(c, dict):
            _default_container(c)


def prepare_pod(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    if isinstance(spec, dict):
        default_pod_spec(spec)
        pod["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}


# -- services ------------------------------------------------------------------------------------------------


def prepare_service(svc: dict[str, Any], used_ips: set[str]) -> None:
    spec = svc.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in _items(spec.get("ports")):
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
        for ip in SERVICE_CIDR.hosts():
            if str(ip) != "10.96.0.1" and str(ip) not in used_ips:  # .1 is the `kubernetes` service's
                spec["clusterIP"] = str(ip)
                break
    if spec.get("clusterIP"):
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    svc["status"] = {"loadBalancer": {}}


# -- namespaces, nodes, jobs, service accounts ---------------------------------------------------------------


def prepare_namespace(ns: dict[str, Any]) -> None:
    meta = ns["metadata"]
    labels = meta.setdefault("labels", {})
    if isinstance(labels, dict):  # anything else is left for validation to report
        labels["kubernetes.io/metadata.name"] = meta.get("name", "")
    ns["spec"] = {"finalizers": ["kubernetes"]}
    ns["status"] = {"phase": "Active"}


def prepare_job(job: dict[str, Any]) -> None:
    spec = job.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    uid = job["metadata"].get("uid", "")
    name = job["metadata"].get("name", "")
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        tmeta = template.setdefault("metadata", {})
        tlabels = tmeta.setdefault("labels", {}) if isinstance(tmeta, dict) else None
        if isinstance(tlabels, dict):
            tlabels.update(labels)
        tspec = template.setdefault("spec", {})
        if isinstance(tspec, dict):
            default_pod_spec(tspec)
    job["status"] = {}


def boot_namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def default_service_account(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    }


def _read_id(path: str) -> str:
    try:
        return Path(path).read_text().strip() or "t9k-local"
    except OSError:
        return "t9k-local"


def local_node(cpus: int, memory_bytes: int) -> dict[str, Any]:
    now = now_time()
    capacity = {"cpu": str(cpus), "memory": f"{memory_bytes // 1024}Ki", "pods": "110"}
    conditions = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "t9k-local kubelet is ready",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        },
        *(
            {
                "type": t,
                "status": "False",
                "reason": f"KubeletHas{r}",
                "message": "",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            for t, r in (
                ("MemoryPressure", "SufficientMemory"),
                ("DiskPressure", "NoDiskPressure"),
                ("PIDPressure", "SufficientPID"),
            )
        ),
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "labels": {
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/control-plane": "",
            },
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": NODE_NAME},
            ],
            "nodeInfo": {
                "machineID": _read_id("/etc/machine-id"),
                "systemUUID": _read_id("/etc/machine-id"),
                "bootID": _read_id("/proc/sys/kernel/random/boot_id"),
                "kernelVersion": platform.release(),
                "osImage": platform.platform(),
                "kubeProxyVersion": "v1.32.0-t9k-local",
                "kubeletVersion": "v1.32.0-t9k-local",
                "operatingSystem": "linux",
                "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                    platform.machine(), platform.machine()
                ),
                "containerRuntimeVersion": "t9k-local://process",
            },
        },
    }


# -- events: the events.k8s.io/v1 view of core events ---------------------------------------------------

_EVENT_RENAMES = [  # (core field, events.k8s.io field)
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
]


def event_to_v1(core: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in core.items() if k not in {c for c, _ in _EVENT_RENAMES}}
    for c, e in _EVENT_RENAMES:
        if core.get(c) not in (None, "", {}, 0):
            out[e] = core[c]
    out["apiVersion"] = "events.k8s.io/v1"
    out["kind"] = "Event"
    return out


def event_from_v1(event: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in event.items() if k not in {e for _, e in _EVENT_RENAMES}}
    for c, e in _EVENT_RENAMES:
        if e in event:
            out[c] = event[e]
    out["apiVersion"] = "v1"
    out["kind"] = "Event"
    return out


def events_v1_causes(event: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The strict checks events.k8s.io/v1 adds on create: (reason, field, message) triples."""
    causes = []
    if not event.get("eventTime"):
        causes.append(("FieldValueRequired", "eventTime", "Required value"))
    if event.get("type") not in ("Normal", "Warning"):
        causes.append(
            (
                "FieldValueInvalid",
                "type",
                f'Invalid value: "{event.get("type", "")}": has invalid value: {event.get("type", "")}',
            )
        )
    for f in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedSource"):
        if event.get(f):
            causes.append(("FieldValueInvalid", f, 'Invalid value: "": needs to be unset'))
    if event.get("deprecatedCount"):
        causes.append(("FieldValueInvalid", "deprecatedCount", 'Invalid value: "": needs to be unset'))
    return causes
