"""A job's status is written at once when what the controller decided changes, and at most every
``PROGRESS_BATCH_SECONDS`` when only its pods' progress does (docs/controller.md#status-writes)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.controller.runtime.status_writer import PROGRESS_BATCH_SECONDS, progress_only
from t9k_provider.jobs.contract import task_replicas
from t9k_provider.kube.api import KubeApi
from t9k_provider.testing import LocalCluster
from tests.controller.e2e_support import NS, offline_caches, offline_reconciler
from tests.support.builders import make_container, make_job, make_template
from tests.support.clusters import cluster_fixture

Status = dict[str, Any]


def base() -> Status:
    """Two workers: worker-0 runs on n0, worker-1 is created and waits for a node."""
    return {
        "phase": "Running",
        "conditions": [
            {"type": "Initialized", "status": "True", "reason": "-", "lastTransitionTime": "t0"},
            {
                "type": "Running",
                "status": "True",
                "reason": "-",
                "message": "1 of 2 pods are running (1 pending).",
                "lastTransitionTime": "t1",
            },
        ],
        "tasks": [
            {
                "type": "worker",
                "restartCount": 0,
                "status": [
                    {
                        "name": "w-0",
                        "uid": "u0",
                        "phase": "Running",
                        "containers": [{"name": "main", "state": "running"}],
                        "restartCount": 0,
                        "nodeName": "n0",
                    },
                    {"name": "w-1", "uid": "u1", "phase": "Pending", "containers": [], "restartCount": 0},
                ],
            }
        ],
        "aggregate": {"pending": 1, "running": 1},
        "startTime": "t0",
    }


def worker(status: Status, index: int) -> dict[str, Any]:
    return task_replicas(status["tasks"][0])[index]


def bound(s: Status) -> None:
    worker(s, 1)["nodeName"] = "n1"


def started(s: Status) -> None:
    bound(s)
    worker(s, 1).update(phase="Running", containers=[{"name": "main", "state": "running"}])
    s["aggregate"] = {"pending": 0, "running": 2}
    s["conditions"][1]["message"] = "All pods are running normally."


def finished(s: Status) -> None:
    worker(s, 0).update(
        phase="Succeeded", containers=[{"name": "main", "state": "terminated", "exitCode": 0}]
    )


def moved_key(s: Status) -> None:
    s["tasks"][0]["replicas"] = s["tasks"][0].pop("status")


PROGRESS: dict[str, Callable[[Status], None]] = {
    "a replica is bound": bound,
    "a replica starts": started,
    "a container's state": lambda s: worker(s, 1).update(containers=[{"name": "main", "state": "waiting"}]),
    "the counts": lambda s: s["aggregate"].update(pending=0),
    "a condition's message": lambda s: s["conditions"][1].update(message="All pods are running normally."),
}
DECIDED: dict[str, Callable[[Status], None]] = {
    "the job's phase": lambda s: s.update(phase="Succeeded"),
    "a condition's status": lambda s: s["conditions"][1].update(status="False"),
    "a condition's reason": lambda s: s["conditions"][1].update(reason="Restarting"),
    "a new condition": lambda s: s["conditions"].append({"type": "Failed", "status": "True", "reason": "x"}),
    "a replica's uid": lambda s: worker(s, 1).update(uid="u2"),
    "a replica finishes": finished,
    "a replica's node stops reporting": lambda s: worker(s, 0).update(phase="Unknown"),
    "a replica is recreated": lambda s: worker(s, 0).update(phase="Creating", uid="", replacedUid="u0"),
    "a replica's restart count": lambda s: worker(s, 0).update(restartCount=1),
    "the job's restarts": lambda s: s.update(restarts=1),
    "a disruption": lambda s: s.update(disruptions=[{"replica": "worker-0", "reason": "Evicted"}]),
    "the replicas' key": moved_key,
    "a replica more": lambda s: s["tasks"][0]["status"].append(
        {"name": "w-2", "uid": "", "phase": "Creating"}
    ),
    "the completion time": lambda s: s.update(completionTime="t2"),
}


@pytest.mark.parametrize("change", PROGRESS.values(), ids=PROGRESS.keys())
def test_a_change_that_mirrors_pods_progress_may_wait(change: Callable[[Status], None]) -> None:
    desired = base()
    change(desired)
    assert desired != base()
    assert progress_only(base(), desired)


@pytest.mark.parametrize("change", DECIDED.values(), ids=DECIDED.keys())
def test_a_change_the_controller_reads_back_or_a_user_judges_by_is_written_at_once(
    change: Callable[[Status], None],
) -> None:
    desired = base()
    change(desired)
    assert not progress_only(base(), desired)
    started(desired)  # progress beside it does not hide it
    assert not progress_only(base(), desired)


def test_a_first_status_is_written_at_once() -> None:
    assert not progress_only({}, base())


# -- the JobSync against the real API server: what is written when -------------------------------------------

cluster = cluster_fixture(kubelet="simulated")


def as_kubelet_reports(pod: dict[str, Any], node: str, phase: str, state: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as the controller's informer would next see it, had a node taken it and reported ``phase``."""
    out = copy.deepcopy(pod)
    out["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
    out["spec"]["nodeName"] = node
    statuses = (
        [{"name": "main", "ready": "running" in state, "restartCount": 0, "state": state}] if state else []
    )
    out["status"] = {"phase": phase, "containerStatuses": statuses}
    return out


@pytest.mark.cluster
async def test_progress_waits_for_the_batch_and_an_ending_does_not(cluster: LocalCluster) -> None:
    now = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    template = make_template(make_container("main", sh="true"))
    spec = {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": template}]}
    key = ("GenericJob", NS, "gj-batched")
    async with cluster.kube_session() as api_client:
        metrics = Metrics()
        api = KubeApi(api_client, metrics)
        caches = offline_caches(api, NS, [])
        generic = caches.job_types["GenericJob"]
        created = await api.create(generic, NS, make_job("GenericJob", "gj-batched", spec, namespace=NS))
        caches.observe(created)
        sync = offline_reconciler(api, metrics, caches, clock=lambda: now[0])

        def counted(outcome: str) -> float:
            return metrics.status_writes.labels(outcome=outcome)._value.get()

        async def replicas() -> list[dict[str, Any]]:
            return task_replicas((await api.get(generic, NS, "gj-batched"))["status"]["tasks"][0])

        async def step(pod: int, node: str, phase: str, state: dict[str, Any]) -> float | None:
            """The pod reported as ``phase``; the reconcile's requeue."""
            observed = caches.children_of(NS, created["metadata"]["uid"])
            current = next(
                p for p in observed if p["kind"] == "Pod" and p["metadata"]["name"].endswith(f"-{pod}")
            )
            caches.observe(as_kubelet_reports(current, node, phase, state))
            return (await sync.reconcile(key)).requeue_after

        await sync.reconcile(key)  # the first status, then the pods
        await sync.reconcile(key)  # their uids
        assert [r["phase"] for r in await replicas()] == ["Pending", "Pending"]
        running = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}

        written = counted("written")
        await step(0, "n0", "Running", running)  # the job runs: written at once
        assert counted("written") == written + 1
        assert (await api.get(generic, NS, "gj-batched"))["status"]["phase"] == "Running"

        assert await step(1, "n1", "Pending", {}) == pytest.approx(PROGRESS_BATCH_SECONDS)
        now[0] += timedelta(seconds=0.3)
        assert await step(1, "n1", "Running", running) == pytest.approx(PROGRESS_BATCH_SECONDS - 0.3)
        assert counted("written") == written + 1 and counted("held") == 2
        assert [(r["phase"], r.get("nodeName")) for r in await replicas()] == [
            ("Running", "n0"),
            ("Pending", None),
        ]

        now[0] += timedelta(seconds=PROGRESS_BATCH_SECONDS - 0.3)
        assert (await sync.reconcile(key)).requeue_after is None  # the batch is due
        assert counted("written") == written + 2
        assert [(r["phase"], r.get("nodeName")) for r in await replicas()] == [
            ("Running", "n0"),
            ("Running", "n1"),
        ]

        done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
        await sync.reconcile(key)  # nothing changed: no write, nothing held
        assert counted("written") == written + 2 and counted("held") == 2
        await step(0, "n0", "Succeeded", done)  # a replica finished: written at once
        assert counted("written") == written + 3
        assert [r["phase"] for r in await replicas()] == ["Succeeded", "Running"]
