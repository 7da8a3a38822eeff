"""The disruption controller (kube-controller-manager's ``pkg/controller/disruption``;
docs/local-cluster.md#eviction-and-poddisruptionbudgets): each PodDisruptionBudget's status says how many of
the pods it selects are healthy (Ready, not being deleted, not just evicted), how many must be, and so how
many may be disrupted now; the eviction subresource spends that (``apiserver/eviction.py``).

``expectedPods`` is the pods' controllers' scale where the budget is a percentage or ``maxUnavailable`` (a
ReplicationController's, a Deployment's through its ReplicaSet, a ReplicaSet's, a StatefulSet's, else the
``scale`` subresource of the controller's resource), and the number of selected pods for an integer
``minAvailable``; a selected pod whose controller cannot be found, or a selector that does not parse, makes
the status fail safe (``disruptionsAllowed`` 0, DisruptionAllowed False with reason ``SyncFailed``). An
eviction recorded in ``disruptedPods`` counts its pod out for two minutes (``DeletionTimeout``) unless the
pod is deleted before; then the entry goes.

A write to a namespace's pods, budgets or workloads (or to a custom resource, which may have a scale) marks
the namespace; a pass recomputes the budgets of the marked namespaces and of those whose ``disruptedPods``
entry expires, so a pass costs what changed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from t9k_provider.kube.informer import controller_ref
from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.served import BUILTIN
from t9k_provider.local.apiserver.strategies import poddisruptionbudgets as budgets
from t9k_provider.local.controllers.serverside import Retries, ServerSide
from t9k_provider.local.machinery.jsonvalues import get_path
from t9k_provider.local.machinery.selectors import SelectorError
from t9k_provider.local.storage.store import Event

#: How long an eviction's ``disruptedPods`` entry stands for a pod that is not being deleted (seconds).
DELETION_TIMEOUT = 120.0
#: Writes that may change a budget's status: its pods, itself, the workloads whose scale it reads.
_WATCHED = {
    ("", "pods"),
    (budgets.GROUP, budgets.RESOURCE.plural),
    ("", "replicationcontrollers"),
    ("apps", "replicasets"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
}
_BUILTIN_GROUPS = {r.group for r in BUILTIN}
_PLURAL = budgets.RESOURCE.plural

#: (controller reference, namespace) -> (the scaled controller's uid, its replicas), None when it is gone.
ScaleOf = Callable[[dict[str, Any], str], "tuple[str, int] | None"]


class SyncFailed(Exception):
    """What keeps a budget's status from being computed (its message goes into the SyncFailed condition)."""


def scaled(value: int | str, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent`` rounding up: a count, or a percentage of ``total``."""
    if isinstance(value, str):
        return math.ceil(int(value.rstrip("%")) * total / 100)
    return value


def expected_scale(pods: list[dict[str, Any]], scale_of: ScaleOf) -> int:
    """``getExpectedScale``: the summed scale of the selected pods' controllers (pods without one are left
    out, as upstream does after warning about them)."""
    scales: dict[str, int] = {}
    for pod in pods:
        ref = controller_ref(pod)
        if ref is None:
            continue
        found = scale_of(ref, pod["metadata"].get("namespace", ""))
        if found is None:
            raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        uid, replicas = found
        scales[uid] = replicas
    return sum(scales.values())


def expected_counts(pdb: dict[str, Any], pods: list[dict[str, Any]], scale_of: ScaleOf) -> tuple[int, int]:
    """``getExpectedPodCount``: (expectedPods, desiredHealthy)."""
    spec = budgets.spec_of(pdb)
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None:
        expected = expected_scale(pods, scale_of)
        return expected, max(expected - scaled(max_unavailable, expected), 0)
    if isinstance(min_available, int):
        return len(pods), min_available
    if min_available is not None:
        expected = expected_scale(pods, scale_of)
        return expected, scaled(min_available, expected)
    return 0, 0


def _deleting(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def disrupted_pods(
    pdb: dict[str, Any], pods: list[dict[str, Any]], now: float
) -> tuple[dict[str, str], float | None]:
    """``buildDisruptedPodMap``: the evictions still standing (their pod exists, is not being deleted and
    the entry is younger than DELETION_TIMEOUT), and when the first of them expires."""
    recorded = budgets.status_of(pdb).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    recheck: float | None = None
    for pod in pods:
        name = pod["metadata"]["name"]
        if _deleting(pod) or name not in recorded:
            continue
        expires = parse_timestamp(recorded[name]).timestamp() + DELETION_TIMEOUT
        if expires < now:
            continue
        kept[name] = recorded[name]
        recheck = expires if recheck is None else min(recheck, expires)
    return kept, recheck


def count_healthy(pods: list[dict[str, Any]], disrupted: dict[str, str]) -> int:
    """``countHealthyPods``: Ready pods neither being deleted nor just evicted."""
    return sum(
        1
        for p in pods
        if not _deleting(p) and p["metadata"]["name"] not in disrupted and budgets.pod_healthy(p)
    )


def budget_status(
    pdb: dict[str, Any], pods: list[dict[str, Any]], scale_of: ScaleOf, now: float
) -> tuple[dict[str, Any], float | None]:
    """``trySync`` + ``updatePdbStatus``: the status ``pdb`` should have over the pods it selects, and when to
    look again (an eviction's entry expiring); raises SyncFailed."""
    expected, desired = expected_counts(pdb, pods, scale_of)
    disrupted, recheck = disrupted_pods(pdb, pods, now)
    healthy = count_healthy(pods, disrupted)
    # A budget that expects no pod allows nothing, so that its first pods are safe before it sees them.
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    old = budgets.status_of(pdb)
    status: dict[str, Any] = {"observedGeneration": pdb["metadata"].get("generation", 0)}
    if disrupted:
        status["disruptedPods"] = disrupted
    status.update(
        disruptionsAllowed=allowed, currentHealthy=healthy, desiredHealthy=desired, expectedPods=expected
    )
    if old.get("conditions"):
        status["conditions"] = old["conditions"]
    unchanged = all(old.get(k) == v for k, v in status.items() if k != "conditions") and (
        (old.get("disruptedPods") or {}) == disrupted
    )
    if unchanged and budgets.conditions_up_to_date(pdb):
        return old, recheck
    return budgets.with_disruption_allowed(status), recheck


def fail_safe(pdb: dict[str, Any], error: SyncFailed) -> dict[str, Any]:
    """``failSafe``: what the status says when it cannot be computed: no disruption allowed, and why."""
    status = {**budgets.status_of(pdb), "disruptionsAllowed": 0}
    condition = {
        "type": budgets.DISRUPTION_ALLOWED,
        "status": "False",
        "observedGeneration": int(status.get("observedGeneration") or 0),
        "reason": "SyncFailed",
        "message": str(error),
    }
    return budgets.with_condition(status, condition)


class DisruptionController:
    def __init__(self, side: ServerSide, clock: Callable[[], float] = time.time) -> None:
        self.side = side
        self.clock = clock
        self.retries = Retries("disruption controller")
        self._marked = {p["metadata"]["namespace"] for p in side.store.list(budgets.GROUP, _PLURAL)}
        self._recheck: dict[
            str, float
        ] = {}  # namespace -> when an eviction entry of one of its budgets expires

    def note(self, event: Event) -> None:
        """A write that may change the status of the budgets of its namespace (never raises: it runs inside
        the store's commit)."""
        group, resource, namespace, _ = event.key
        if namespace and ((group, resource) in _WATCHED or group not in _BUILTIN_GROUPS):
            self._marked.add(namespace)

    def due_in(self) -> float | None:
        """A backoff's end, or the first eviction entry that expires (its budget allows more then)."""
        dues = [self.retries.due_in(), *(when - self.clock() for when in self._recheck.values())]
        found = [due for due in dues if due is not None]
        return max(0.0, min(found)) if found else None

    def sync(self) -> None:
        now = self.clock()
        due = {ns for ns, when in self._recheck.items() if when <= now}
        marked, self._marked = self._marked | due, set()
        for ns in due:
            del self._recheck[ns]
        res = self.side.registry.lookup(budgets.GROUP, "v1", _PLURAL)
        assert res is not None
        for namespace in sorted(marked):
            found = self.side.store.list(budgets.GROUP, _PLURAL, namespace)
            pods = self.side.store.list("", "pods", namespace) if found else []
            for pdb in found:
                key = (budgets.GROUP, _PLURAL, namespace, pdb["metadata"]["name"])
                if not self.retries.run(key, partial(self._sync_budget, res, pdb, pods, now)):
                    self._marked.add(namespace)  # backing off or failed: looked at again in a later pass

    def _sync_budget(
        self, res: Resource, pdb: dict[str, Any], pods: list[dict[str, Any]], now: float
    ) -> None:
        side = self.side
        try:
            selector = budgets.pod_selector(pdb)
            selected = [p for p in pods if selector.matches(p["metadata"].get("labels"))]
            status, recheck = budget_status(pdb, selected, self._scale_of, now)
        except (SyncFailed, SelectorError) as exc:
            status, recheck = fail_safe(pdb, SyncFailed(str(exc))), None
        if recheck is not None:
            namespace = pdb["metadata"]["namespace"]
            self._recheck[namespace] = min(recheck, self._recheck.get(namespace, recheck))
        if status != budgets.status_of(pdb):
            side.attempt(f"pdb status {pdb['metadata']['name']}", side.objects.write_status, res, pdb, status)

    def _scale_of(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        """The finders of ``getExpectedScale``: the controller's scale, None when it is gone."""
        store = self.side.store
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        kind, name, uid = ref.get("kind"), ref.get("name", ""), ref.get("uid")
        workloads = {
            ("", "ReplicationController"): ("", "replicationcontrollers"),
            ("apps", "ReplicaSet"): ("apps", "replicasets"),
            ("extensions", "ReplicaSet"): ("apps", "replicasets"),
            ("apps", "StatefulSet"): ("apps", "statefulsets"),
        }
        if (group, kind) in workloads:
            obj = store.get((*workloads[group, kind], namespace, name))
            if obj is None or obj["metadata"].get("uid") != uid:
                return None
            owner = controller_ref(obj) if kind == "ReplicaSet" else None
            if owner is not None and owner.get("kind") == "Deployment":
                deployment = store.get(("apps", "deployments", namespace, owner.get("name", "")))
                if deployment is not None and deployment["metadata"].get("uid") == owner.get("uid"):
                    obj = deployment  # a Deployment's ReplicaSet: the Deployment's scale counts
            return obj["metadata"]["uid"], int((obj.get("spec") or {}).get("replicas") or 0)
        return self._custom_scale(ref, namespace)

    def _custom_scale(self, ref: dict[str, Any], namespace: str) -> tuple[str, int] | None:
        """``getScaleController``: the ``scale`` subresource of the controller's resource."""
        api_version, kind = str(ref.get("apiVersion", "")), ref.get("kind")
        group, _, version = api_version.rpartition("/")
        res = next(
            (r for r in self.side.registry.all() if (r.group, r.version, r.kind) == (group, version, kind)),
            None,
        )
        if res is None:
            raise SyncFailed(f'no matches for kind "{kind}" in version "{api_version}"')
        if res.strategy.scale is None or "scale" not in res.subresources:
            qualified = f"{res.plural}.{group}" if group else res.plural
            raise SyncFailed(f"{qualified} does not implement the scale subresource")
        obj = self.side.store.get((res.storage_group, res.storage_resource, namespace, ref.get("name", "")))
        if obj is None or obj["metadata"].get("uid") != ref.get("uid"):
            return None
        replicas = get_path(obj, res.strategy.scale.get("specReplicasPath", ".spec.replicas"))
        return obj["metadata"]["uid"], int(replicas or 0)
