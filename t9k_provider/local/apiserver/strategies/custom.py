"""Custom resources: the strategy of one served version of a CRD, made from its schema and subresources."""

from __future__ import annotations

import re
from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.strategies import queueadmission
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.jsonvalues import json_copy
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age
from t9k_provider.local.machinery.schema import apply_defaults, prune
from t9k_provider.local.machinery.schema import validate as validate_schema
from t9k_provider.local.machinery.transitions import transition_causes
from t9k_provider.local.storage.store import Store


class CustomResourceStrategy(Strategy):
    """apiextensions' ``customResourceStrategy``: pruning, defaulting and validation by the version's
    ``openAPIV3Schema``, status and scale as the CRD declares them, printer columns for kubectl."""

    custom = True
    tracks_generation = True
    merge_fields = None

    def __init__(self, version: dict[str, Any], namespaced: bool, api_version: str, kind: str) -> None:
        sub = version.get("subresources") or {}
        self.namespaced = namespaced
        self.subresources = tuple(s for s in ("status", "scale") if s in sub)
        self.scale = sub.get("scale")
        self.schema: dict[str, Any] | None = (version.get("schema") or {}).get("openAPIV3Schema")
        self.printer_columns: list[dict[str, Any]] = list(version.get("additionalPrinterColumns") or ())
        self.columns = self._columns()
        self.api_version, self.kind = api_version, kind

    def to_version(self, obj: dict[str, Any], res: Resource) -> dict[str, Any]:
        if obj.get("apiVersion") != res.group_version:
            return {**obj, "apiVersion": res.group_version}
        return obj

    def prepare_for_create(self, obj: dict[str, Any], store: Store) -> None:
        queueadmission.admit(obj, self.api_version, self.kind, store)
        if self.status_subresource:
            obj.pop("status", None)

    def prepare_for_status_update(self, new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        """Only the status changes through /status: everything else is the stored object's."""
        result = json_copy(old)
        if "status" in new:
            result["status"] = new["status"]
        else:
            result.pop("status", None)
        return result

    def canonicalize(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.schema:
            obj = apply_defaults(self.schema, prune(self.schema, obj))
            obj["apiVersion"], obj["kind"] = self.api_version, self.kind
        return super().canonicalize(obj)

    def unknown_fields(self, obj: dict[str, Any]) -> list[str]:
        """What the schema would prune: ``fieldValidation=Strict`` makes it a 400 instead of a silent drop."""
        return _dropped_fields(obj, prune(self.schema, obj), "") if self.schema else []

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        if self.schema:
            out += validate_schema(self.schema, obj)

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        """The schema's transition rules (``self == oldSelf``), which only an update can break."""
        if self.schema:
            out += transition_causes(self.schema, old, new)

    def _columns(self) -> list[dict[str, Any]]:
        if not self.printer_columns:
            return [NAME_COLUMN, AGE_COLUMN]
        cols = [NAME_COLUMN]
        for c in self.printer_columns:
            cols.append(
                {
                    "name": c["name"],
                    "type": "string" if c.get("type") == "date" else c.get("type", "string"),
                    "format": c.get("format", ""),
                    "description": c.get("description", ""),
                    "priority": c.get("priority", 0),
                }
            )
        if not any(c["name"] == "Age" for c in self.printer_columns):
            cols.append(AGE_COLUMN)
        return cols

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        meta = obj["metadata"]
        if not self.printer_columns:
            return [meta["name"], age(meta.get("creationTimestamp"))]
        cells = [meta["name"], *(_printer_cell(obj, c) for c in self.printer_columns)]
        if not any(c["name"] == "Age" for c in self.printer_columns):
            cells.append(age(meta.get("creationTimestamp")))
        return cells


def resources_from_crd(crd: dict[str, Any]) -> list[Resource]:
    """The resources an Established CRD serves, one per served version, named by ``status.acceptedNames``."""
    spec = crd.get("spec") or {}
    names = (crd.get("status") or {}).get("acceptedNames") or spec.get("names") or {}
    group = spec["group"]
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    served = []
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        api_version = f"{group}/{version['name']}"
        served.append(
            Resource(
                group,
                version["name"],
                names["plural"],
                names.get("singular") or names["kind"].lower(),
                names["kind"],
                CustomResourceStrategy(version, namespaced, api_version, names["kind"]),
                short_names=list(names.get("shortNames") or ()),
                categories=list(names.get("categories") or ()),
            )
        )
    return served


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
        return age(value)
    if isinstance(value, (dict, list)):
        return str(value)
    return value


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
