"""The controller's runtime (`Manager`, in this process against the local cluster) when a reconcile raises for
one job: the error is logged with the job's key and counted, the job is retried with per-job backoff until
its reconcile succeeds, and the other jobs are reconciled meanwhile.

The failure is injected into the engine (the pure ``reconcile``, wrapped to raise for one job): a bug in it
cannot be produced otherwise. Informers, work queue, status writes and pods are real.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from t9k_provider.controller.engine import Decision, Observed
from t9k_provider.controller.kinds.registry import WATCHED_CHILD_TYPES
from t9k_provider.controller.reconcile import reconcile
from t9k_provider.controller.runtime.manager import Manager, Settings
from t9k_provider.jobs import API_VERSION, KINDS
from t9k_provider.kube.resources import ResourceType
from t9k_provider.testing import LocalCluster, wait_for_async
from tests.support.builders import make_container, make_job, make_template
from tests.support.clusters import cluster_fixture

pytestmark = pytest.mark.cluster

NS = "default"
JOB_TYPES = [ResourceType(API_VERSION, kind, cls.PLURAL) for kind, cls in sorted(KINDS.items())]
GENERIC = next(rt for rt in JOB_TYPES if rt.kind == "GenericJob")

cluster = cluster_fixture(kubelet="simulated")


class FlakyEngine:
    """``reconcile``, except that it raises the first ``failures`` times it is asked about job ``name``."""

    def __init__(self, name: str, failures: int) -> None:
        self.name = name
        self.failures = failures

    def __call__(self, observed: Observed) -> Decision:
        if observed.job["metadata"]["name"] == self.name and self.failures:
            self.failures -= 1
            raise ZeroDivisionError("a bug in the engine")
        return reconcile(observed)


def generic_job(name: str) -> dict[str, Any]:
    template = make_template(make_container("main", sh="true"))
    return make_job(
        "GenericJob", name, {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template}]}
    )


async def test_a_reconcile_that_raises_for_one_job_is_retried_and_holds_up_no_other(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    engine = FlakyEngine("gj-flaky", failures=3)
    async with cluster.kube_session() as client:
        manager = Manager(
            client,
            Settings(namespaces=[NS], workers=2),
            engine,
            JOB_TYPES,
            [ResourceType(*child) for child in WATCHED_CHILD_TYPES],
        )
        stop = asyncio.Event()
        running = asyncio.create_task(manager.run(stop))
        try:
            for name in ("gj-flaky", "gj-steady"):
                await manager.api.create(GENERIC, NS, generic_job(name))

            async def phase(name: str) -> str | None:
                return ((await manager.api.get(GENERIC, NS, name)).get("status") or {}).get("phase")

            await wait_for_async("gj-steady has a phase", lambda: phase("gj-steady"), 30)
            await wait_for_async("gj-flaky has a phase after its failures", lambda: phase("gj-flaky"), 30)
            assert engine.failures == 0
            assert not running.done(), "the controller runs on"
        finally:
            stop.set()
            assert await asyncio.wait_for(running, 30) == 0
    failed = [r for r in caplog.records if r.getMessage().startswith("reconcile failed, retrying in")]
    assert [getattr(r, "job", None) for r in failed] == [f"{NS}/gj-flaky"] * 3, "logged with the job's key"
    assert all(r.exc_info is not None for r in failed), "a bug is logged with its traceback"
    delays = [float(r.getMessage().split("retrying in ")[1].split("s")[0]) for r in failed]
    assert delays == sorted(delays) and delays[0] < delays[-1], "per-job exponential backoff"
    assert manager.metrics.reconcile_errors.labels(kind="GenericJob")._value.get() == 3
