"""Entry point of the node agents: scheduler, kubelet (process or simulated) and batch/v1 Job controller.

They are ordinary API clients of the local cluster: one `kubernetes_asyncio` ApiClient bound to its
kubeconfig, and shared informers (list+watch) for pods, services and jobs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from t9k_provider.local.kubelet.jobcontroller import JobController
from t9k_provider.local.kubelet.kube import Informer, Kube, cancel_all
from t9k_provider.local.kubelet.kubelet import ProcessKubelet
from t9k_provider.local.kubelet.network import select_network
from t9k_provider.local.kubelet.scheduler import Scheduler
from t9k_provider.local.kubelet.simulated import SimulatedKubelet

Key = tuple[str, str]

MODES = ("process", "simulated", "none")


async def run_node_agents(
    kubeconfig_path: Path,
    state_dir: Path,
    mode: str = "process",
    network: str = "auto",
    *,
    stop_pods_on_exit: bool = True,
) -> None:
    """Run until cancelled. `mode`: process | simulated | none (no kubelet; scheduler and Job controller still
    run). `network`: auto | netns | host (process mode only). On cancellation, running containers are stopped
    unless `stop_pods_on_exit` is False (their shims keep running and a later kubelet re-adopts them)."""
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {', '.join(MODES)} (got {mode!r})")
    net = await asyncio.to_thread(select_network, network, Path(state_dir)) if mode == "process" else None
    kube = await Kube.from_kubeconfig(Path(kubeconfig_path))
    pod_handlers: list[Callable[[Key], None]] = []
    job_handlers: list[Callable[[Key], None]] = []
    service_handlers: list[Callable[[Key], None]] = []
    pods = Informer(kube, "/api/v1/pods", _fan_out(pod_handlers))
    jobs = Informer(kube, "/apis/batch/v1/jobs", _fan_out(job_handlers))
    services = Informer(kube, "/api/v1/services", _fan_out(service_handlers))
    scheduler = Scheduler(kube, pods)
    job_controller = JobController(kube, jobs, pods)
    pod_handlers += [scheduler.on_pod, job_controller.on_pod]
    job_handlers.append(job_controller.on_job)
    runners: list[Coroutine[Any, Any, None]] = [scheduler.run(), job_controller.run()]
    informers = [pods, jobs]
    if net is not None:
        kubelet = ProcessKubelet(kube, Path(state_dir), net, pods, services)
        pod_handlers.append(kubelet.on_pod)
        service_handlers.append(kubelet.on_service)
        informers.append(services)
        runners.append(kubelet.run(stop_pods_on_exit))
    elif mode == "simulated":
        sim = SimulatedKubelet(kube, pods)
        pod_handlers.append(sim.on_pod)
        runners.append(sim.run())
    # Every handler is registered before the informers start, so none misses the initial list.
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(i.run(), name=f"informer {i.path}") for i in informers]
    tasks += [loop.create_task(r) for r in runners]
    try:
        await asyncio.gather(*tasks)
    finally:
        # Cancel in reverse: the kubelet stops its containers before the informers go away.
        await cancel_all(tasks[::-1])
        await kube.close()


def _fan_out(handlers: list[Callable[[Key], None]]) -> Callable[[Key], None]:
    def call(key: Key) -> None:
        for handler in handlers:
            handler(key)

    return call
