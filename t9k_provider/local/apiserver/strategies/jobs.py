"""batch/v1 Jobs: selector and pod template labels on create, an immutable template, generation tracking."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import IMMUTABLE, as_map, validate_labels
from t9k_provider.local.apiserver.strategies.apps import validate_counts
from t9k_provider.local.apiserver.strategies.podspec import (
    POD_TEMPLATE_FIELDS,
    default_pod_spec,
    validate_pod_spec,
)
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.jsonvalues import json_equal, significant
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.strategicpatch import STATUS_WITH_CONDITIONS, MergeField
from t9k_provider.local.storage.store import Store

_JOB_COUNTERS = (
    "parallelism",
    "completions",
    "backoffLimit",
    "activeDeadlineSeconds",
    "ttlSecondsAfterFinished",
)


class JobStrategy(Strategy):
    subresources = ("status",)
    tracks_generation = True
    merge_fields = {
        "spec": MergeField(node={"template": MergeField(node=POD_TEMPLATE_FIELDS)}),
        "status": STATUS_WITH_CONDITIONS,
    }
    field_selectors = {"status.successful": lambda o: str((o.get("status") or {}).get("successful") or 0)}
    columns = [NAME_COLUMN, column("Status"), column("Completions"), AGE_COLUMN]

    def prepare_for_create(self, job: dict[str, Any], store: Store) -> None:
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

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        spec = decoding.object_field(obj, "spec", "spec", out)
        validate_counts(spec, _JOB_COUNTERS, out)
        if not isinstance(spec.get("template"), dict):
            out.append(fe.required("spec.template"))
            return
        template = spec["template"]
        template_meta = decoding.object_field(template, "metadata", "spec.template.metadata", out)
        validate_labels(template_meta, "labels", "spec.template.metadata.labels", out)
        pod_spec = decoding.object_field(template, "spec", "spec.template.spec", out)
        validate_pod_spec(pod_spec, "spec.template.spec", out, ["OnFailure", "Never"])
        if pod_spec.get("restartPolicy") is None:
            out.append(fe.required("spec.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        old_spec, new_spec = as_map(old.get("spec")), as_map(new.get("spec"))
        for key in ("selector", "completions", "completionMode"):
            if key in old_spec and not json_equal(old_spec.get(key), new_spec.get(key)):
                out.append(fe.invalid(f"spec.{key}", new_spec.get(key), IMMUTABLE))
        if not json_equal(significant(old_spec.get("template")), significant(new_spec.get("template"))):
            out.append(fe.invalid("spec.template", new_spec.get("template"), IMMUTABLE))

    def cells(self, job: dict[str, Any]) -> list[Any]:
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
            age(meta.get("creationTimestamp")),
        ]


RESOURCE = Resource.builtin("batch", "Job", JobStrategy(), categories=["all"])
