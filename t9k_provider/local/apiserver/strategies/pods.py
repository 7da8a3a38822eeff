"""Pods: defaults and QoS class on create, the few mutable spec fields, graceful deletion, kubectl columns."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import as_map, length
from t9k_provider.local.apiserver.strategies.podspec import (
    POD_SPEC_FIELDS,
    default_pod_spec,
    items,
    validate_pod_spec,
)
from t9k_provider.local.apiserver.strategies.priorityclasses import admit_priority
from t9k_provider.local.apiserver.strategies.serviceaccountadmission import admit_pod
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.jsonvalues import json_equal, json_in, significant
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.selectors import field_getter
from t9k_provider.local.machinery.strategicpatch import CONDITIONS, MergeField
from t9k_provider.local.storage.store import Store

_POD_MUTABLE_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _differences(old: Any, new: Any, path: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new)):
            found += _differences(old.get(key), new.get(key), f"{path}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            found += _differences(a, b, f"{path}[{i}]")
        return found
    if json_equal(old, new):
        return []
    before = fe.go_value(old) if old is not None else "unset"
    after = fe.go_value(new) if new is not None else "unset"
    return [f"  {path}: {before} -> {after}"]


def _qos_class(spec: dict[str, Any]) -> str:
    containers = [*items(spec.get("containers")), *items(spec.get("initContainers"))]
    requests_seen = limits_seen = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") if isinstance(c, dict) else None
        res = res if isinstance(res, dict) else {}
        requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
        limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
        requests_seen = requests_seen or bool(requests)
        limits_seen = limits_seen or bool(limits)
        for r in ("cpu", "memory"):
            if r not in limits or requests.get(r, limits[r]) != limits[r]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


#: The taints DefaultTolerationSeconds tolerates for a while: the node lifecycle controller's.
NOT_READY_TAINT, UNREACHABLE_TAINT = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"


def default_tolerations(spec: dict[str, Any], not_ready: int, unreachable: int) -> None:
    """The DefaultTolerationSeconds admission plugin: a pod that does not tolerate the not-ready and
    unreachable NoExecute taints already tolerates them for ``not_ready`` / ``unreachable`` seconds (300 in
    Kubernetes), so its pods leave a node that stopped reporting after that long."""
    tolerations = spec.get("tolerations")
    if tolerations is not None and not isinstance(tolerations, list):
        return  # validation says why
    tolerations = list(tolerations or [])

    def tolerated(key: str) -> bool:
        return any(
            isinstance(t, dict)
            and t.get("effect") in (None, "", "NoExecute")
            and (t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists"))
            for t in tolerations
        )

    for key, seconds in ((NOT_READY_TAINT, not_ready), (UNREACHABLE_TAINT, unreachable)):
        if not tolerated(key):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
            )
    spec["tolerations"] = tolerations


class PodStrategy(Strategy):
    subresources = ("status", "log", "binding", "eviction", "exec", "attach", "portforward")
    #: DefaultTolerationSeconds (kube-apiserver's --default-not-ready/unreachable-toleration-seconds)
    toleration_seconds = (300, 300)
    return_deleted_object = True
    merge_fields = {
        "spec": MergeField(node=POD_SPEC_FIELDS),
        "status": MergeField(
            node={
                "conditions": CONDITIONS,
                "podIPs": MergeField("merge", "ip"),
                "hostIPs": MergeField("merge", "ip"),
            }
        ),
    }
    field_selectors = {
        "spec.nodeName": field_getter("spec", "nodeName"),
        "spec.restartPolicy": field_getter("spec", "restartPolicy"),
        "spec.schedulerName": field_getter("spec", "schedulerName"),
        "spec.serviceAccountName": field_getter("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": field_getter("status", "phase"),
        "status.podIP": field_getter("status", "podIP"),
        "status.nominatedNodeName": field_getter("status", "nominatedNodeName"),
    }
    columns = [
        NAME_COLUMN,
        column("Ready"),
        column("Status"),
        column("Restarts", "integer"),
        AGE_COLUMN,
        column("IP", priority=1),
        column("Node", priority=1),
    ]

    def prepare_for_create(self, obj: dict[str, Any], store: Store) -> None:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            default_pod_spec(spec)
            admit_pod(obj, store)
            admit_priority(obj, store)
            default_tolerations(spec, *self.toleration_seconds)
            obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        validate_pod_spec(decoding.object_field(obj, "spec", "spec", out), "spec", out)

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        old_spec, new_spec = as_map(old.get("spec")), as_map(new.get("spec"))
        for key in ("containers", "initContainers"):
            if length(old_spec.get(key)) != length(new_spec.get(key)):
                out.append(fe.forbidden(f"spec.{key}", "pod updates may not add or remove containers"))
                return
        munged = dict(new_spec)
        for key in ("containers", "initContainers"):
            if isinstance(munged.get(key), list):
                munged[key] = [
                    {**c, "image": o.get("image")} if isinstance(c, dict) and isinstance(o, dict) else c
                    for c, o in zip(munged[key], old_spec.get(key) or [], strict=True)
                ]
        old_deadline = old_spec.get("activeDeadlineSeconds")
        new_deadline = new_spec.get("activeDeadlineSeconds")
        if isinstance(old_deadline, int):
            if new_deadline is None:
                detail = "must not update from a positive integer to nil value"
                out.append(fe.invalid("spec.activeDeadlineSeconds", None, detail))
            elif isinstance(new_deadline, int) and new_deadline > old_deadline:
                detail = "must be less than or equal to previous value"
                out.append(fe.invalid("spec.activeDeadlineSeconds", new_deadline, detail))
        munged["activeDeadlineSeconds"] = old_deadline
        new_tolerations = new_spec.get("tolerations") if isinstance(new_spec.get("tolerations"), list) else []
        for toleration in old_spec.get("tolerations") or []:
            if not json_in(toleration, new_tolerations):
                detail = "existing toleration can not be modified except its tolerationSeconds"
                out.append(fe.forbidden("spec.tolerations", detail))
                break
        munged["tolerations"] = old_spec.get("tolerations")
        munged["schedulingGates"] = old_spec.get("schedulingGates")
        old_grace = old_spec.get("terminationGracePeriodSeconds")
        new_grace = new_spec.get("terminationGracePeriodSeconds")
        if isinstance(old_grace, int) and old_grace < 0 and new_grace == 1:
            munged["terminationGracePeriodSeconds"] = old_grace
        diff = _differences(significant(old_spec), significant(munged), "spec")
        if diff:
            out.append(fe.forbidden("spec", _POD_MUTABLE_MESSAGE + "\n" + "\n".join(diff)))

    def grace_period(self, obj: dict[str, Any], requested: int | None) -> int:
        """A pod on a node lingers for its grace period, until its kubelet confirms it stopped."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        grace = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
        return max(int(grace or 0), 0)

    def cells(self, pod: dict[str, Any]) -> list[Any]:
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
            age(pod["metadata"].get("creationTimestamp")),
            status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>",
        ]


RESOURCE = Resource.builtin("", "Pod", PodStrategy(), short_names=["po"], categories=["all"])
