"""policy/v1 PodDisruptionBudgets, as ``pkg/registry/policy/poddisruptionbudget`` and
``pkg/apis/policy/validation`` serve them: ``minAvailable`` or ``maxUnavailable`` (a count or a percentage),
a label selector, ``unhealthyPodEvictionPolicy``; a status subresource that the disruption controller keeps
(``controllers/disruption.py``) and the eviction subresource spends (``apiserver/eviction.py``); kubectl's
columns. The rules they share (which pods a budget selects, its DisruptionAllowed condition) live here.
"""

from __future__ import annotations

import re
from typing import Any

from t9k_provider.kube.timestamps import now_rfc3339, parse_timestamp
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import as_map, validate_labels
from t9k_provider.local.apiserver.strategies.apps import int_or_percent
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.endpoints import is_ready
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.names import is_qualified_name, is_valid_label_value, regex_error
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.selectors import LabelSelector, SelectorError, label_selector_from_spec
from t9k_provider.local.machinery.strategicpatch import STATUS_WITH_CONDITIONS
from t9k_provider.local.storage.store import Store

GROUP = "policy"
ALWAYS_ALLOW = "AlwaysAllow"
IF_HEALTHY_BUDGET = "IfHealthyBudget"
UNHEALTHY_POD_EVICTION_POLICIES = [ALWAYS_ALLOW, IF_HEALTHY_BUDGET]
DISRUPTION_ALLOWED = "DisruptionAllowed"
#: ``PodDisruptionBudgetStatus`` as a new object has it (its counters carry no ``omitempty``).
INITIAL_STATUS = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
_STATUS_COUNTERS = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
_INT32 = range(-(2**31), 2**31)
_CONDITION_STATUSES = ["False", "True", "Unknown"]
_REASON_FMT = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_REASON = re.compile(_REASON_FMT)
_REASON_MSG = regex_error(
    "a condition reason must start with alphabetic character, optionally followed by a string of "
    "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
    _REASON_FMT,
    "my_name",
    "MY_NAME",
    "MyName",
    "ReasonA,ReasonB",
    "ReasonA:ReasonB",
)


def spec_of(pdb: dict[str, Any]) -> dict[str, Any]:
    return as_map(pdb.get("spec"))


def status_of(pdb: dict[str, Any]) -> dict[str, Any]:
    return as_map(pdb.get("status"))


def pod_selector(pdb: dict[str, Any]) -> LabelSelector:
    """The pods a budget covers (``metav1.LabelSelectorAsSelector``): in policy/v1 a missing selector selects
    no pod and an empty one every pod of the namespace. Raises SelectorError for an invalid one."""
    return label_selector_from_spec(spec_of(pdb).get("selector"))


def pod_healthy(pod: dict[str, Any]) -> bool:
    """A budget counts a pod healthy while it is Ready ("IsPodReady is the current implementation of
    IsHealthy"): the readiness Services publish by."""
    return is_ready(pod)


def with_disruption_allowed(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` with its DisruptionAllowed condition set from ``disruptionsAllowed``
    (``pdbhelper.UpdateDisruptionAllowedCondition``); the transition time moves only when the status does."""
    allowed = int(status.get("disruptionsAllowed") or 0) > 0
    wanted = {
        "type": DISRUPTION_ALLOWED,
        "status": "True" if allowed else "False",
        "observedGeneration": int(status.get("observedGeneration") or 0),
        "reason": "SufficientPods" if allowed else "InsufficientPods",
        "message": "",
    }
    return with_condition(status, wanted)


def with_condition(status: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """``status`` with the condition of ``wanted["type"]`` replaced (``meta.SetStatusCondition``)."""
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    current = next((c for c in conditions if c.get("type") == wanted["type"]), None)
    changed = current is None or current.get("status") != wanted["status"]
    transition = now_rfc3339() if changed else current.get("lastTransitionTime") or now_rfc3339()
    condition = {**wanted, "lastTransitionTime": transition}
    kept = [condition if c is current else c for c in conditions]
    return {**status, "conditions": kept if current is not None else [*kept, condition]}


def conditions_up_to_date(pdb: dict[str, Any]) -> bool:
    """``pdbhelper.ConditionsAreUpToDate``: the DisruptionAllowed condition says what the status says."""
    status = status_of(pdb)
    condition = next(
        (c for c in status.get("conditions") or () if as_map(c).get("type") == DISRUPTION_ALLOWED), None
    )
    if condition is None or status.get("observedGeneration") != pdb["metadata"].get("generation"):
        return False
    if int(status.get("disruptionsAllowed") or 0) > 0:
        return condition.get("status") == "True" and condition.get("reason") == "SufficientPods"
    return condition.get("status") == "False" and condition.get("reason") == "InsufficientPods"


class PodDisruptionBudgetStrategy(Strategy):
    subresources = ("status",)
    tracks_generation = True
    merge_fields = {"status": STATUS_WITH_CONDITIONS}
    columns = [
        NAME_COLUMN,
        column("Min Available"),
        column("Max Unavailable"),
        column("Allowed Disruptions", "integer"),
        AGE_COLUMN,
    ]

    def prepare_for_create(self, obj: dict[str, Any], store: Store) -> None:
        obj["status"] = dict(INITIAL_STATUS)

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        """``ValidatePodDisruptionBudget`` for the spec and ``ValidatePodDisruptionBudgetStatusUpdate`` for
        the status (a write of one keeps the other as stored, so checking both checks the one written)."""
        spec = decoding.object_field(obj, "spec", "spec", out)
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            out.append(fe.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
        for key in ("minAvailable", "maxUnavailable"):
            _validate_count(spec, key, out)
        validate_label_selector(spec.get("selector"), "spec.selector", out)
        policy = spec.get("unhealthyPodEvictionPolicy")
        if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
            path = "spec.unhealthyPodEvictionPolicy"
            out.append(fe.not_supported(path, policy, UNHEALTHY_POD_EVICTION_POLICIES))
        _validate_status(decoding.object_field(obj, "status", "status", out), out)

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        spec, status = spec_of(obj), status_of(obj)
        return [
            obj["metadata"]["name"],
            _count_text(spec.get("minAvailable")),
            _count_text(spec.get("maxUnavailable")),
            status.get("disruptionsAllowed", 0),
            age(obj["metadata"].get("creationTimestamp")),
        ]


def _count_text(value: Any) -> str:
    """An IntOrString as ``IntOrString.String()`` prints it; "N/A" when unset (kubectl's printer)."""
    return "N/A" if value is None else str(value)


def _validate_count(spec: dict[str, Any], key: str, out: list[Cause]) -> None:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``; a count must fit the int32 of
    ``IntOrString``."""
    path, value = f"spec.{key}", spec.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT32:
        decoding.type_error(path, value, "int32", out)
        return
    number = int_or_percent(spec, key, path, out)
    if isinstance(value, str) and number is not None and number > 100:
        out.append(fe.invalid(path, value, "must not be greater than 100%"))


def validate_label_selector(selector: Any, path: str, out: list[Cause]) -> None:
    """``metav1validation.ValidateLabelSelector``: labels, and each requirement's operator, key and values."""
    if selector is None:
        return
    if not isinstance(selector, dict):
        decoding.type_error(path, selector, "object", out)
        return
    validate_labels(selector, "matchLabels", f"{path}.matchLabels", out)
    expressions = decoding.object_items(selector, "matchExpressions", f"{path}.matchExpressions", out)
    for item, requirement in expressions:
        operator = decoding.text_field(requirement, "operator", f"{item}.operator", out)
        values = decoding.string_items(requirement, "values", f"{item}.values", out)
        if operator in ("In", "NotIn"):
            if not values:
                detail = "must be specified when `operator` is 'In' or 'NotIn'"
                out.append(fe.required(f"{item}.values", detail))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                detail = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                out.append(fe.forbidden(f"{item}.values", detail))
        else:
            out.append(fe.invalid(f"{item}.operator", operator, "not a valid selector operator"))
        key = decoding.text_field(requirement, "key", f"{item}.key", out)
        out += [fe.invalid(f"{item}.key", key, m) for m in is_qualified_name(key)]
        for i, value in enumerate(values):
            out += [fe.invalid(f"{item}.values[{i}]", value, m) for m in is_valid_label_value(value)]


def _validate_status(status: dict[str, Any], out: list[Cause]) -> None:
    for key in _STATUS_COUNTERS:
        value = decoding.int_field(status, key, f"status.{key}", out)
        if value is not None and value < 0:
            out.append(fe.invalid(f"status.{key}", value, "must be greater than or equal to 0"))
    decoding.int_field(status, "observedGeneration", "status.observedGeneration", out)
    for pod, when in decoding.object_field(status, "disruptedPods", "status.disruptedPods", out).items():
        _validate_time(when, f"status.disruptedPods[{pod}]", out)
    _validate_conditions(status, out)


def _validate_conditions(status: dict[str, Any], out: list[Cause]) -> None:
    """``metav1validation.ValidateConditions``."""
    seen: set[str] = set()
    for path, condition in decoding.object_items(status, "conditions", "status.conditions", out):
        kind = decoding.text_field(condition, "type", f"{path}.type", out)
        out += [fe.invalid(f"{path}.type", kind, m) for m in is_qualified_name(kind)]
        if kind in seen:
            out.append(fe.duplicate(f"{path}.type", kind))
        seen.add(kind)
        value = condition.get("status")
        if value not in _CONDITION_STATUSES:
            out.append(fe.not_supported(f"{path}.status", value, _CONDITION_STATUSES))
        generation = decoding.int_field(condition, "observedGeneration", f"{path}.observedGeneration", out)
        if generation is not None and generation < 0:
            detail = "must be greater than or equal to zero"
            out.append(fe.invalid(f"{path}.observedGeneration", generation, detail))
        if condition.get("lastTransitionTime") is None:
            out.append(fe.required(f"{path}.lastTransitionTime", "must be set"))
        else:
            _validate_time(condition["lastTransitionTime"], f"{path}.lastTransitionTime", out)
        reason = decoding.text_field(condition, "reason", f"{path}.reason", out)
        if not reason:
            out.append(fe.required(f"{path}.reason", "must be set"))
        elif len(reason) > 1024:
            out.append(fe.too_long(f"{path}.reason", 1024))
        elif not _REASON.fullmatch(reason):
            out.append(fe.invalid(f"{path}.reason", reason, _REASON_MSG))
        if len(decoding.text_field(condition, "message", f"{path}.message", out)) > 32768:
            out.append(fe.too_long(f"{path}.message", 32768))


def _validate_time(value: Any, path: str, out: list[Cause]) -> None:
    """A ``metav1.Time``: an RFC 3339 string (else the body would not decode)."""
    if not isinstance(value, str):
        decoding.type_error(path, value, "string", out)
        return
    try:
        parse_timestamp(value)
    except ValueError:
        out.append(fe.type_invalid(path, value, "must be an RFC 3339 time"))


def selects(pdb: dict[str, Any], labels: dict[str, str] | None) -> bool:
    """Whether ``pdb`` covers a pod with these labels; a budget with an invalid selector covers none
    (``getPodDisruptionBudgets`` of the eviction handler)."""
    try:
        return pod_selector(pdb).matches(labels)
    except SelectorError:
        return False


RESOURCE = Resource.builtin(GROUP, "PodDisruptionBudget", PodDisruptionBudgetStrategy(), short_names=["pdb"])
