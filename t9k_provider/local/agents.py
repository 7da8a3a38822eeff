"""Entry points of the node agents: the controllers (`run_controllers`: scheduler, the batch/v1 Job and
apps/v1 ReplicaSet, Deployment, StatefulSet and DaemonSet controllers, the Endpoints controller, the node
lifecycle controller and, with the process kubelet, the local flink-operator) and one kubelet per node
(`run_kubelet`: process or simulated, with its heartbeats). `t9k-local` runs each in a process of its own,
as kube-controller-manager, kube-scheduler and every node's kubelet are, so that one node's kubelet can stop
(`t9k-local node stop`) while the rest of the cluster runs on.

They are ordinary API clients of the local cluster: one `KubeApi` session bound to its
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
    LEASES,
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    QUEUES,
    REPLICASETS,
    SERVICES,
    STATEFULSETS,
)
from t9k_provider.local.controllers.daemonsets import DaemonSetController
from t9k_provider.local.controllers.deployments import DeploymentController
from t9k_provider.local.controllers.endpoints import EndpointsController
from t9k_provider.local.controllers.jobs import JobController
from t9k_provider.local.controllers.nodelifecycle import (
    DEFAULT_GRACE,
    LEASE_NAMESPACE,
    NodeLifecycleController,
)
from t9k_provider.local.controllers.replicasets import ReplicaSetController
from t9k_provider.local.controllers.statefulsets import StatefulSetController
from t9k_provider.local.flink.cluster import FLINKCLUSTERS
from t9k_provider.local.flink.operator import FlinkOperator, is_flink_object
from t9k_provider.local.kubelet.heartbeat import RENEW_INTERVAL, NodeHeartbeat
from t9k_provider.local.kubelet.kubelet import ProcessKubelet
from t9k_provider.local.kubelet.network import PodSubnet, select_network
from t9k_provider.local.kubelet.simulated import SimulatedKubelet
from t9k_provider.local.machinery import workloop
from t9k_provider.local.machinery.nodes import FIRST_NODE, node_root
from t9k_provider.local.scheduler import scheduler
from t9k_provider.local.tensorboard.board import TENSORBOARDS
from t9k_provider.local.tensorboard.operator import TensorBoardOperator

MODES = ("process", "simulated", "none")
Runners = dict[str, Callable[[], Awaitable[None]]]


async def run_controllers(
    kubeconfig_path: Path,
    state_dir: Path,
    *,
    mode: str = "process",
    flink_operator: bool = True,
    node_grace: float = DEFAULT_GRACE,
) -> None:
    """The cluster's controllers until cancelled: scheduler, workload and Endpoints controllers, the node
    lifecycle controller (when kubelets run, ``mode`` process or simulated: nothing else says a node is
    alive; its grace is ``node_grace`` seconds) and, with process kubelets, the local flink-operator and the
    local TensorBoard operator (which finds claims in ``state_dir``)."""
    _check_mode(mode)
    client = await api_client(Path(kubeconfig_path))
    kube = KubeApi(client)
    pods = Informer(
        kube, PODS, indexers={OWNER_INDEX: by_owner, NODE_INDEX: by_node, **scheduler.POD_INDEXERS}
    )
    services = Informer(kube, SERVICES)
    nodes, podgroups = Informer(kube, NODES), Informer(kube, PODGROUPS)
    queues, namespaces = Informer(kube, QUEUES), Informer(kube, NAMESPACES)
    pod_scheduler = scheduler.Scheduler(kube, pods, nodes, podgroups, queues, namespaces)
    pods.add_handler(pod_scheduler.on_pod)
    for changes in (nodes, podgroups, queues, namespaces):  # room, a gang, a quota or a namespace's labels
        changes.add_handler(pod_scheduler.on_node_or_group)
    replicasets = Informer(kube, REPLICASETS, indexers={OWNER_INDEX: by_owner})
    owners = {rt: Informer(kube, rt) for rt in (JOBS, DEPLOYMENTS, STATEFULSETS, DAEMONSETS)}
    deployment_controller = DeploymentController(kube, owners[DEPLOYMENTS], replicasets, pods)
    pods.add_handler(deployment_controller.on_pod)  # a Recreate waits for the old pods to go
    daemonsets = DaemonSetController(kube, owners[DAEMONSETS], pods, nodes)
    nodes.add_handler(daemonsets.on_node)
    controllers: list[workloop.OwnerController] = [
        JobController(kube, owners[JOBS], pods),
        ReplicaSetController(kube, replicasets, pods),
        deployment_controller,
        StatefulSetController(kube, owners[STATEFULSETS], pods),
        daemonsets,
    ]
    for controller in controllers:
        controller.owners.add_handler(controller.on_owner)
        controller.children.add_handler(controller.on_child)
    endpoints = EndpointsController(kube, services, pods)
    pods.add_handler(endpoints.on_pod)
    services.add_handler(endpoints.on_service)
    assert pod_scheduler.admission is not None
    runners: Runners = {
        "scheduler": pod_scheduler.run,
        "queue maxDuration check": pod_scheduler.admission.check_durations,
        "endpoints controller": endpoints.run,
        **{f"{c.resource.kind} controller": c.run for c in controllers},
    }
    informers = [pods, services, nodes, podgroups, queues, namespaces, replicasets, *owners.values()]
    if mode != "none":
        leases = Informer(kube, LEASES, namespace=LEASE_NAMESPACE)
        lifecycle = NodeLifecycleController(kube, nodes, leases, pods, node_grace)
        runners["node lifecycle controller"] = lifecycle.run
        informers.append(leases)
    if mode == "process" and flink_operator:
        informers += _add_flink_operator(kube, pods, services, runners)
    if mode == "process":
        informers += _add_tensorboard_operator(kube, pods, services, runners, Path(state_dir))
    await _run_supervised(client, informers, runners)


async def run_kubelet(
    kubeconfig_path: Path,
    state_dir: Path,
    node: str = FIRST_NODE,
    mode: str = "process",
    network: str = "auto",
    *,
    subnet: int = 0,
    index: int = 0,
    first_device: int = 0,
    heartbeat: float = RENEW_INTERVAL,
    stop_pods_on_exit: bool = True,
) -> None:
    """Node ``node``'s kubelet (the ``index``-th node of the cluster at ``state_dir``) until cancelled, with
    its heartbeats. `mode`: process | simulated. `network`: auto | netns | host (process mode only);
    `subnet`: the netns pods' `PodSubnet`; `first_device`: the node's first GPU on the machine; `heartbeat`:
    seconds between Lease renewals. On
    cancellation, running containers are stopped unless `stop_pods_on_exit` is False (their shims keep
    running and a later kubelet re-adopts them)."""
    _check_mode(mode)
    if mode == "none":
        raise ValueError("mode none runs no kubelet")
    root = node_root(Path(state_dir), node)
    net = None
    if mode == "process":
        net = await asyncio.to_thread(select_network, network, root, PodSubnet(subnet))
    client = await api_client(Path(kubeconfig_path))
    kube = KubeApi(client)
    pods = Informer(kube, PODS, indexers={NODE_INDEX: by_node})
    informers = [pods]
    runners: Runners = {"node heartbeat": NodeHeartbeat(kube, node, heartbeat).run}
    if net is not None:
        services = Informer(kube, SERVICES)
        kubelet = ProcessKubelet(kube, root, net, pods, services, node, first_device)
        pods.add_handler(kubelet.on_pod)
        services.add_handler(kubelet.on_service)
        runners["kubelet"] = partial(kubelet.run, stop_pods_on_exit)
        informers.append(services)
    else:
        sim = SimulatedKubelet(kube, pods, node, index)
        pods.add_handler(sim.on_pod)
        runners["simulated kubelet"] = sim.run
    await _run_supervised(client, informers, runners)


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
    """The controllers and the first node's kubelet in this process, until cancelled (what `t9k-local` runs
    as separate processes: for tests that drive them in-process). `mode` none runs the controllers only."""
    _check_mode(mode)
    parts = [run_controllers(kubeconfig_path, state_dir, mode=mode, flink_operator=flink_operator)]
    if mode != "none":
        kubelet = run_kubelet(
            kubeconfig_path,
            state_dir,
            FIRST_NODE,
            mode,
            network,
            subnet=subnet,
            stop_pods_on_exit=stop_pods_on_exit,
        )
        parts.append(kubelet)
    tasks = [asyncio.ensure_future(part) for part in parts]
    try:
        await asyncio.gather(*tasks)
    finally:
        await _cancel_all(tasks[::-1])  # the kubelet stops its containers before the controllers go


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {', '.join(MODES)} (got {mode!r})")


async def _run_supervised(client: Any, informers: list[Informer], runners: Runners) -> None:
    """Every handler is registered before the informers start, so none misses the initial list; each
    informer and agent runs supervised."""
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
    kube: KubeApi, pods: Informer, services: Informer, runners: Runners
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


def _add_tensorboard_operator(
    kube: KubeApi, pods: Informer, services: Informer, runners: Runners, state_dir: Path
) -> list[Informer]:
    """The local TensorBoard operator (TensorBoards as `tensorboard` pods); returns the informer it adds."""
    boards = Informer(kube, TENSORBOARDS)
    operator = TensorBoardOperator(kube, boards, pods, services, state_dir)
    boards.add_handler(operator.on_board)
    for owned in (pods, services):
        owned.add_handler(operator.on_owned)
    runners["tensorboard-operator"] = operator.run
    return [boards]


async def _cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
