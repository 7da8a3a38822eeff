"""core/v1 ReplicationControllers: a map selector defaulted from the template's labels, replicas >= 0, the
scale subresource. Stored and validated only: no controller creates their pods."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.generic.validation import as_map, validate_labels
from t9k_provider.local.apiserver.strategies.apps import (
    REPLICA_COLUMNS,
    REPLICAS_FIELD,
    PodControllerStrategy,
    default_template,
    replica_cells,
    validate_counts,
    validate_template,
)
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause


def _selector_text(selector: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


class ReplicationControllerStrategy(PodControllerStrategy):
    field_selectors = REPLICAS_FIELD
    columns = REPLICA_COLUMNS

    def default(self, obj: dict[str, Any]) -> None:
        """``SetDefaults_ReplicationController``: selector and labels from the template's labels."""
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            labels = as_map(as_map(as_map(spec.get("template")).get("metadata")).get("labels"))
            if not spec.get("selector") and labels:
                spec["selector"] = dict(labels)
            meta = obj["metadata"]
            if not meta.get("labels") and labels:
                meta["labels"] = dict(labels)
            default_template(spec)

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        spec = decoding.object_field(obj, "spec", "spec", out)
        validate_counts(spec, ("replicas", "minReadySeconds"), out)
        validate_labels(spec, "selector", "spec.selector", out)
        selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
        if not selector:
            out.append(fe.required("spec.selector"))
        selects = (lambda labels: all(labels.get(k) == v for k, v in selector.items())) if selector else None
        validate_template(spec, selects, out)

    def scale_selector(self, obj: dict[str, Any]) -> str | None:
        return _selector_text(as_map(as_map(obj.get("spec")).get("selector")))

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        return replica_cells(obj, _selector_text(as_map(as_map(obj.get("spec")).get("selector"))) or "<none>")


RESOURCE = Resource.builtin(
    "", "ReplicationController", ReplicationControllerStrategy(), short_names=["rc"], categories=["all"]
)
