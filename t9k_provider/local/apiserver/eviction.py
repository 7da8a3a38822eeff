"""The ``pods/eviction`` subresource (``pkg/registry/core/pod/storage/eviction.go``): a pod deleted with the
consent of the PodDisruptionBudget that covers it (docs/local-cluster.md#eviction-and-poddisruptionbudgets).

A POST of a policy/v1 (or v1beta1) Eviction, JSON or protobuf. A pod that is finished, Pending or already
being deleted is deleted without asking a budget; otherwise the budgets of the pod's namespace whose selector
matches it decide: none, the pod goes; more than one, 500; one, it must allow a disruption
(``status.disruptionsAllowed`` > 0 and its status observed for its current generation, else 429), which the
eviction spends: ``disruptionsAllowed`` goes down by one and the pod is recorded in ``disruptedPods`` (the
disruption controller then counts it out until it is gone, ``controllers/disruption.py``). An unhealthy (not
Ready) pod goes without spending the budget while the budget is met, or always under
``unhealthyPodEvictionPolicy: AlwaysAllow``. Before the delete, the pod gets ``DisruptionTarget=True``
(reason ``EvictionByEvictionAPI``) through its status; the delete is graceful, with the Eviction's
``deleteOptions`` (grace period, uid and resourceVersion preconditions, dry run).

Each step runs in the server's one thread without yielding, so the check of the budget, its decrement and the
delete are one atomic step: the conflicts upstream retries cannot happen here.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from aiohttp import web

from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.apiserver.deletion import body_delete_options
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.generic.validation import invalid_kind
from t9k_provider.local.apiserver.objects import DeleteOptions, Objects
from t9k_provider.local.apiserver.strategies import poddisruptionbudgets as budgets
from t9k_provider.local.apiserver.wire import Route, read_body, respond
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause

#: The Eviction versions the subresource accepts (``AcceptsGroupVersion``).
VERSIONS = ("policy/v1", "policy/v1beta1")
#: Evictions a budget's controller has not confirmed yet beyond which the budget refuses more.
MAX_DISRUPTED_PODS = 2000
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
TOO_MANY_REQUESTS = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE_BUDGET = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
DISRUPTION_TARGET = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "EvictionByEvictionAPI",
    "message": "Eviction API: evicting",
}
_SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


async def pod_eviction(objects: Objects, request: web.Request, route: Route) -> web.Response:
    opts = eviction_options(await read_body(request), route)
    if "All" in request.query.getall("dryRun", []):  # ``propagateDryRun``: the query's dry run counts too
        opts = replace(opts, dry_run=True)
    policy = objects.registry.lookup(budgets.GROUP, "v1", budgets.RESOURCE.plural)
    assert policy is not None
    Eviction(objects, route.res, policy, route.namespace or "", route.name).run(opts)
    return respond(_SUCCESS, 201)


def eviction_options(body: Any, route: Route) -> DeleteOptions:
    """The delete options of an Eviction body, once the body is one for this pod (else 400, as decoding and
    the create handler answer) and its ``deleteOptions`` are valid (else 422)."""
    if not isinstance(body, dict):
        raise errors.bad_request(f"Object 'Kind' is missing in '{json.dumps(body)[:200]}'")
    kind, version = body.get("kind"), body.get("apiVersion")
    if kind not in (None, "", "Eviction"):
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a Eviction: the kind in the request '
            f"({kind}) does not match the expected kind (Eviction)"
        )
    if version not in (None, "", *VERSIONS):
        raise errors.bad_request(
            f"the API version in the data ({version}) does not match the expected API version (policy/v1)"
        )
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise errors.bad_request(
            'Eviction in version "v1" cannot be handled as a Eviction: json: cannot unmarshal into Go '
            "struct field Eviction.metadata of type v1.ObjectMeta"
        )
    if meta.get("namespace") not in (None, "", route.namespace):
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if meta.get("name") != route.name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = body.get("deleteOptions")
    if options is not None and not isinstance(options, dict):
        raise errors.bad_request(
            f"json: cannot unmarshal {type(options).__name__} into Go struct field Eviction.deleteOptions "
            "of type v1.DeleteOptions"
        )
    parsed = body_delete_options(options or {})
    causes = delete_options_causes(options or {})
    if causes:
        raise invalid_kind("Eviction", budgets.GROUP, route.name or "", causes)
    return parsed


def delete_options_causes(options: dict[str, Any]) -> list[Cause]:
    """``ValidateDeleteOptions`` of the Eviction's ``deleteOptions``, each cause naming its field. Checked
    before the pod is marked or a budget spent: kube-apiserver meets them only at the delete, after both, so
    there a refused eviction has marked the pod and spent the budget; here it changes nothing."""
    causes = []
    policy = options.get("propagationPolicy")
    if policy is not None and options.get("orphanDependents") is not None:
        detail = "orphanDependents and deletionPropagation cannot be both set"
        causes.append(fe.invalid("deleteOptions.propagationPolicy", policy, detail))
    if policy is not None and policy not in PROPAGATION_POLICIES:
        causes.append(fe.not_supported("deleteOptions.propagationPolicy", policy, [*PROPAGATION_POLICIES]))
    dry = options.get("dryRun") or []
    if any(value != "All" for value in (dry if isinstance(dry, list) else [dry])):
        causes.append(fe.not_supported("deleteOptions.dryRun", dry, ["All"]))
    return causes


class Eviction:
    """One eviction of the pod ``namespace/name``; ``run`` deletes it or raises the refusal."""

    def __init__(self, objects: Objects, pods: Resource, policy: Resource, namespace: str, name: str) -> None:
        self.objects = objects
        self.pods = pods
        self.policy = policy
        self.namespace = namespace
        self.name = name

    def run(self, opts: DeleteOptions) -> None:
        pod = self.objects.get(self.pods, self.namespace, self.name)
        meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed", "Pending") or meta.get("deletionTimestamp"):
            # It has disrupted already, or never served: no budget to ask. A Pending pod is deleted only as
            # it was read, so that it cannot have become Ready (and guarded) in between.
            if phase == "Pending" and not meta.get("deletionTimestamp") and not opts.resource_version:
                opts = replace(opts, resource_version=meta["resourceVersion"])
            self._mark_and_delete(opts)
            return
        covering = [
            b
            for b in self.objects.list(self.policy, self.namespace)
            if budgets.selects(b, meta.get("labels"))
        ]
        if len(covering) > 1:
            raise errors.ApiError(500, "", MORE_THAN_ONE_BUDGET)
        if not covering:
            self._mark_and_delete(opts)
            return
        budget = covering[0]
        if not budgets.pod_healthy(pod) and _unhealthy_may_go(budget):
            # Not counted healthy, so the budget is not spent: the pod goes as it was read (upstream puts its
            # resourceVersion in the preconditions, in place of any the client gave).
            self._mark_and_delete(replace(opts, resource_version=meta["resourceVersion"]))
            return
        self._spend(budget, opts.dry_run)
        self._mark_and_delete(opts)

    def _spend(self, budget: dict[str, Any], dry_run: bool) -> None:
        """``checkAndDecrement``: refuse unless the budget allows a disruption, else take one."""
        meta, status = budget["metadata"], budgets.status_of(budget)
        name = meta["name"]
        if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
            raise _still_processing(budget)
        disrupted = status.get("disruptedPods") or {}
        if len(disrupted) > MAX_DISRUPTED_PODS:
            raise errors.forbidden(
                f'poddisruptionbudget.policy "{name}" is forbidden: DisruptedPods map too big - too many '
                "evictions not confirmed by PDB controller",
                name,
                "poddisruptionbudget",
                budgets.GROUP,
            )
        allowed = int(status.get("disruptionsAllowed") or 0)
        if allowed <= 0:
            cause = (
                f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods and has "
                f"{status.get('currentHealthy', 0)} currently"
            )
            raise _too_many_requests(cause, retry_after=0)
        if dry_run:
            return
        spent = {**status, "disruptionsAllowed": allowed - 1, "disruptedPods": {**disrupted}}
        spent["disruptedPods"][self.name] = now_rfc3339()
        if allowed == 1:
            spent = budgets.with_disruption_allowed(spent)
        self.objects.write_status(self.policy, budget, spent)

    def _mark_and_delete(self, opts: DeleteOptions) -> None:
        """``addConditionAndDeletePod``: the preconditions hold, the pod is marked DisruptionTarget through
        its status, then deleted (a resourceVersion precondition moves on with the mark, which is ours)."""
        if not opts.dry_run:
            pod = self.objects.get(self.pods, self.namespace, self.name)
            meta = pod["metadata"]
            if opts.uid and opts.uid != meta.get("uid"):
                raise errors.conflict(
                    "Pod",
                    "",
                    self.name,
                    f"the UID in the precondition ({opts.uid}) does not match the UID in record "
                    f"({meta.get('uid')}). The object might have been deleted and then recreated",
                )
            if opts.resource_version and opts.resource_version != meta["resourceVersion"]:
                raise errors.conflict(
                    "Pod",
                    "",
                    self.name,
                    f"the ResourceVersion in the precondition ({opts.resource_version}) does not match the "
                    f"ResourceVersion in record ({meta['resourceVersion']}). The object might have been "
                    "modified",
                )
            marked = self.objects.write_status(self.pods, pod, _with_disruption_target(pod))
            if opts.resource_version:
                opts = replace(opts, resource_version=marked["metadata"]["resourceVersion"])
        self.objects.delete(self.pods, self.namespace, self.name, opts)


def _unhealthy_may_go(budget: dict[str, Any]) -> bool:
    """Whether an unhealthy pod may go without spending the budget: always under AlwaysAllow; under
    IfHealthyBudget (the default) while the budget is met and asks for some pods."""
    if budgets.spec_of(budget).get("unhealthyPodEvictionPolicy") == budgets.ALWAYS_ALLOW:
        return True
    status = budgets.status_of(budget)
    desired = int(status.get("desiredHealthy") or 0)
    return int(status.get("currentHealthy") or 0) >= desired > 0


def _with_disruption_target(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod's status with the eviction's DisruptionTarget condition (``UpdatePodCondition``: the
    transition time moves only when the condition's status does)."""
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == DISRUPTION_TARGET["type"]), None)
    same = old is not None and old.get("status") == DISRUPTION_TARGET["status"]
    condition = {
        **DISRUPTION_TARGET,
        "lastProbeTime": None,
        "lastTransitionTime": old.get("lastTransitionTime") if same and old else now_rfc3339(),
    }
    status["conditions"] = [condition if c is old else c for c in conditions] + ([] if old else [condition])
    return status


def _too_many_requests(cause: str, retry_after: int) -> errors.ApiError:
    """``errors.NewTooManyRequests`` with the DisruptionBudget cause (``policyv1.DisruptionBudgetCause``)."""
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return errors.ApiError(429, "TooManyRequests", TOO_MANY_REQUESTS, details)


def _still_processing(budget: dict[str, Any]) -> errors.ApiError:
    name = budget["metadata"]["name"]
    return _too_many_requests(f"The disruption budget {name} is still being processed by the server.", 10)
