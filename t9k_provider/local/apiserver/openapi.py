"""OpenAPI v3 documents (``/openapi/v3`` and one per group/version), for ``kubectl explain`` and validation.

Built-in kinds' schemas are generated from kubernetes_asyncio's models (a base dependency generated from the
Kubernetes OpenAPI spec: each model's ``openapi_types`` and ``attribute_map`` give the fields, its property
docstrings the descriptions, its setters' ``must not be None`` checks the required fields). Custom resources'
schemas are their CRD version's ``openAPIV3Schema`` with ``metadata`` pointing at ObjectMeta, as
apiextensions-apiserver publishes them.

kubectl 1.2x validates on the server (``fieldValidation=Strict``) when a group/version's PATCH operation lists
that query parameter. The PATCH bodies listed are JSON and merge patches only: a document whose PATCH takes
``application/strategic-merge-patch+json`` would make ``kubectl apply`` compute strategic patches from these
schemas, which carry no ``x-kubernetes-patch-merge-key`` (the models do not have it).
"""

from __future__ import annotations

import functools
import importlib
import re
from types import ModuleType
from typing import Any

from t9k_provider.local.apiserver.discovery import KUBERNETES_VERSION
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.served import ServedResources

_MODEL_NAME = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:(?:alpha|beta)\d+)?)([A-Z]\w*)$")
_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(str, (.+)\)$")
_PRIMITIVES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int64"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "object": {"x-kubernetes-preserve-unknown-fields": True},
}
_PATCH_PARAMETERS = [
    {"name": name, "in": "query", "schema": {"type": "string"}}
    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
]
OBJECT_META = "V1ObjectMeta"


def schema_name(model: str) -> str:
    """``V1ObjectMeta`` -> ``io.k8s.api.v1.ObjectMeta``, ``RbacV1Subject`` -> ``io.k8s.api.rbac.v1.Subject``:
    kubectl explain shows the part after the last dot, as for kube-apiserver's names."""
    match = _MODEL_NAME.match(model)
    if match is None:
        return f"io.k8s.api.{model}"
    prefix, version, kind = match.groups()
    group = f"{prefix.lower()}." if prefix else ""
    return f"io.k8s.api.{group}{version.lower()}.{kind}"


def _ref(model: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{schema_name(model)}"}


def _description(prop: property) -> str:
    """The middle paragraph of a generated getter's docstring (the field's description)."""
    paragraphs = [p.strip() for p in (prop.__doc__ or "").split("\n\n")]
    text = paragraphs[1] if len(paragraphs) > 2 else ""
    return text.replace("  # noqa: E501", "").strip()


def _required(cls: type, attr: str) -> bool:
    setter = getattr(cls, attr).fset
    check = f"Invalid value for `{attr}`, must not be `None`"
    return setter is not None and check in setter.__code__.co_consts


def _type_schema(type_name: str, refs: set[str]) -> dict[str, Any]:
    if type_name in _PRIMITIVES:
        return dict(_PRIMITIVES[type_name])
    if match := _LIST.match(type_name):
        return {"type": "array", "items": _type_schema(match.group(1), refs)}
    if match := _DICT.match(type_name):
        return {"type": "object", "additionalProperties": _type_schema(match.group(1), refs)}
    refs.add(type_name)
    return {"allOf": [_ref(type_name)], "default": {}}


@functools.cache
def _models() -> ModuleType:
    """kubernetes_asyncio's models, imported when a document is first asked for: every API server started
    would otherwise pay their import (0.3 s of CPU) though most are never asked."""
    return importlib.import_module("kubernetes_asyncio.client.models")


@functools.cache
def _model_schema(model: str) -> tuple[dict[str, Any], frozenset[str]]:
    """One model's schema and the models it refers to."""
    cls = getattr(_models(), model)
    refs: set[str] = set()
    properties: dict[str, Any] = {}
    required = []
    for attr, type_name in cls.openapi_types.items():
        field = cls.attribute_map[attr]
        prop = _type_schema(type_name, refs)
        if description := _description(getattr(cls, attr)):
            prop["description"] = description
        properties[field] = prop
        if _required(cls, attr):
            required.append(field)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema, frozenset(refs)


def builtin_model(group: str, version: str, kind: str) -> str | None:
    """The kubernetes_asyncio model of a built-in kind (``CoreV1Event`` for core Events, ``V1Pod`` ...)."""
    prefix = (group.split(".")[0] or "core").capitalize()
    models = _models()
    for name in (f"{prefix}{version.capitalize()}{kind}", f"{version.capitalize()}{kind}"):
        if hasattr(models, name) and hasattr(getattr(models, name), "openapi_types"):
            return name
    return None


def _add_models(schemas: dict[str, Any], roots: list[str]) -> None:
    pending = list(roots)
    while pending:
        model = pending.pop()
        name = schema_name(model)
        if name in schemas:
            continue
        schema, refs = _model_schema(model)
        schemas[name] = schema
        pending.extend(refs)


def _gvk(res: Resource) -> dict[str, Any]:
    gvk = {"group": res.group, "version": res.version, "kind": res.kind}
    return {"x-kubernetes-group-version-kind": [gvk]}


def _custom_schema(res: Resource) -> dict[str, Any]:
    """A CR's published schema: its CRD version's, with ObjectMeta and described apiVersion and kind."""
    schema = dict(getattr(res.strategy, "schema", None) or {"type": "object"})
    properties = dict(schema.get("properties") or {})
    base, _ = _model_schema("V1Pod")  # every object's apiVersion, kind and metadata, described
    for field in ("apiVersion", "kind", "metadata"):
        properties[field] = base["properties"][field]
    schema["properties"] = properties
    return schema


def _resource_schemas(res: Resource, schemas: dict[str, Any]) -> None:
    if res.strategy.custom:
        _add_models(schemas, [OBJECT_META])
        name = f"{'.'.join(reversed(res.group.split('.')))}.{res.version}.{res.kind}"
        schemas[name] = {**_custom_schema(res), **_gvk(res)}
        return
    model = builtin_model(res.group, res.version, res.kind)
    if model is None:
        return
    _add_models(schemas, [model])
    name = schema_name(model)
    schemas[name] = {**schemas[name], **_gvk(res)}


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def root(registry: ServedResources) -> dict[str, Any]:
    paths = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            path = _gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}"}
    return {"paths": paths}


def document(registry: ServedResources, gv_path: str) -> dict[str, Any] | None:
    parts = gv_path.split("/")
    if parts[:1] == ["api"] and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[:1] == ["apis"] and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    served = registry.in_version(group, version)
    if not served:
        return None
    paths = {}
    schemas: dict[str, Any] = {}
    for res in served:
        _resource_schemas(res, schemas)
        scope = "namespaces/{namespace}/" if res.namespaced else ""
        patch = {
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": res.kind},
            "parameters": _PATCH_PARAMETERS,
            "requestBody": {
                "content": {
                    t: {"schema": {"type": "object"}}
                    for t in ("application/json-patch+json", "application/merge-patch+json")
                }
            },
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"/{_gv_path(group, version)}/{scope}{res.plural}/{{name}}"] = {"patch": patch}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }
