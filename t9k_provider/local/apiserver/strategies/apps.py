"""apps/v1 workloads (Deployment, ReplicaSet, StatefulSet, DaemonSet): the apps/v1 defaults, the checks of
``pkg/apis/apps/validation`` that matter (a selector that matches the template's labels and never changes, a
pod template that always restarts, counts >= 0, rollout parameters), status and scale subresources and
kubectl's columns. Their pods come from the node agents' controllers (``local/node/workloads.py``)."""

from __future__ import annotations

import re
from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import IMMUTABLE, as_map, validate_labels
from t9k_provider.local.apiserver.strategies.podspec import (
    POD_TEMPLATE_FIELDS,
    default_pod_spec,
    items,
    validate_pod_spec,
)
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.jsonvalues import json_equal
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.selectors import (
    SelectorError,
    format_label_selector,
    label_selector_from_spec,
)
from t9k_provider.local.machinery.strategicpatch import STATUS_WITH_CONDITIONS, MergeField
from t9k_provider.local.storage.store import Store

_PERCENT = re.compile(r"([0-9]+)%\Z")
_PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
    "regex used for validation is '[0-9]+%')"
)
_WIDE_COLUMNS = [column("Containers", priority=1), column("Images", priority=1)]
SELECTOR_COLUMN = column("Selector", priority=1)
#: the columns of ReplicaSets and ReplicationControllers, and their field selector
REPLICA_COLUMNS = [
    NAME_COLUMN,
    column("Desired", "integer"),
    column("Current", "integer"),
    column("Ready", "integer"),
    AGE_COLUMN,
    *_WIDE_COLUMNS,
    SELECTOR_COLUMN,
]
REPLICAS_FIELD = {"status.replicas": lambda o: str(as_map(o.get("status")).get("replicas") or 0)}
#: where a built-in workload keeps the counts its Scale shows (its selector comes from ``scale_selector``)
REPLICA_PATHS = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return as_map(obj.get("spec"))


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    return as_map(obj.get("status"))


def template_of(obj: dict[str, Any]) -> dict[str, Any]:
    return as_map(_spec(obj).get("template"))


def containers_and_images(obj: dict[str, Any]) -> list[str]:
    """The wide columns CONTAINERS and IMAGES of a workload's pod template."""
    containers = [
        c for c in items(as_map(template_of(obj).get("spec")).get("containers")) if isinstance(c, dict)
    ]
    return [
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    ]


def default_template(spec: dict[str, Any]) -> None:
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.setdefault("spec", {}), dict):
        default_pod_spec(template["spec"])


def validate_template(spec: dict[str, Any], selects: Any, out: list[Cause]) -> None:
    """A pod template that exists, whose labels the selector matches (``selects(labels)``) and whose pods
    always restart; an active deadline is the pod's own business, not a workload's."""
    if not isinstance(spec.get("template"), dict):
        out.append(fe.required("spec.template"))
        return
    template = spec["template"]
    meta = decoding.object_field(template, "metadata", "spec.template.metadata", out)
    validate_labels(meta, "labels", "spec.template.metadata.labels", out)
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    if selects is not None and not selects(labels):
        out.append(
            fe.invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`")
        )
    pod_spec = decoding.object_field(template, "spec", "spec.template.spec", out)
    validate_pod_spec(pod_spec, "spec.template.spec", out, ["Always"])
    if pod_spec.get("activeDeadlineSeconds") is not None:
        detail = "activeDeadlineSeconds in ReplicaSet is not Supported"
        out.append(fe.forbidden("spec.template.spec.activeDeadlineSeconds", detail))


def validate_counts(spec: dict[str, Any], keys: tuple[str, ...], out: list[Cause]) -> None:
    for key in keys:
        value = decoding.int_field(spec, key, f"spec.{key}", out)
        if value is not None and value < 0:
            out.append(fe.invalid(f"spec.{key}", value, "must be greater than or equal to 0"))


def int_or_percent(parent: dict[str, Any], key: str, path: str, out: list[Cause]) -> int | None:
    """An IntOrString count (``maxSurge``, ``maxUnavailable``, a PodDisruptionBudget's ``minAvailable``): a
    count >= 0 or a percentage; returns the count or the percentage's number, None when absent or invalid."""
    value = parent.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        out.append(fe.invalid(path, value, "must be an integer or percentage (e.g '5%')"))
        return None
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if not match:
            out.append(fe.invalid(path, value, _PERCENT_MSG))
            return None
        value = int(match.group(1))
    if value < 0:
        out.append(fe.invalid(path, value, "must be greater than or equal to 0"))
    return value


class PodControllerStrategy(Strategy):
    """A resource that makes pods from a template (the apps/v1 workloads, ReplicationControllers): status and
    scale subresources, generation, the template's merge keys, and defaults applied to every write."""

    subresources = ("status", "scale")
    scale = REPLICA_PATHS
    tracks_generation = True
    merge_fields = {
        "spec": MergeField(node={"template": MergeField(node=POD_TEMPLATE_FIELDS)}),
        "status": STATUS_WITH_CONDITIONS,
    }
    #: a new object's status: the counters the kind's Go type always serialises (no ``omitempty``)
    initial_status: dict[str, int] = {"replicas": 0}

    def prepare_for_create(self, obj: dict[str, Any], store: Store) -> None:
        self.default(obj)
        obj["status"] = dict(self.initial_status)

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        """A replaced spec is defaulted as a new one is (kube-apiserver defaults every decoded body)."""
        super().prepare_for_update(new, old)
        self.default(new)

    def default(self, obj: dict[str, Any]) -> None:
        """The kind's defaults (``SetDefaults_<Kind>``), the pod template's included."""


def replica_cells(obj: dict[str, Any], selector: str) -> list[Any]:
    """A row of ``REPLICA_COLUMNS``."""
    meta, spec, status = obj["metadata"], _spec(obj), _status(obj)
    return [
        meta["name"],
        spec.get("replicas", 0),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        age(meta.get("creationTimestamp")),
        *containers_and_images(obj),
        selector,
    ]


def _default_rollout(spec: dict[str, Any], field: str, rolling: dict[str, Any]) -> None:
    """``spec.<field>`` defaults to a RollingUpdate whose parameters default to ``rolling``."""
    strategy = spec.setdefault(field, {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(strategy.setdefault("rollingUpdate", {}), dict):
            for key, value in rolling.items():
                strategy["rollingUpdate"].setdefault(key, value)


def _validate_update_strategy(spec: dict[str, Any], out: list[Cause]) -> dict[str, Any]:
    """StatefulSets' and DaemonSets' ``updateStrategy``, whose type is OnDelete or RollingUpdate."""
    update = decoding.object_field(spec, "updateStrategy", "spec.updateStrategy", out)
    kind = decoding.text_field(update, "type", "spec.updateStrategy.type", out)
    if kind not in ("OnDelete", "RollingUpdate"):
        out.append(fe.not_supported("spec.updateStrategy.type", kind, ["OnDelete", "RollingUpdate"]))
    return update


class WorkloadStrategy(PodControllerStrategy):
    """What the four apps/v1 kinds share; ``kind_word`` is how the selector messages name the kind."""

    kind_word = "deployment"
    replicated = True

    def default(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            if self.replicated:
                spec.setdefault("replicas", 1)
            spec.setdefault("revisionHistoryLimit", 10)
            self.default_spec(spec)
            default_template(spec)

    def default_spec(self, spec: dict[str, Any]) -> None:
        """The kind's own defaults (``SetDefaults_<Kind>``) besides replicas and the pod template's."""

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        spec = decoding.object_field(obj, "spec", "spec", out)
        validate_counts(
            spec,
            ("replicas", "minReadySeconds", "revisionHistoryLimit")
            if self.replicated
            else ("minReadySeconds", "revisionHistoryLimit"),
            out,
        )
        validate_template(spec, self._selector(spec, out), out)
        self.validate_spec(spec, out)

    def validate_spec(self, spec: dict[str, Any], out: list[Cause]) -> None:
        """The kind's own rules (rollout strategy parameters)."""

    def _selector(self, spec: dict[str, Any], out: list[Cause]) -> Any:
        """The selector's ``matches``, or None when it is missing or invalid (reported in ``out``)."""
        selector = spec.get("selector")
        if selector is None:
            out.append(fe.required("spec.selector"))
            return None
        if not isinstance(selector, dict):
            decoding.type_error("spec.selector", selector, "object", out)
            return None
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            out.append(
                fe.invalid("spec.selector", selector, f"empty selector is invalid for {self.kind_word}")
            )
            return None
        try:
            return label_selector_from_spec(selector).matches
        except SelectorError as exc:
            out.append(fe.invalid("spec.selector", selector, str(exc)))
            return None

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        old_selector, new_selector = _spec(old).get("selector"), _spec(new).get("selector")
        if not json_equal(old_selector, new_selector):
            out.append(fe.invalid("spec.selector", new_selector, IMMUTABLE))

    def scale_selector(self, obj: dict[str, Any]) -> str | None:
        return format_label_selector(as_map(_spec(obj).get("selector"))).replace("<none>", "")


class DeploymentStrategy(WorkloadStrategy):
    initial_status: dict[str, int] = {}
    columns = [
        NAME_COLUMN,
        column("Ready"),
        column("Up-to-date", "integer"),
        column("Available", "integer"),
        AGE_COLUMN,
        *_WIDE_COLUMNS,
        SELECTOR_COLUMN,
    ]

    def default_spec(self, spec: dict[str, Any]) -> None:
        _default_rollout(spec, "strategy", {"maxUnavailable": "25%", "maxSurge": "25%"})
        spec.setdefault("progressDeadlineSeconds", 600)

    def validate_spec(self, spec: dict[str, Any], out: list[Cause]) -> None:
        strategy = decoding.object_field(spec, "strategy", "spec.strategy", out)
        kind = decoding.text_field(strategy, "type", "spec.strategy.type", out)
        if kind not in ("Recreate", "RollingUpdate"):
            out.append(fe.not_supported("spec.strategy.type", kind, ["Recreate", "RollingUpdate"]))
        rolling = decoding.object_field(strategy, "rollingUpdate", "spec.strategy.rollingUpdate", out)
        if kind == "Recreate" and strategy.get("rollingUpdate") is not None:
            detail = "may not be specified when strategy `type` is 'Recreate'"
            out.append(fe.forbidden("spec.strategy.rollingUpdate", detail))
        elif kind == "RollingUpdate":
            path = "spec.strategy.rollingUpdate"
            unavailable = int_or_percent(rolling, "maxUnavailable", f"{path}.maxUnavailable", out)
            surge = int_or_percent(rolling, "maxSurge", f"{path}.maxSurge", out)
            field, value = f"{path}.maxUnavailable", rolling.get("maxUnavailable")
            if isinstance(value, str) and (unavailable or 0) > 100:
                out.append(fe.invalid(field, value, "must not be greater than 100%"))
            if unavailable == 0 and surge == 0:
                out.append(fe.invalid(field, value, "may not be 0 when `maxSurge` is 0"))
        deadline = decoding.int_field(spec, "progressDeadlineSeconds", "spec.progressDeadlineSeconds", out)
        ready = spec.get("minReadySeconds") if isinstance(spec.get("minReadySeconds"), int) else 0
        if deadline is not None and deadline <= ready:
            out.append(
                fe.invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds")
            )

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        meta, spec, status = obj["metadata"], _spec(obj), _status(obj)
        return [
            meta["name"],
            f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0),
            status.get("availableReplicas", 0),
            age(meta.get("creationTimestamp")),
            *containers_and_images(obj),
            format_label_selector(as_map(spec.get("selector"))),
        ]


class ReplicaSetStrategy(WorkloadStrategy):
    field_selectors = REPLICAS_FIELD
    columns = REPLICA_COLUMNS

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        return replica_cells(obj, format_label_selector(as_map(_spec(obj).get("selector"))))


_STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
    "revisionHistoryLimit",
)


class StatefulSetStrategy(WorkloadStrategy):
    kind_word = "statefulset"
    initial_status = {"replicas": 0, "availableReplicas": 0}
    columns = [NAME_COLUMN, column("Ready"), AGE_COLUMN, *_WIDE_COLUMNS]

    def default_spec(self, spec: dict[str, Any]) -> None:
        spec.setdefault("podManagementPolicy", "OrderedReady")
        _default_rollout(spec, "updateStrategy", {"partition": 0})
        spec.setdefault(
            "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
        )

    def validate_spec(self, spec: dict[str, Any], out: list[Cause]) -> None:
        policy = decoding.text_field(spec, "podManagementPolicy", "spec.podManagementPolicy", out)
        if policy not in ("OrderedReady", "Parallel"):
            out.append(fe.not_supported("spec.podManagementPolicy", policy, ["OrderedReady", "Parallel"]))
        update = _validate_update_strategy(spec, out)
        rolling = decoding.object_field(update, "rollingUpdate", "spec.updateStrategy.rollingUpdate", out)
        validate_counts(rolling, ("partition",), out)

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        frozen = [k for k in set(_spec(old)) | set(_spec(new)) if k not in _STATEFULSET_MUTABLE]
        if any(not json_equal(_spec(old).get(k), _spec(new).get(k)) for k in frozen):
            detail = (
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
            )
            out.append(fe.forbidden("spec", detail))

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        meta, spec, status = obj["metadata"], _spec(obj), _status(obj)
        return [
            meta["name"],
            f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            age(meta.get("creationTimestamp")),
            *containers_and_images(obj),
        ]


class DaemonSetStrategy(WorkloadStrategy):
    subresources = ("status",)
    scale = None
    kind_word = "daemonset"
    replicated = False
    initial_status = dict.fromkeys(
        ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"), 0
    )
    columns = [
        NAME_COLUMN,
        column("Desired", "integer"),
        column("Current", "integer"),
        column("Ready", "integer"),
        column("Up-to-date", "integer"),
        column("Available", "integer"),
        column("Node Selector"),
        AGE_COLUMN,
        *_WIDE_COLUMNS,
        SELECTOR_COLUMN,
    ]

    def default_spec(self, spec: dict[str, Any]) -> None:
        _default_rollout(spec, "updateStrategy", {"maxUnavailable": 1, "maxSurge": 0})

    def validate_spec(self, spec: dict[str, Any], out: list[Cause]) -> None:
        _validate_update_strategy(spec, out)

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        meta, spec, status = obj["metadata"], _spec(obj), _status(obj)
        node_selector = as_map(as_map(template_of(obj).get("spec")).get("nodeSelector"))
        return [
            meta["name"],
            status.get("desiredNumberScheduled", 0),
            status.get("currentNumberScheduled", 0),
            status.get("numberReady", 0),
            status.get("updatedNumberScheduled", 0),
            status.get("numberAvailable", 0),
            ",".join(f"{k}={v}" for k, v in sorted(node_selector.items())) or "<none>",
            age(meta.get("creationTimestamp")),
            *containers_and_images(obj),
            format_label_selector(as_map(spec.get("selector"))),
        ]


_ALL = ["all"]
DEPLOYMENTS = Resource.builtin(
    "apps", "Deployment", DeploymentStrategy(), short_names=["deploy"], categories=_ALL
)
REPLICASETS = Resource.builtin(
    "apps", "ReplicaSet", ReplicaSetStrategy(), short_names=["rs"], categories=_ALL
)
STATEFULSETS = Resource.builtin(
    "apps", "StatefulSet", StatefulSetStrategy(), short_names=["sts"], categories=_ALL
)
DAEMONSETS = Resource.builtin("apps", "DaemonSet", DaemonSetStrategy(), short_names=["ds"], categories=_ALL)
