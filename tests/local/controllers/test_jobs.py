"""The batch/v1 Job controller counts the pods it just created before the watch delivers them."""

from __future__ import annotations

import copy
from typing import Any

from t9k_provider.kube.informer import OWNER_INDEX, Informer, by_owner
from t9k_provider.kube.resources import JOBS, PODS, ResourceType
from t9k_provider.local.controllers.jobs import JobController


class RecordingApi:
    """Accepts every write and answers like the API server; nothing is ever watched back."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.status_patches: list[dict[str, Any]] = []
        self.revision = 100

    async def create(self, rt: ResourceType, namespace: str, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.revision += 1
        out = copy.deepcopy(obj)
        meta = out.setdefault("metadata", {})
        meta.setdefault("name", f"{meta.get('generateName', 'x-')}{self.revision}")
        meta.update(namespace=namespace, uid=f"uid-{self.revision}", resourceVersion=str(self.revision))
        if rt == PODS:
            self.created.append(out)
        return out

    async def delete(self, rt: ResourceType, namespace: str, name: str, **_: Any) -> dict[str, Any]:
        assert rt == PODS
        self.deleted.append(name)
        return {"kind": "Status"}

    async def patch(
        self, rt: ResourceType, namespace: str, name: str, patch: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        assert rt == JOBS
        self.status_patches.append(patch["status"])
        return {}


def batch_job(parallelism: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid", "resourceVersion": "5"},
        "spec": {
            "parallelism": parallelism,
            "template": {"spec": {"containers": [{"name": "c", "command": ["true"]}]}},
        },
    }


async def test_a_second_sync_before_the_watch_catches_up_creates_nothing() -> None:
    api = RecordingApi()
    pods = Informer(api, PODS, indexers={OWNER_INDEX: by_owner})  # type: ignore[arg-type]
    jobs = Informer(api, JOBS)  # type: ignore[arg-type]
    controller = JobController(api, jobs, pods)  # type: ignore[arg-type]
    job = batch_job(parallelism=3)
    await controller.sync(job)
    await controller.sync(job)
    assert len(api.created) == 3, "pods created by the first sync count in the second"
    owned = pods.by_index(OWNER_INDEX, "job-uid")
    assert sorted(p["metadata"]["name"] for p in owned) == sorted(p["metadata"]["name"] for p in api.created)
    assert [s["active"] for s in api.status_patches] == [3, 3]


def owned_pod(name: str, phase: str, rv: int) -> dict[str, Any]:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid", "controller": True}
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": str(rv)}
    return {"metadata": {**meta, "ownerReferences": [owner]}, "status": {"phase": phase}}


async def test_a_job_that_completes_deletes_its_pods_still_running() -> None:
    """As upstream: a Complete Job keeps nothing running, e.g. a pod beyond its completions."""
    api = RecordingApi()
    pods = Informer(api, PODS, indexers={OWNER_INDEX: by_owner})  # type: ignore[arg-type]
    controller = JobController(api, Informer(api, JOBS), pods)  # type: ignore[arg-type]
    for rv, (name, phase) in enumerate((("a", "Succeeded"), ("b", "Succeeded"), ("c", "Running")), start=10):
        pods.observe(owned_pod(name, phase, rv))
    job = batch_job(parallelism=2)
    job["spec"]["completions"] = 2
    await controller.sync(job)
    assert api.deleted == ["c"] and api.created == []
    status = api.status_patches[-1]
    assert (status["active"], status["succeeded"]) == (0, 2)
    assert [c["type"] for c in status["conditions"]] == ["Complete"]
