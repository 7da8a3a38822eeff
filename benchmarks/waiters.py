"""A stand-in triggerer: many deferred-task triggers in one asyncio loop, in its own process.

``python -m benchmarks.waiters t9k|t9k-queue|cncf SPEC_FILE``. The spec file (JSON) holds the kubeconfig,
the jobs and the poll interval. The process prints JSON lines: ``ready`` (imports done), ``started`` (all
triggers running, one poll interval later), ``rss`` every second, one ``event`` per trigger (with when that
trigger began waiting, and the step of the last progress report it read, if any), ``done``. It creates the
triggers only after reading ``go`` on stdin, so the benchmark can start interpreters early and measure one
at a time.

``t9k`` runs ``T9kJobTrigger``. ``cncf`` runs the cncf-kubernetes provider's waiting pattern on the same
custom objects: ``KubernetesJobTrigger`` / ``AsyncKubernetesHook.wait_until_job_complete`` poll the object
with one GET through ``hook.get_conn()`` per poll interval (the ``SparkKubernetesSensor`` pokes a custom
object the same way from a worker); ``AsyncKubernetesHook`` has no custom-object read, so the GET is made on
the client its ``get_conn()`` yields.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from benchmarks.procstat import rss_bytes

TERMINAL = ("Succeeded", "Failed")


class CustomObjectPollingTrigger(BaseTrigger):
    """The cncf-kubernetes polling loop (``wait_until_job_complete``) applied to a T9k Job."""

    def __init__(
        self, kubeconfig: dict[str, Any], group: str, version: str, plural: str, namespace: str, name: str,
        poll_interval: float,
    ) -> None:  # fmt: skip
        super().__init__()
        self.kubeconfig = kubeconfig
        self.group, self.version, self.plural = group, version, plural
        self.namespace, self.name = namespace, name
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kubeconfig": self.kubeconfig, "group": self.group, "version": self.version,
                "plural": self.plural, "namespace": self.namespace, "name": self.name,
                "poll_interval": self.poll_interval,
            },
        )  # fmt: skip

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
        from kubernetes_asyncio import client

        hook = AsyncKubernetesHook(config_dict=self.kubeconfig, connection_extras={})
        while True:
            async with hook.get_conn() as api:
                job = await client.CustomObjectsApi(api).get_namespaced_custom_object(
                    self.group, self.version, self.namespace, self.plural, self.name
                )
            phase = (job.get("status") or {}).get("phase")
            if phase in TERMINAL:
                yield TriggerEvent({"status": phase.lower(), "name": self.name})
                return
            await asyncio.sleep(self.poll_interval)


def build(approach: str, spec: dict[str, Any], name: str) -> BaseTrigger:
    if approach in ("t9k", "t9k-queue"):  # t9k-queue: the same trigger, its jobs waiting in a T9k Queue
        from t9k_provider.triggers.job import T9kJobTrigger

        return T9kJobTrigger(
            credentials={"kubeconfig": spec["kubeconfig"]},
            kind=spec["kind"],
            plural=spec["plural"],
            name=name,
            namespace=spec["namespace"],
            poll_interval=spec["poll_interval"],
            # benchmarks.live_logs: follow each job's replica logs (its pods carry the owner label)
            pod_selector=f"tensorstack.dev/owner-name={name}" if spec.get("log_targets") else None,
            log_targets=spec.get("log_targets"),
            # benchmarks.live_logs, mode progress: the leader's reports read, a progress_timeout in limits
            limits=spec.get("limits"),
            leader=spec.get("leader"),
        )
    if approach == "cncf":
        return CustomObjectPollingTrigger(
            spec["kubeconfig"], spec["group"], spec["version"], spec["plural"], spec["namespace"], name,
            spec["poll_interval"],
        )  # fmt: skip
    raise ValueError(f"approach: must be t9k, t9k-queue or cncf (got {approach!r})")


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def serve(approach: str, spec: dict[str, Any]) -> None:
    """Run every trigger the way the triggerer does: each ``run()`` as a task, first event taken.

    Tasks defer at different times in a real deployment, so the triggers start spread evenly over one poll
    interval: their polls are out of phase, as they would be, and neither a request-counting window nor a
    status change can line up with all of them at once.
    """
    triggers = [build(approach, spec, name) for name in spec["names"]]
    pending = len(triggers)
    spread = spec["poll_interval"]

    async def watch(trigger: BaseTrigger, name: str, delay: float) -> None:
        nonlocal pending
        await asyncio.sleep(delay)
        began = time.time()
        async for event in trigger.run():
            step = (event.payload.get("progress") or {}).get("step")  # the leader's last report read
            emit(event=name, status=event.payload.get("status"), step=step, t=time.time(), began=began)
            break
        pending -= 1

    tasks = [
        asyncio.create_task(watch(t, n, i * spread / len(triggers)))
        for i, (t, n) in enumerate(zip(triggers, spec["names"], strict=True))
    ]
    await asyncio.sleep(spread)
    emit(started=len(tasks), rss=rss_bytes_now())
    deadline = time.monotonic() + spec["max_seconds"]
    while pending and time.monotonic() < deadline:
        await asyncio.sleep(1.0)
        emit(rss=rss_bytes_now())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    emit(done=len(triggers) - pending, rss=rss_bytes_now())


def rss_bytes_now() -> int:
    return rss_bytes(os.getpid())


def preload(approach: str) -> None:
    """Both approaches import their clients lazily inside ``run()``: load them before the idle RSS is read."""
    if approach == "cncf":
        import airflow.providers.cncf.kubernetes.hooks.kubernetes  # noqa: F401
    else:
        import t9k_provider.hooks.async_t9k
        import t9k_provider.jobs.constants  # the trigger's resource type (API_VERSION)
        import t9k_provider.triggers.job  # noqa: F401


def main() -> None:
    approach, spec_file = sys.argv[1], Path(sys.argv[2])
    spec = json.loads(spec_file.read_text())
    preload(approach)
    emit(ready=True, rss=rss_bytes_now())
    if sys.stdin.readline().strip() != "go":
        return
    asyncio.run(serve(approach, spec))


if __name__ == "__main__":
    main()
