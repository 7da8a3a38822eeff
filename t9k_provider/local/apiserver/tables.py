"""Server-side ``Table`` output for kubectl; a resource's strategy names its columns and cells."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource


def wants_table(accept: str) -> bool:
    return "as=table" in accept.replace(" ", "").lower()


def _row(res: Resource, obj: dict[str, Any], include_object: str) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": res.strategy.cells(obj)}
    if include_object == "Object":
        row["object"] = obj
    elif include_object != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        }
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
        "columnDefinitions": res.strategy.columns if with_columns else [],
        "rows": [_row(res, o, include_object) for o in objects],
    }
