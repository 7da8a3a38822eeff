"""Server-side ``Table`` output for kubectl (spec TB1): default columns, pods, CRD printer columns."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from t9k_provider.local.apiserver.resources import Resource

_NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace.",
    "priority": 0,
}
_AGE_COLUMN = {
    "name": "Age",
    "type": "string",
    "format": "",
    "description": "CreationTimestamp is the time the object was created.",
    "priority": 0,
}


def wants_table(accept: str) -> bool:
    return "as=table" in accept.replace(" ", "").lower()


def human_duration(seconds: float) -> str:
    """The short ages kubectl prints (apimachinery ``duration.HumanDuration``)."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        created = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return "<invalid>"
    return human_duration((datetime.now(timezone.utc) - created).total_seconds())


_STEP = re.compile(
    r"\.([A-Za-z0-9_\-/]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]"
)


def json_path(obj: Any, path: str) -> list[Any]:
    """Evaluate the JSONPath subset printer columns use: ``.a.b``, ``[0]``, ``[?(@.type=="Ready")]``."""
    values = [obj]
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    pos = 0
    while pos < len(text) and values:
        match = _STEP.match(text, pos)
        if match is None:
            return []
        pos = match.end()
        field, index, filter_key, filter_value = match.groups()
        nxt: list[Any] = []
        for v in values:
            if field is not None and isinstance(v, dict) and field in v:
                nxt.append(v[field])
            elif index is not None and isinstance(v, list) and int(index) < len(v):
                nxt.append(v[int(index)])
            elif filter_key is not None and isinstance(v, list):
                for item in v:
                    probe = json_path(item, "." + filter_key)
                    if probe and str(probe[0]) == filter_value:
                        nxt.append(item)
        values = nxt
    return values


def _printer_cell(obj: dict[str, Any], column: dict[str, Any]) -> Any:
    found = json_path(obj, column.get("jsonPath", ""))
    if not found:
        return None
    value = found[0]
    if column.get("type") == "date" and isinstance(value, str):
        return _age(value)
    if isinstance(value, (dict, list)):
        return str(value)
    return value


def _pod_cells(pod: dict[str, Any]) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for s in status.get("initContainerStatuses") or []:
        state = s.get("state") or {}
        if "terminated" in state and state["terminated"].get("exitCode") == 0:
            continue
        if "waiting" in state or "running" in state or "terminated" in state:
            reason = "Init:" + (
                (state.get("waiting") or state.get("terminated") or {}).get("reason") or "0/1"
            )
            break
    else:
        for s in reversed(statuses):
            state = s.get("state") or {}
            if state.get("waiting", {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated", {}).get("reason"):
                reason = state["terminated"]["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        reason,
        restarts,
        _age(pod["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
    ]


def _col(name: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": kind, "format": "", "description": name, "priority": priority}


def _namespace_cells(ns: dict[str, Any]) -> list[Any]:
    meta = ns["metadata"]
    return [meta["name"], (ns.get("status") or {}).get("phase", ""), _age(meta.get("creationTimestamp"))]


def _node_cells(node: dict[str, Any]) -> list[Any]:
    meta, status = node["metadata"], node.get("status") or {}
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), {})
    roles = sorted(
        k.rsplit("/", 1)[1] for k in meta.get("labels") or {} if k.startswith("node-role.kubernetes.io/")
    )
    return [
        meta["name"],
        "Ready" if ready.get("status") == "True" else "NotReady",
        ",".join(roles) or "<none>",
        _age(meta.get("creationTimestamp")),
        (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
    ]


def _service_cells(svc: dict[str, Any]) -> list[Any]:
    meta, spec = svc["metadata"], svc.get("spec") or {}
    ports = ",".join(
        f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or () if isinstance(p, dict)
    )
    return [
        meta["name"],
        spec.get("type", ""),
        spec.get("clusterIP") or "<none>",
        "<none>",
        ports or "<none>",
        _age(meta.get("creationTimestamp")),
    ]


def _event_cells(event: dict[str, Any]) -> list[Any]:
    involved = event.get("involvedObject") or {}
    last = event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    subject = f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"
    return [
        _age(_whole_seconds(last)),
        event.get("type", ""),
        event.get("reason", ""),
        subject,
        event.get("message", ""),
        event["metadata"]["name"],
    ]


def _job_cells(job: dict[str, Any]) -> list[Any]:
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    state = (
        "Complete"
        if conditions.get("Complete") == "True"
        else ("Failed" if conditions.get("Failed") == "True" else "Running")
    )
    return [
        meta["name"],
        state,
        f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}",
        _age(meta.get("creationTimestamp")),
    ]


def _whole_seconds(stamp: Any) -> str | None:
    return stamp[:19] + "Z" if isinstance(stamp, str) and len(stamp) >= 19 else None


_BUILTIN: dict[tuple[str, str], tuple[list[dict[str, Any]], Callable[[dict[str, Any]], list[Any]]]] = {
    ("", "pods"): (
        [
            _NAME_COLUMN,
            _col("Ready"),
            _col("Status"),
            _col("Restarts", "integer"),
            _AGE_COLUMN,
            _col("IP", priority=1),
            _col("Node", priority=1),
        ],
        _pod_cells,
    ),
    ("", "namespaces"): ([_NAME_COLUMN, _col("Status"), _AGE_COLUMN], _namespace_cells),
    ("", "nodes"): ([_NAME_COLUMN, _col("Status"), _col("Roles"), _AGE_COLUMN, _col("Version")], _node_cells),
    ("", "services"): (
        [_NAME_COLUMN, _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), _AGE_COLUMN],
        _service_cells,
    ),
    ("", "events"): (
        [
            _col("Last Seen"),
            _col("Type"),
            _col("Reason"),
            _col("Object"),
            _col("Message"),
            _col("Name", priority=1),
        ],
        _event_cells,
    ),
    ("batch", "jobs"): ([_NAME_COLUMN, _col("Status"), _col("Completions"), _AGE_COLUMN], _job_cells),
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        [_NAME_COLUMN, _col("Created At", "date")],
        lambda crd: [crd["metadata"]["name"], crd["metadata"].get("creationTimestamp")],
    ),
}


def _columns(res: Resource) -> list[dict[str, Any]]:
    builtin = None if res.custom else _BUILTIN.get((res.group, res.plural))
    if builtin is not None:
        return builtin[0]
    if res.printer_columns:
        cols = [_NAME_COLUMN]
        for c in res.printer_columns:
            cols.append(
                {
                    "name": c["name"],
                    "type": "string" if c.get("type") == "date" else c.get("type", "string"),
                    "format": c.get("format", ""),
                    "description": c.get("description", ""),
                    "priority": c.get("priority", 0),
                }
            )
        if not any(c["name"] == "Age" for c in res.printer_columns):
            cols.append(_AGE_COLUMN)
        return cols
    return [_NAME_COLUMN, _AGE_COLUMN]


def _cells(res: Resource, obj: dict[str, Any]) -> list[Any]:
    builtin = None if res.custom else _BUILTIN.get((res.group, res.plural))
    if builtin is not None:
        return builtin[1](obj)
    meta = obj["metadata"]
    if res.printer_columns:
        cells = [meta["name"], *(_printer_cell(obj, c) for c in res.printer_columns)]
        if not any(c["name"] == "Age" for c in res.printer_columns):
            cells.append(_age(meta.get("creationTimestamp")))
        return cells
    return [meta["name"], _age(meta.get("creationTimestamp"))]


def _row(res: Resource, obj: dict[str, Any], include_object: str) -> dict[str, Any]:
    if include_object == "Object":
        embedded = obj
    elif include_object == "None":
        embedded = None
    else:
        embedded = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        }
    row: dict[str, Any] = {"cells": _cells(res, obj)}
    if embedded is not None:
        row["object"] = embedded
    return row


def table(
    res: Resource,
    objects: list[dict[str, Any]],
    resource_version: str,
    include_object: str,
    continue_token: str = "",
    with_columns: bool = True,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": _columns(res) if with_columns else [],
        "rows": [_row(res, o, include_object) for o in objects],
    }
