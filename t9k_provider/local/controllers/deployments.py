"""The apps/v1 Deployment controller, after ``pkg/controller/deployment``: one ReplicaSet per pod template
(named and labelled by its ``pod-template-hash``), a rolling update within ``maxSurge``/``maxUnavailable`` or
a Recreate, the ``deployment.kubernetes.io/revision`` annotation, old ReplicaSets pruned beyond
``revisionHistoryLimit``, and the status with its Available and Progressing conditions (paused, progressing,
complete, or timed out after ``progressDeadlineSeconds`` without progress).

Not done here: proportional scaling of a rollout in progress (a scale mid-rollout only resizes the new
ReplicaSet), adoption of orphaned ReplicaSets and hash collisions.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any, NamedTuple

from t9k_provider.kube.api import KubeApi
from t9k_provider.kube.informer import OWNER_INDEX, Informer, controller_ref, object_key
from t9k_provider.kube.resources import DEPLOYMENTS, REPLICASETS
from t9k_provider.kube.timestamps import now_rfc3339, parse_timestamp
from t9k_provider.local.controllers.owned import owner_reference, template_hash
from t9k_provider.local.controllers.podstate import pod_finished
from t9k_provider.local.machinery import events, workloop
from t9k_provider.local.machinery.selectors import SelectorError, label_selector_from_spec

COMPONENT = "deployment-controller"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"


def _revision(rs: dict[str, Any]) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def resolve(value: Any, total: int, round_up: bool) -> int:
    """An int-or-percent (``maxSurge``, ``maxUnavailable``) as a count of ``total``."""
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value or 0)


def _replicas(rs: dict[str, Any]) -> int:
    return int((rs.get("spec") or {}).get("replicas") or 0)


def _count(rs: dict[str, Any], field: str) -> int:
    return int((rs.get("status") or {}).get(field) or 0)


class _Rollout(NamedTuple):
    """What one sync's rollout steps share: the Deployment and the numbers its spec resolves to."""

    deployment: dict[str, Any]
    replicas: int
    surge: int
    unavailable: int
    pod_hash: str
    max_revision: int  # the highest revision of the old ReplicaSets

    def annotations(self) -> dict[str, str]:
        """The size annotations every ReplicaSet write carries."""
        return {DESIRED: str(self.replicas), MAX_REPLICAS: str(self.replicas + self.surge)}


class DeploymentController(workloop.OwnerController):
    """Owners: Deployments; children: ReplicaSets; and their pods, which a Recreate waits for."""

    resource = DEPLOYMENTS

    def __init__(self, kube: KubeApi, deployments: Informer, replicasets: Informer, pods: Informer) -> None:
        super().__init__(kube, deployments, replicasets)
        self.pods = pods

    def on_pod(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A pod of a Deployment's ReplicaSet changed or went: that Deployment looks again."""
        for pod in (old, new):
            ref = controller_ref(pod) if pod is not None else None
            if ref is None or ref.get("kind") != "ReplicaSet":
                continue
            rs = self.children.get(object_key(pod)[0], ref["name"])
            if rs is not None:
                self.on_child(None, rs)

    async def sync(self, d: dict[str, Any]) -> None:
        spec = d.get("spec") or {}
        try:
            label_selector_from_spec(spec.get("selector"))
        except SelectorError:
            return
        owned = [rs for rs in self.children.by_index(OWNER_INDEX, d["metadata"]["uid"])]
        live = [rs for rs in owned if not rs["metadata"].get("deletionTimestamp")]
        template = spec.get("template") or {}
        pod_hash = template_hash(template)
        new_rs = next(
            (rs for rs in live if (rs["metadata"].get("labels") or {}).get(HASH_LABEL) == pod_hash), None
        )
        old = [rs for rs in live if rs is not new_rs]
        replicas = int(spec.get("replicas", 1))
        strategy = spec.get("strategy") or {}
        rolling = strategy.get("rollingUpdate") or {}
        surge = resolve(rolling.get("maxSurge"), replicas, True) if strategy.get("type") != "Recreate" else 0
        unavailable = resolve(rolling.get("maxUnavailable"), replicas, False)
        if surge == 0 and unavailable == 0 and strategy.get("type") != "Recreate":
            unavailable = 1
        max_revision = max((_revision(rs) for rs in old), default=0)
        rollout = _Rollout(d, replicas, surge, unavailable, pod_hash, max_revision)
        if not spec.get("paused"):
            if strategy.get("type") == "Recreate":
                new_rs = await self._recreate(rollout, new_rs, old)
            else:
                new_rs = await self._roll(rollout, new_rs, old)
            await self._prune(d, old)
            if new_rs is not None:
                d = await self._set_revision(d, new_rs)
        await self._update_status(d, new_rs, old, replicas, unavailable)

    async def _set_revision(self, d: dict[str, Any], new_rs: dict[str, Any]) -> dict[str, Any]:
        """The Deployment carries its new ReplicaSet's revision (``kubectl rollout undo`` replaces it)."""
        revision = (new_rs["metadata"].get("annotations") or {}).get(REVISION)
        meta = d["metadata"]
        if revision is None or (meta.get("annotations") or {}).get(REVISION) == revision:
            return d
        patch = {"metadata": {"annotations": {REVISION: revision}}}
        updated = await self.kube.patch(DEPLOYMENTS, meta.get("namespace", ""), meta["name"], patch)
        self.owners.observe(updated)
        return updated

    # -- strategies ------------------------------------------------------------------------------------------

    async def _recreate(
        self, r: _Rollout, new_rs: dict[str, Any] | None, old: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """Old ReplicaSets to zero; the new one once no pod of theirs is left, terminating ones included."""
        for rs in old:
            if _replicas(rs) > 0:
                await self._scale(r, rs, 0)
        old_pods = [p for rs in old for p in self.pods.by_index(OWNER_INDEX, rs["metadata"]["uid"])]
        if any(_replicas(rs) > 0 for rs in old) or any(not pod_finished(p) for p in old_pods):
            return new_rs
        return await self._new_replicaset(r, new_rs, r.replicas)

    async def _roll(
        self, r: _Rollout, new_rs: dict[str, Any] | None, old: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """``rolloutRolling``: the new ReplicaSet up within surge, old ones down within unavailability."""
        replicas = r.replicas
        old_total = sum(_replicas(rs) for rs in old)
        if new_rs is None or _replicas(new_rs) < replicas:
            current = _replicas(new_rs) if new_rs is not None else 0
            room = replicas + r.surge - old_total - current
            target = min(replicas, current + max(room, 0)) if old_total else replicas
            new_rs = await self._new_replicaset(r, new_rs, target)
        elif _replicas(new_rs) > replicas:
            new_rs = await self._scale(r, new_rs, replicas)
        if not old_total:
            return new_rs
        min_available = replicas - r.unavailable
        new_unavailable = _replicas(new_rs) - _count(new_rs, "availableReplicas") if new_rs else 0
        budget = old_total + (_replicas(new_rs) if new_rs else 0) - min_available - new_unavailable
        by_age = sorted(old, key=lambda rs: (_revision(rs), rs["metadata"].get("creationTimestamp", "")))
        for rs in by_age:  # unhealthy old pods first: removing them costs no availability
            if budget <= 0:
                break
            cut = min(budget, _replicas(rs) - _count(rs, "availableReplicas"))
            if cut > 0:
                await self._scale(r, rs, _replicas(rs) - cut)
                budget -= cut
        available = sum(_count(rs, "availableReplicas") for rs in [*old, *([new_rs] if new_rs else [])])
        budget = min(budget, available - min_available)
        for rs in by_age:
            current = self.children.get(*object_key(rs)) or rs
            if budget <= 0:
                break
            cut = min(budget, _replicas(current))
            if cut > 0:
                await self._scale(r, current, _replicas(current) - cut)
                budget -= cut
        return new_rs

    # -- ReplicaSets ---------------------------------------------------------------------------------------

    async def _new_replicaset(self, r: _Rollout, rs: dict[str, Any] | None, target: int) -> dict[str, Any]:
        """Create the template's ReplicaSet, or bring it to ``target`` and the newest revision."""
        d, pod_hash = r.deployment, r.pod_hash
        revision = str(r.max_revision + 1)
        annotations = {**r.annotations(), REVISION: revision}
        if rs is not None:
            current = rs["metadata"].get("annotations") or {}
            if _revision(rs) > r.max_revision:
                annotations[REVISION] = current.get(REVISION, revision)
            if _replicas(rs) == target and all(current.get(k) == v for k, v in annotations.items()):
                return rs
            meta = rs["metadata"]
            patch = {"metadata": {"annotations": annotations}, "spec": {"replicas": target}}
            updated = await self.kube.patch(REPLICASETS, meta.get("namespace", ""), meta["name"], patch)
            self.children.observe(updated)
            if _replicas(rs) != target:
                await self._scaled_event(d, updated, _replicas(rs), target)
            return updated
        meta, spec = d["metadata"], d.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: pod_hash}
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: pod_hash}
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{pod_hash}",
                "labels": tmeta["labels"],
                "annotations": annotations,
                "ownerReferences": [owner_reference(d)],
            },
            "spec": {
                "replicas": target,
                "minReadySeconds": spec.get("minReadySeconds", 0),
                "selector": selector,
                "template": template,
            },
        }
        created = await self.kube.create(REPLICASETS, meta.get("namespace", ""), body)
        self.children.observe(created)
        await self._scaled_event(d, created, 0, target)
        return created

    async def _scale(self, r: _Rollout, rs: dict[str, Any], target: int) -> dict[str, Any]:
        meta = rs["metadata"]
        patch = {"metadata": {"annotations": r.annotations()}, "spec": {"replicas": target}}
        updated = await self.kube.patch(REPLICASETS, meta.get("namespace", ""), meta["name"], patch)
        self.children.observe(updated)
        await self._scaled_event(r.deployment, updated, _replicas(rs), target)
        return updated

    async def _scaled_event(self, d: dict[str, Any], rs: dict[str, Any], before: int, after: int) -> None:
        way = "up" if after > before else "down"
        message = f"Scaled {way} replica set {rs['metadata']['name']} from {before} to {after}"
        await events.record(self.kube, d, "ScalingReplicaSet", message, component=COMPONENT)

    async def _prune(self, d: dict[str, Any], old: list[dict[str, Any]]) -> None:
        """Delete the oldest empty ReplicaSets beyond ``revisionHistoryLimit``."""
        limit = int((d.get("spec") or {}).get("revisionHistoryLimit", 10))
        empty = [rs for rs in old if _replicas(rs) == 0 and _count(rs, "replicas") == 0]
        for rs in sorted(empty, key=_revision)[: max(0, len(empty) - limit)]:
            meta = rs["metadata"]
            await self.kube.delete(REPLICASETS, meta.get("namespace", ""), meta["name"], uid=meta["uid"])

    # -- status ----------------------------------------------------------------------------------------------

    async def _update_status(
        self,
        d: dict[str, Any],
        new_rs: dict[str, Any] | None,
        old: list[dict[str, Any]],
        replicas: int,
        unavailable: int,
    ) -> None:
        meta, status = d["metadata"], dict(d.get("status") or {})
        every = [*old, *([new_rs] if new_rs else [])]
        total = sum(_count(rs, "replicas") for rs in every)
        available = sum(_count(rs, "availableReplicas") for rs in every)
        updated = _count(new_rs, "replicas") if new_rs else 0
        new_status: dict[str, Any] = {
            "observedGeneration": meta.get("generation", 0),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": sum(_count(rs, "readyReplicas") for rs in every),
            "availableReplicas": available,
            "unavailableReplicas": max(0, replicas - available),
        }
        conditions = {c.get("type"): c for c in status.get("conditions") or ()}
        now = now_rfc3339()
        if available >= replicas - unavailable:
            self._condition(
                conditions,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            )
        else:
            self._condition(
                conditions,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            )
        self._progressing(d, conditions, new_rs, new_status, replicas, now)
        # counters at zero are omitted, as the Go type serialises them; null removes them in the merge patch
        merged = {
            **status,
            **{k: v or None for k, v in new_status.items()},
            "conditions": list(conditions.values()),
        }
        await self.write_status(d, merged)

    def _progressing(
        self,
        d: dict[str, Any],
        conditions: dict[str, Any],
        new_rs: dict[str, Any] | None,
        new_status: dict[str, Any],
        replicas: int,
        now: str,
    ) -> None:
        """The Progressing condition (``syncRolloutStatus``): paused, complete, progressing (each step of
        progress renews ``lastUpdateTime``) or, ``progressDeadlineSeconds`` after the last one, timed out."""
        spec, status = d.get("spec") or {}, d.get("status") or {}
        current = conditions.get("Progressing") or {}
        if spec.get("paused"):
            self._condition(
                conditions, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", now
            )
            return
        if new_rs is None:
            return
        name = new_rs["metadata"]["name"]
        updated, total = new_status["updatedReplicas"], new_status["replicas"]
        if updated == replicas and new_status["availableReplicas"] >= replicas and total == replicas:
            message = f'ReplicaSet "{name}" has successfully progressed.'
            self._condition(conditions, "Progressing", "True", "NewReplicaSetAvailable", message, now)
            return
        progressed = (
            updated > int(status.get("updatedReplicas") or 0)
            or total - updated < int(status.get("replicas") or 0) - int(status.get("updatedReplicas") or 0)
            or new_status["readyReplicas"] > int(status.get("readyReplicas") or 0)
            or new_status["availableReplicas"] > int(status.get("availableReplicas") or 0)
        )
        message = f'ReplicaSet "{name}" is progressing.'
        timed_out = f'ReplicaSet "{name}" has timed out progressing.'
        known = {("ReplicaSetUpdated", message), ("ProgressDeadlineExceeded", timed_out)}
        if progressed or (current.get("reason"), current.get("message")) not in known:
            self._condition(conditions, "Progressing", "True", "ReplicaSetUpdated", message, now, renew=True)
            current = conditions["Progressing"]
        deadline = spec.get("progressDeadlineSeconds")
        if deadline is None or current.get("reason") != "ReplicaSetUpdated":
            return
        waited = time.time() - parse_timestamp(current["lastUpdateTime"]).timestamp()
        if waited >= deadline:
            self._condition(conditions, "Progressing", "False", "ProgressDeadlineExceeded", timed_out, now)
        else:
            self.queue.add_after(object_key(d), deadline - waited + 0.05)

    @staticmethod
    def _condition(
        conditions: dict[str, Any],
        ctype: str,
        status: str,
        reason: str,
        message: str,
        now: str,
        *,
        renew: bool = False,
    ) -> None:
        """Set a condition; an unchanged one keeps its times unless ``renew`` (new progress) says so."""
        current = conditions.get(ctype) or {}
        wanted = (status, reason, message)
        unchanged = (current.get("status"), current.get("reason"), current.get("message")) == wanted
        if unchanged and not renew:
            return
        transition = current.get("lastTransitionTime") if current.get("status") == status else now
        conditions[ctype] = {
            "type": ctype,
            "status": status,
            "lastUpdateTime": now,
            "lastTransitionTime": transition or now,
            "reason": reason,
            "message": message,
        }
