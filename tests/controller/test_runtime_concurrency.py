"""A reconcile sends independent actions (a run of creates or deletes of one kind) together, against the real
local API server: the requests overlap, one rejected create does not stop the others, and an unexpected
error from one is raised only after the rest have been attempted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from t9k_provider.controller.engine import Create, Delete, Patch
from t9k_provider.controller.kinds.registry import WATCHED_CHILD_TYPES
from t9k_provider.controller.reconcile import reconcile
from t9k_provider.controller.runtime.cache import Caches
from t9k_provider.controller.runtime.events import EventRecorder
from t9k_provider.controller.runtime.jobsync import JobSync, action_runs
from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.jobs import API_VERSION, KINDS
from t9k_provider.kube.api import KubeApi
from t9k_provider.kube.informer import OWNER_INDEX, Informer, by_owner
from t9k_provider.kube.resources import PODS, ResourceType
from t9k_provider.testing import LocalCluster
from tests.controller.e2e_support import NS
from tests.support.builders import make_container, make_job, make_template
from tests.support.clusters import cluster_fixture

pytestmark = pytest.mark.cluster

JOB_TYPES = [ResourceType(API_VERSION, k, cls.PLURAL) for k, cls in KINDS.items()]
GENERIC = next(rt for rt in JOB_TYPES if rt.kind == "GenericJob")


def pod(name: str) -> Create:
    return Create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}})


def test_runs_group_consecutive_creates_or_deletes_of_one_kind() -> None:
    svc = Create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
    gone = Delete("v1", "Pod", "old")
    patch = Patch("v1", "Pod", "p", {"metadata": {"labels": {"a": "b"}}})
    actions = [svc, svc, pod("a"), pod("b"), gone, gone, patch, patch, pod("c"), svc]
    assert action_runs(actions) == [
        [svc, svc],
        [pod("a"), pod("b")],
        [gone, gone],
        [patch],
        [patch],
        [pod("c")],
        [svc],
    ]
    assert action_runs([]) == []


class ObservedApi(KubeApi):
    """The real API; records how many pod creates are in flight at once, and can break one pod's create."""

    def __init__(self, *args: Any, broken: str | None = None) -> None:
        super().__init__(*args)
        self.broken = broken
        self.in_flight = 0
        self.most_in_flight = 0
        self.attempted: list[str] = []

    async def create(
        self, rt: ResourceType, namespace: str | None, obj: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any]:
        if rt != PODS:
            return await super().create(rt, namespace, obj, **kwargs)
        name = obj["metadata"]["name"]
        self.attempted.append(name)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if name == self.broken:
                raise RuntimeError(f"connection to the API server lost while creating {name}")
            return await super().create(rt, namespace, obj, **kwargs)
        finally:
            self.in_flight -= 1


cluster = cluster_fixture(kubelet="simulated")


@pytest.fixture
async def api_client(cluster: LocalCluster) -> AsyncIterator[Any]:
    async with cluster.kube_session() as client:
        yield client


def reconciler_for(api: KubeApi, created: dict[str, Any]) -> JobSync:
    """Caches that are never started: the test hands them the job, the reconciler adds what it writes."""
    metrics = Metrics()
    caches = Caches(JOB_TYPES, [ResourceType(*t) for t in WATCHED_CHILD_TYPES])
    for rt in caches.job_types.values():
        caches.add(Informer(api, rt, NS))
    for rt in [ResourceType(*t) for t in WATCHED_CHILD_TYPES]:
        caches.add(Informer(api, rt, NS, indexers={OWNER_INDEX: by_owner}))
    caches.observe(created)
    return JobSync(api, caches, EventRecorder(api, metrics, "test"), metrics, reconcile)


async def pods_of(api: KubeApi, job_name: str) -> list[str]:
    items, _ = await api.list(PODS, NS)
    owned = [
        p for p in items if any(r.get("name") == job_name for r in p["metadata"].get("ownerReferences", []))
    ]
    return sorted(p["metadata"]["name"] for p in owned)


async def test_a_jobs_pod_creates_are_in_flight_together(api_client: Any) -> None:
    api = ObservedApi(api_client, Metrics())
    spec = {
        "replicaSpecs": [
            {"type": "worker", "replicas": 4, "template": make_template(make_container("main", sh="true"))}
        ]
    }
    created = await api.create(GENERIC, NS, make_job("GenericJob", "gj-together", spec, namespace=NS))
    outcome = await reconciler_for(api, created).reconcile(("GenericJob", NS, "gj-together"))
    assert not outcome.retry
    assert api.most_in_flight == 4, "the 4 pod creates went out one after another"
    assert await pods_of(api, "gj-together") == [f"gj-together-worker-{i}" for i in range(4)]


async def test_one_rejected_create_does_not_stop_the_others(api_client: Any) -> None:
    api = ObservedApi(api_client, Metrics())
    bad = make_template(make_container("main", sh="true"))
    bad["metadata"] = {"labels": {"note": "not a valid label value!"}}  # the server answers 422
    spec = {
        "replicaSpecs": [
            {"type": "worker", "replicas": 3, "template": make_template(make_container("main", sh="true"))},
            {"type": "bad", "replicas": 1, "template": bad},
        ]
    }
    created = await api.create(GENERIC, NS, make_job("GenericJob", "gj-partial", spec, namespace=NS))
    reconciler = reconciler_for(api, created)
    outcome = await reconciler.reconcile(("GenericJob", NS, "gj-partial"))
    assert outcome.retry
    assert api.most_in_flight == 4
    assert await pods_of(api, "gj-partial") == [f"gj-partial-worker-{i}" for i in range(3)]
    await reconciler.reconcile(("GenericJob", NS, "gj-partial"))  # the next round shows the failure
    status = (await api.get(GENERIC, NS, "gj-partial"))["status"]
    failure = next(c for c in status["conditions"] if c["type"] == "ReplicaFailure")
    assert failure["status"] == "True" and failure["reason"] == "FailedCreate"
    assert "gj-partial-bad-0" in failure["message"] and "worker" not in failure["message"]


async def test_an_unexpected_error_is_raised_after_the_whole_run_was_attempted(api_client: Any) -> None:
    api = ObservedApi(api_client, Metrics(), broken="gj-broken-worker-1")
    spec = {
        "replicaSpecs": [
            {"type": "worker", "replicas": 4, "template": make_template(make_container("main", sh="true"))}
        ]
    }
    created = await api.create(GENERIC, NS, make_job("GenericJob", "gj-broken", spec, namespace=NS))
    reconciler = reconciler_for(api, created)
    with pytest.raises(RuntimeError, match="gj-broken-worker-1"):
        await reconciler.reconcile(("GenericJob", NS, "gj-broken"))
    assert sorted(api.attempted) == [f"gj-broken-worker-{i}" for i in range(4)]
    assert await pods_of(api, "gj-broken") == [
        "gj-broken-worker-0",
        "gj-broken-worker-2",
        "gj-broken-worker-3",
    ]
    api.broken = None  # the workqueue retries: the next round creates only the missing pod
    api.attempted.clear()
    assert not (await reconciler.reconcile(("GenericJob", NS, "gj-broken"))).retry
    assert api.attempted == ["gj-broken-worker-1"]
    assert await pods_of(api, "gj-broken") == [f"gj-broken-worker-{i}" for i in range(4)]
