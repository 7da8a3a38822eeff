"""The eviction subresource's decisions, driven in-process on a store with no controller running (so a
budget's status is exactly what each test wrote): budgets allowing, refusing and spent, unhealthy pods,
pods that need no budget, preconditions, dry run, and the Eviction body's checks. Through HTTP and real
clients: ``test_api_disruption.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from t9k_provider.local.apiserver.eviction import (
    MORE_THAN_ONE_BUDGET,
    TOO_MANY_REQUESTS,
    Eviction,
    eviction_options,
)
from t9k_provider.local.apiserver.generic.errors import ApiError
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.objects import DeleteOptions, Objects
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.apiserver.strategies.poddisruptionbudgets import INITIAL_STATUS
from t9k_provider.local.apiserver.wire import Route, error_response
from t9k_provider.local.storage.store import Store

NS = "default"
APP = {"app": "web"}


class Cluster:
    """A store with the resources an eviction touches; no controller runs."""

    def __init__(self, tmp_path: Path) -> None:
        registry = ServedResources()
        self.objects = Objects(Store(tmp_path / "store.db"), registry)
        namespaces = registry.lookup("", "v1", "namespaces")
        pods = registry.lookup("", "v1", "pods")
        budgets = registry.lookup("policy", "v1", "poddisruptionbudgets")
        assert namespaces is not None and pods is not None and budgets is not None
        self.pods: Resource = pods
        self.budgets: Resource = budgets
        self.objects.create(namespaces, "", {"metadata": {"name": NS}})

    def pod(
        self, name: str, labels: dict[str, str] = APP, phase: str = "Running", ready: bool = True
    ) -> dict[str, Any]:
        """A pod bound to a node (so its deletion is graceful), with the status a kubelet would write."""
        body = {
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
        }
        created = self.objects.create(self.pods, NS, body)
        ready_condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "lastProbeTime": None,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        return self.objects.write_status(
            self.pods, created, {"phase": phase, "conditions": [ready_condition]}
        )

    def budget(self, name: str, spec: dict[str, Any], **status: Any) -> dict[str, Any]:
        """A budget whose status is what its controller would have written (observed unless told)."""
        created = self.objects.create(self.budgets, NS, {"metadata": {"name": name}, "spec": spec})
        return self.objects.write_status(
            self.budgets, created, {**INITIAL_STATUS, "observedGeneration": 1, **status}
        )

    def evict(self, name: str, **options: Any) -> None:
        Eviction(self.objects, self.pods, self.budgets, NS, name).run(DeleteOptions(**options))

    def get_pod(self, name: str) -> dict[str, Any] | None:
        return self.objects.store.get(("", "pods", NS, name))

    def get_budget(self, name: str) -> dict[str, Any]:
        found = self.objects.store.get(("policy", "poddisruptionbudgets", NS, name))
        assert found is not None
        return found


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path)


def condition(pod: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    assert pod is not None
    return next((c for c in pod["status"].get("conditions") or () if c["type"] == kind), None)


def refusal(cluster: Cluster, name: str, **options: Any) -> ApiError:
    before = cluster.get_pod(name)
    with pytest.raises(ApiError) as caught:
        cluster.evict(name, **options)
    assert cluster.get_pod(name) == before, "a refused eviction changes nothing"
    return caught.value


def test_a_pod_no_budget_covers_is_marked_and_deleted_gracefully(cluster: Cluster) -> None:
    cluster.pod("a")
    cluster.budget("other", {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}})
    cluster.budget("unset", {"minAvailable": 1})  # no selector: covers no pod
    cluster.evict("a")
    pod = cluster.get_pod("a")
    assert pod is not None and pod["metadata"]["deletionGracePeriodSeconds"] == 30
    mark = condition(pod, "DisruptionTarget")
    assert mark is not None and mark.pop("lastTransitionTime")
    assert mark == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
        "lastProbeTime": None,
    }


def test_a_budget_allowing_one_disruption_spends_it_then_refuses_with_429(cluster: Cluster) -> None:
    for name in ("a", "b", "c"):
        cluster.pod(name)
    cluster.budget(
        "web",
        {"minAvailable": 2, "selector": {"matchLabels": APP}},
        disruptionsAllowed=1,
        currentHealthy=3,
        desiredHealthy=2,
        expectedPods=3,
    )
    cluster.evict("a", grace_period=5)
    assert cluster.get_pod("a")["metadata"]["deletionGracePeriodSeconds"] == 5  # type: ignore[index]
    status = cluster.get_budget("web")["status"]
    assert status["disruptionsAllowed"] == 0 and list(status["disruptedPods"]) == ["a"]
    allowed = condition({"status": status}, "DisruptionAllowed")
    assert allowed is not None
    assert (allowed["status"], allowed["reason"], allowed["observedGeneration"]) == (
        "False",
        "InsufficientPods",
        1,
    )

    refused = refusal(cluster, "b")
    assert refused.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": TOO_MANY_REQUESTS,
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web needs 2 healthy pods and has 3 currently",
                }
            ]
        },
        "code": 429,
    }
    assert "Retry-After" not in error_response(refused).headers


def test_a_budget_not_yet_observed_refuses_and_says_when_to_retry(cluster: Cluster) -> None:
    cluster.pod("a")
    cluster.budget(
        "web",
        {"maxUnavailable": 1, "selector": {"matchLabels": APP}},
        observedGeneration=0,
        disruptionsAllowed=1,
    )
    refused = refusal(cluster, "a")
    assert (refused.code, refused.message) == (429, TOO_MANY_REQUESTS)
    assert refused.details == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web is still being processed by the server.",
            }
        ],
        "retryAfterSeconds": 10,
    }
    assert error_response(refused).headers["Retry-After"] == "10"


def test_a_pod_under_two_budgets_is_refused_with_500(cluster: Cluster) -> None:
    cluster.pod("a")
    cluster.budget("one", {"maxUnavailable": 1, "selector": {"matchLabels": APP}}, disruptionsAllowed=1)
    cluster.budget("all", {"maxUnavailable": 1, "selector": {}}, disruptionsAllowed=1)  # {}: every pod
    refused = refusal(cluster, "a")
    assert (refused.code, refused.message) == (500, MORE_THAN_ONE_BUDGET)


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Pending"])
def test_finished_and_pending_pods_go_without_asking_the_budget(cluster: Cluster, phase: str) -> None:
    cluster.pod("a", phase=phase)
    cluster.budget("web", {"minAvailable": "100%", "selector": {"matchLabels": APP}})
    cluster.evict("a")
    pod = cluster.get_pod("a")
    if phase == "Pending":  # still bound to its node: it lingers for the kubelet, marked
        assert pod is not None and pod["metadata"].get("deletionTimestamp")
        assert condition(pod, "DisruptionTarget") is not None
    else:  # finished: nothing to wait for
        assert pod is None
    assert cluster.get_budget("web")["status"]["disruptionsAllowed"] == 0
    assert "disruptedPods" not in cluster.get_budget("web")["status"]


def test_a_terminating_pod_is_evicted_again_without_the_budget(cluster: Cluster) -> None:
    cluster.pod("a")
    cluster.evict("a")
    cluster.budget("web", {"minAvailable": 1, "selector": {"matchLabels": APP}})
    cluster.evict("a", grace_period=0)
    assert cluster.get_pod("a") is None


def test_unhealthy_pods_go_while_the_budget_holds_or_under_always_allow(cluster: Cluster) -> None:
    cluster.pod("sick", ready=False)
    cluster.pod("sick2", ready=False)
    selector = {"matchLabels": APP}
    met = {"currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 3}
    cluster.budget("web", {"minAvailable": 2, "selector": selector}, **met)
    cluster.evict("sick")  # the budget holds: the sick pod goes, nothing spent
    assert cluster.get_pod("sick")["metadata"].get("deletionTimestamp")  # type: ignore[index]
    assert cluster.get_budget("web")["status"] == {**INITIAL_STATUS, "observedGeneration": 1, **met}

    broken = {"currentHealthy": 1, "desiredHealthy": 2, "expectedPods": 3}
    budget = cluster.get_budget("web")
    cluster.objects.write_status(cluster.budgets, budget, {**budget["status"], **broken})
    assert refusal(cluster, "sick2").code == 429  # IfHealthyBudget: the application is disrupted already

    budget = cluster.get_budget("web")
    spec = {**budget["spec"], "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    cluster.objects.write(cluster.budgets, budget, {**budget, "spec": spec})
    cluster.objects.write_status(
        cluster.budgets, cluster.get_budget("web"), {**budget["status"], "observedGeneration": 2}
    )
    cluster.evict("sick2")
    assert cluster.get_pod("sick2")["metadata"].get("deletionTimestamp")  # type: ignore[index]
    assert cluster.get_budget("web")["status"]["disruptionsAllowed"] == 0


def test_preconditions_are_checked_before_the_pod_is_marked(cluster: Cluster) -> None:
    pod = cluster.pod("a")
    uid, version = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]
    stale = refusal(cluster, "a", uid="other")
    assert stale.code == 409 and stale.message == (
        'Operation cannot be fulfilled on Pod "a": the UID in the precondition (other) does not match the '
        f"UID in record ({uid}). The object might have been deleted and then recreated"
    )
    moved = refusal(cluster, "a", resource_version="1")
    assert moved.code == 409 and moved.message == (
        'Operation cannot be fulfilled on Pod "a": the ResourceVersion in the precondition (1) does not '
        f"match the ResourceVersion in record ({version}). The object might have been modified"
    )
    cluster.evict("a", uid=uid, resource_version=version)  # the mark moves the version on; the delete follows
    assert cluster.get_pod("a")["metadata"].get("deletionTimestamp")  # type: ignore[index]


def test_a_dry_run_changes_neither_the_pod_nor_the_budget(cluster: Cluster) -> None:
    pod = cluster.pod("a")
    budget = cluster.budget(
        "web", {"maxUnavailable": 1, "selector": {"matchLabels": APP}}, disruptionsAllowed=1
    )
    cluster.evict("a", dry_run=True)
    assert cluster.get_pod("a") == pod and cluster.get_budget("web") == budget


def test_too_many_unconfirmed_evictions_are_forbidden(cluster: Cluster) -> None:
    cluster.pod("a")
    pending = {f"p{i}": "2026-01-01T00:00:00Z" for i in range(2001)}
    cluster.budget(
        "web",
        {"maxUnavailable": 1, "selector": {"matchLabels": APP}},
        disruptionsAllowed=1,
        disruptedPods=pending,
    )
    refused = refusal(cluster, "a")
    assert refused.code == 403 and refused.message == (
        'poddisruptionbudget.policy "web" is forbidden: DisruptedPods map too big - too many evictions not '
        "confirmed by PDB controller"
    )


def test_a_missing_pod_is_404(cluster: Cluster) -> None:
    with pytest.raises(ApiError) as caught:
        cluster.evict("ghost")
    assert (caught.value.code, caught.value.message) == (404, 'pods "ghost" not found')


# -- the Eviction body -----------------------------------------------------------------------------------


def _route(cluster: Cluster) -> Route:
    return Route(cluster.pods, NS, "a", "eviction")


@pytest.mark.parametrize("version", ["policy/v1", "policy/v1beta1", None])
def test_an_eviction_body_gives_its_delete_options(cluster: Cluster, version: str | None) -> None:
    body: dict[str, Any] = {"kind": "Eviction", "metadata": {"name": "a", "namespace": NS}}
    if version:
        body["apiVersion"] = version
    body["deleteOptions"] = {"gracePeriodSeconds": 0, "preconditions": {"uid": "u"}, "dryRun": ["All"]}
    assert eviction_options(body, _route(cluster)) == DeleteOptions(grace_period=0, uid="u", dry_run=True)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "Object 'Kind' is missing in '[]'"),
        (
            {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "a"}},
            'Pod in version "v1" cannot be handled as a Eviction',
        ),
        (
            {"apiVersion": "v1", "kind": "Eviction", "metadata": {"name": "a"}},
            "the API version in the data (v1) does not match",
        ),
        ({"metadata": ["a"]}, "cannot unmarshal into Go struct field Eviction.metadata"),
        ({"metadata": {"name": "b"}}, "name in URL does not match name in Eviction object"),
        ({"metadata": {}}, "name in URL does not match name in Eviction object"),
        (
            {"metadata": {"name": "a", "namespace": "x"}},
            "the namespace of the provided object does not match",
        ),
        (
            {"metadata": {"name": "a"}, "deleteOptions": 3},
            "cannot unmarshal int into Go struct field Eviction.deleteOptions",
        ),
        (
            {"metadata": {"name": "a"}, "deleteOptions": {"gracePeriodSeconds": "5"}},
            "DeleteOptions.gracePeriodSeconds",
        ),
    ],
)
def test_a_malformed_eviction_is_a_400(cluster: Cluster, body: Any, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        eviction_options(body, _route(cluster))
    assert caught.value.code == 400 and message in caught.value.message


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        (
            {"propagationPolicy": "Sideways"},
            "deleteOptions.propagationPolicy",
            'Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan"',
        ),
        (
            {"propagationPolicy": "Orphan", "orphanDependents": True},
            "deleteOptions.propagationPolicy",
            'Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set',
        ),
        (
            {"dryRun": ["Maybe"]},
            "deleteOptions.dryRun",
            'Unsupported value: ["Maybe"]: supported values: "All"',
        ),
    ],
)
def test_invalid_delete_options_are_a_422_naming_the_field(
    cluster: Cluster, options: dict[str, Any], field: str, message: str
) -> None:
    """``ValidateDeleteOptions``, before anything is marked or spent (the HTTP test checks that)."""
    with pytest.raises(ApiError) as caught:
        eviction_options({"metadata": {"name": "a"}, "deleteOptions": options}, _route(cluster))
    assert (
        caught.value.code == 422
        and caught.value.message == f'Eviction.policy "a" is invalid: {field}: {message}'
    )
    assert [c["field"] for c in caught.value.details["causes"]] == [field]
