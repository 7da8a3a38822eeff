"""Entry point of the node agents: scheduler, kubelet (process or simulated), the batch/v1 Job and apps/v1
ReplicaSet, Deployment, StatefulSet and DaemonSet controllers, the Endpoints controller and, with the process
kubelet, the local flink-operator (`t9k_provider.local.flink`).

They are ordinary API clients of the local cluster: one `kubernetes_asyncio` ApiClient bound to its
kubeconfig, and the shared informers (`t9k_provider.kube`) for pods, services and jobs. Each informer and
each agent runs supervised (`workloop.supervise`): one that fails is logged by name and started again, and
the others carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from t9k_provider.kube.api import KubeApi, api_client
from t9k_provider.kube.informer import NODE_INDEX, OWNER_INDEX, Informer, by_node, by_owner
from t9k_provider.kube.resources import (
    CONFIGMAPS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    NODES,
    PODGROUPS,
    PODS,
    REPLICASETS,
    SERVICES,
    STATEFULSETS,
)
from t9k_provider.local.controllers.daemonsets import DaemonSetController
from t9k_provider.local.controllers.deployments import DeploymentController
from t9k_provider.local.controllers.endpoints import EndpointsController
from t9k_provider.local.controllers.jobs import JobController
from t9k_provider.local.controllers.replicasets import ReplicaSetController
from t9k_provider.local.controllers.statefulsets import StatefulSetController
from t9k_provider.local.flink.cluster import FLINKCLUSTERS
from t9k_provider.local.flink.operator import FlinkOperator, is_flink_object
from t9k_provider.local.kubelet.kubelet import ProcessKubelet
from t9k_provider.local.kubelet.network import PodSubnet, select_network
from t9k_provider.local.kubelet.simulated import SimulatedKubelet
from t9k_provider.local.machinery import workloop
from t9k_provider.local.scheduler import scheduler

MODES = ("process", "simulated", "none")


async def run_node_agents(
    kubeconfig_path: Path,
    state_dir: Path,
    mode: str = "process",
    network: str = "auto",
    *,
    subnet: int = 0,
    stop_pods_on_exit: bool = True,
    flink_operator: bool = True,
) -> None:
    """Run until cancelled. `mode`: process | simulated | none (no kubelet; scheduler and Job controller still
    run). `network`: auto | netns | host (process mode only); `subnet`: the netns pods' `PodSubnet`. On
    cancellation, running containers are stopped unless `stop_pods_on_exit` is False (their shims keep running
    and a later kubelet re-adopts them). `flink_operator`: run the local flink-operator (process mode only: it
    runs real Flink processes)."""
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {', '.join(MODES)} (got {mode!r})")
    net = None
    if mode == "process":
        net = await asyncio.to_thread(select_network, network, Path(state_dir), PodSubnet(subnet))
    client = await api_client(Path(kubeconfig_path))
    kube = KubeApi(client)
    pods = Informer(
        kube, PODS, indexers={OWNER_INDEX: by_owner, NODE_INDEX: by_node, **scheduler.POD_INDEXERS}
    )
    services = Informer(kube, SERVICES)
    nodes, podgroups = Informer(kube, NODES), Informer(kube, PODGROUPS)
    pod_scheduler = scheduler.Scheduler(kube, pods, nodes, podgroups)
    pods.add_handler(pod_scheduler.on_pod)
    nodes.add_handler(pod_scheduler.on_node_or_group)
    podgroups.add_handler(pod_scheduler.on_node_or_group)
    replicasets = Informer(kube, REPLICASETS, indexers={OWNER_INDEX: by_owner})
    owners = {rt: Informer(kube, rt) for rt in (JOBS, DEPLOYMENTS, STATEFULSETS, DAEMONSETS)}
    deployment_controller = DeploymentController(kube, owners[DEPLOYMENTS], replicasets, pods)
    pods.add_handler(deployment_controller.on_pod)  # a Recreate waits for the old pods to go
    controllers: list[workloop.OwnerController] = [
        JobController(kube, owners[JOBS], pods),
        ReplicaSetController(kube, replicasets, pods),
        deployment_controller,
        StatefulSetController(kube, owners[STATEFULSETS], pods),
        DaemonSetController(kube, owners[DAEMONSETS], pods),
    ]
    for controller in controllers:
        controller.owners.add_handler(controller.on_owner)
        controller.children.add_handler(controller.on_child)
    endpoints = EndpointsController(kube, services, pods)
    pods.add_handler(endpoints.on_pod)
    services.add_handler(endpoints.on_service)
    runners: dict[str, Callable[[], Awaitable[None]]] = {
        "scheduler": pod_scheduler.run,
        "endpoints controller": endpoints.run,
        **{f"{c.resource.kind} controller": c.run for c in controllers},
    }
    informers = [pods, services, nodes, podgroups, replicasets, *owners.values()]
    if net is not None:
        kubelet = ProcessKubelet(kube, Path(state_dir), net, pods, services)
        pods.add_handler(kubelet.on_pod)
        services.add_handler(kubelet.on_service)
        runners["kubelet"] = partial(kubelet.run, stop_pods_on_exit)
        if flink_operator:
            informers += _add_flink_operator(kube, pods, services, runners)
    elif mode == "simulated":
        sim = SimulatedKubelet(kube, pods)
        pods.add_handler(sim.on_pod)
        runners["simulated kubelet"] = sim.run
    # Every handler is registered before the informers start, so none misses the initial list.
    loop = asyncio.get_running_loop()
    supervised = {f"informer {i.rt.plural}": i.run for i in informers} | runners
    tasks = [loop.create_task(workloop.supervise(name, run), name=name) for name, run in supervised.items()]
    try:
        await asyncio.gather(*tasks)
    finally:
        # Cancel in reverse: the kubelet stops its containers before the informers go away.
        await _cancel_all(tasks[::-1])
        await client.close()


def _add_flink_operator(
    kube: KubeApi, pods: Informer, services: Informer, runners: dict[str, Callable[[], Awaitable[None]]]
) -> list[Informer]:
    """The local flink-operator (FlinkClusters run as Flink processes); returns the informers it adds."""
    clusters = Informer(kube, FLINKCLUSTERS)
    configmaps = Informer(kube, CONFIGMAPS, keep=is_flink_object)
    operator = FlinkOperator(kube, clusters, pods, services, configmaps)
    clusters.add_handler(operator.on_cluster)
    for owned in (pods, services, configmaps):
        owned.add_handler(operator.on_owned)
    runners["flink-operator"] = operator.run
    return [clusters, configmaps]


async def _cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
