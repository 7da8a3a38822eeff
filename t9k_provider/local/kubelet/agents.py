"""Entry point of the node agents: scheduler, kubelet (process or simulated) and batch/v1 Job controller.

They are ordinary API clients of the local cluster: one `kubernetes_asyncio` ApiClient bound to its
kubeconfig,
shared informers (list+watch) for pods, services and jobs.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from t9k_provider.local.kubelet.jobcontroller import JobController
from t9k_provider.local.kubelet.kube import Informer, Kube, cancel_all
from t9k_provider.local.kubelet.kubelet import ProcessKubelet
from t9k_provider.local.kubelet.network import select_network
from t9k_provider.local.kubelet.scheduler import Scheduler
from t9k_provider.local.kubelet.simulated import SimulatedKubelet

log = logging.getLogger(__name__)

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
    kube = await Kube.from_kubeconfig(Path(kubeconfig_path))
    handlers_pods = []
    pods = Informer(kube, "/api/v1/pods", lambda key: [h(key) for h in handlers_pods])
    jobs_handlers = []
    jobs = Informer(kube, "/apis/batch/v1/jobs", lambda key: [h(key) for h in jobs_handlers])
    scheduler = Scheduler(kube, pods)
    job_controller = JobController(kube, jobs, pods)
    handlers_pods += [scheduler.on_pod, job_controller.on_pod]
    jobs_handlers.append(job_controller.on_job)
    loop = asyncio.get_running_loop()
    tasks = [
        loop.create_task(pods.run(), name="informer-pods"),
        loop.create_task(jobs.run(), name="informer-jobs"),
        loop.create_task(scheduler.run(), name="scheduler"),
        loop.create_task(job_controller.run(), name="job-controller"),
    ]
    kubelet_task: asyncio.Task[None] | None = None
    try:
        if mode == "process":
            net = await asyncio.to_thread(select_network, network, Path(state_dir))
            services_handlers = []
            services = Informer(kube, "/api/v1/services", lambda key: [h(key) for h in services_handlers])
            kubelet = ProcessKubelet(kube, Path(state_dir), net, pods, services)
            handlers_pods.append(kubelet.on_pod)
            services_handlers.append(kubelet.on_service)
            tasks.append(loop.create_task(services.run(), name="informer-services"))
            kubelet_task = loop.create_task(kubelet.run(stop_pods_on_exit), name="kubelet")
        elif mode == "simulated":
            sim = SimulatedKubelet(kube, pods)
            handlers_pods.append(sim.on_pod)
            tasks.append(loop.create_task(sim.run(), name="kubelet-simulated"))
        await asyncio.gather(*tasks, *([kubelet_task] if kubelet_task else []))
    finally:
        await cancel_all(tasks)
        if kubelet_task is not None:
            await cancel_all([kubelet_task])
        await kube.close()
