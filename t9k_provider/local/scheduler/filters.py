"""Which nodes a pod may run on besides room, as kube-scheduler's filter plugins judge it (pure):
NodeUnschedulable (a cordoned node), TaintToleration (NoSchedule and NoExecute taints), NodeAffinity
(``nodeSelector`` and required node affinity). Each answers with kube-scheduler's reason, counted per node
in the FailedScheduling message; NodeResourcesFit is `fit`."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.machinery.selectors import SelectorError, new_requirement
from t9k_provider.local.machinery.taints import untolerated

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!", "Gt": "gt", "Lt": "lt"}


def rejection(pod: dict[str, Any], node: dict[str, Any]) -> str | None:
    """Why ``pod`` may not run on ``node`` (room aside), or None when it may."""
    spec, node_spec = pod.get("spec") or {}, node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node_spec.get("unschedulable") and untolerated([UNSCHEDULABLE_TAINT], tolerations, ("NoSchedule",)):
        return UNSCHEDULABLE
    taint = untolerated(node_spec.get("taints") or [], tolerations, ("NoSchedule", "NoExecute"))
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    if not matches_affinity(spec, node):
        return AFFINITY
    return None


def matches_affinity(spec: dict[str, Any], node: dict[str, Any]) -> bool:
    """``nodeSelector`` (every label equal) and required node affinity (any term: all its expressions on the
    node's labels and fields)."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    fields = {"metadata.name": node["metadata"]["name"]}
    return any(
        _all_match(term.get("matchExpressions"), labels) and _all_match(term.get("matchFields"), fields)
        for term in required.get("nodeSelectorTerms") or ()
    )


def _all_match(expressions: list[dict[str, Any]] | None, values: dict[str, str]) -> bool:
    """A node selector term's requirements; one the API would refuse matches nothing."""
    for expr in expressions or ():
        operator = _OPERATORS.get(str(expr.get("operator")))
        if operator is None:
            return False
        try:
            requirement = new_requirement(str(expr.get("key", "")), operator, expr.get("values") or [])
        except SelectorError:
            return False
        if not requirement.matches(values):
            return False
    return True
