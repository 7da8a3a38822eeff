"""CustomResourceDefinitions generated from the models, so there is one source of truth.

Run `python -m t9k_provider.jobs.crds deploy/crds` (`make crds`) to rewrite the committed files.

Choices:
- Schemas are structural (apiextensions.k8s.io/v1): every node is typed, except Kubernetes objects
  kept verbatim (`x-kubernetes-preserve-unknown-fields`), IntOrString (`x-kubernetes-int-or-string`)
  and command lines written as a string or a list (preserve-unknown-fields, checked by the models).
- No `default:` values: the API server would write them into stored objects, while the models keep
  defaults implicit so that `load(m).to_manifest() == m`.
- Category `t9k-jobs` (`kubectl get t9k-jobs` lists every kind) but not `all`, so that
  `kubectl delete all` never deletes training jobs.
- Short names from the T9k docs; XGBoostTrainingJob has none there and gets `xgbj`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from t9k_provider.jobs.constants import GROUP, VERSION
from t9k_provider.jobs.envelope import T9kJob
from t9k_provider.jobs.loading import KINDS

CATEGORIES = ["t9k-jobs"]
HEADER = "# Generated from t9k_provider/jobs by `make crds`; do not edit by hand.\n"

# Keywords a structural schema may carry, in output order; everything else pydantic emits is dropped.
_KEEP = [
    "type",
    "description",
    "properties",
    "required",
    "items",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
    "format",
    "additionalProperties",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-validations",
]
_ORDER = {key: i for i, key in enumerate(_KEEP)}


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return _structural({**target, **extra}, defs)
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"cannot express {node} structurally; use a WithJsonSchema annotation")
        # Optional fields: an explicit null is pruned by the API server, which the models read as unset.
        return _structural({**branches[0], **{k: v for k, v in node.items() if k != "anyOf"}}, defs)
    out: dict[str, Any] = {}
    for key in sorted((k for k in node if k in _ORDER), key=_ORDER.__getitem__):
        value = node[key]
        if key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key == "items":
            out[key] = _structural(value, defs)
        elif key == "additionalProperties":
            if isinstance(value, dict):  # a map; `true`/`false` are left to pruning
                out[key] = _structural(value, defs)
        else:
            out[key] = value
    return out


def openapi_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Structural OpenAPI v3 schema of a model, with every `$ref` inlined."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _structural(raw, raw.get("$defs", {}))


def crd(cls: type[T9kJob]) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind."""
    spec_model = cls.model_fields["spec"].annotation
    status_model = cls.model_fields["status"].annotation
    status_model = next(a for a in status_model.__args__ if a is not type(None))  # type: ignore[union-attr]
    root = {
        "type": "object",
        "description": cls.__doc__,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": openapi_schema(spec_model),  # type: ignore[arg-type]
            "status": openapi_schema(status_model),
        },
        "required": ["spec"],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{cls.PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": cls.KIND,
                "listKind": f"{cls.KIND}List",
                "plural": cls.PLURAL,
                "singular": cls.SINGULAR,
                "shortNames": list(cls.SHORT_NAMES),
                "categories": CATEGORIES,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def all_crds() -> dict[str, dict[str, Any]]:
    """File name -> CRD for every kind."""
    return {f"{cls.PLURAL}.{GROUP}.yaml": crd(cls) for cls in KINDS.values()}


def render(document: dict[str, Any]) -> str:
    return HEADER + yaml.safe_dump(document, sort_keys=False, width=100, allow_unicode=True)


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in all_crds().items():
        path = directory / name
        path.write_text(render(document), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m t9k_provider.jobs.crds <output-directory>", file=sys.stderr)
        return 2
    for path in write(Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
