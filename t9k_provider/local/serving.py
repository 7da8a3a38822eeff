"""What `t9k-local run` serves: the API server, and beside it its child components (the controllers, a
kubelet per node, the T9k controller, the console), each an internal `t9k-local` command of its own that dies
with the server. `cli.py` parses the command line; this module does what ``run`` asks."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import yaml

from t9k_provider.kube.resources import GPU
from t9k_provider.local.apiserver.strategies.nodes import first_devices, node_capacities
from t9k_provider.local.components import Component, Supervisor
from t9k_provider.local.console.address import listen
from t9k_provider.local.diewith import command, die_with
from t9k_provider.local.kubelet.heartbeat import RENEW_INTERVAL
from t9k_provider.local.machinery.nodes import node_names
from t9k_provider.local.state import StateDir, alive
from t9k_provider.local.tls import ensure_pki

log = logging.getLogger("t9k_provider.local")
AGENTS_STOP_SECONDS = 15.0  # the kubelet stops containers (3 s grace) and tears down pod networks
COMPANION_CRDS = Path(__file__).resolve().parent / "crds"
#: The Queue the cluster boots with, as a T9k installation's: open, no quota (docs/local-cluster.md#queues).
DEFAULT_QUEUE = (
    "scheduler.tensorstack.dev",
    "v1beta1",
    "queues",
    {
        "apiVersion": "scheduler.tensorstack.dev/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "default"},
        "spec": {"priority": 0, "closed": False, "preemptible": True},
    },
)

# `up`/`run` flags that set the Node's capacity (and allocatable): flag -> (resource, help)
CAPACITY_FLAGS = {
    "cpus": ("cpu", "CPUs the node advertises (default: the machine's), e.g. 2 or 1500m"),
    "memory": ("memory", "memory the node advertises (default: the machine's), e.g. 4Gi"),
    "gpus": (GPU, f"{GPU} count the node advertises (default: /dev/nvidiaN devices)"),
    "max_pods": ("pods", "pods the node takes (default 110)"),
}


def capacity_overrides(args: argparse.Namespace) -> dict[str, str]:
    return {name: getattr(args, flag) for flag, (name, _) in CAPACITY_FLAGS.items() if getattr(args, flag)}


def crd_documents() -> list[dict[str, Any]]:
    """The T9k Job CRDs (generated from the models, as in deploy/crds) plus the companion CRDs."""
    from t9k_provider.jobs.crds import all_crds

    companions = [yaml.safe_load(path.read_text()) for path in sorted(COMPANION_CRDS.glob("*.yaml"))]
    return [*companions, *all_crds().values()]


def _pick_port(state: StateDir, requested: int | None) -> int:
    """The requested port; else the previous run's (so kubeconfigs stay valid) if it is free; else any."""
    if requested is not None:
        return requested
    previous = state.kubeconfig_port()
    if previous:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", previous))
                return previous
            except OSError:
                pass
    return 0


def internal(command: str, state: StateDir, *args: str) -> list[str]:
    """The command line of one of the server's internal child processes."""
    return [
        sys.executable, "-m", "t9k_provider.local.cli", command,
        "--state-dir", str(state.path), "--server-pid", str(os.getpid()), *args,
    ]  # fmt: skip


def _components(
    state: StateDir, args: argparse.Namespace, kubeconfig: Path, console: socket.socket | None
) -> list[Component]:
    """What the server runs beside itself: the controllers and a kubelet per node (unless
    ``--no-node-agents``), and the T9k controller and the console on the socket ``console`` (unless
    ``--no-controller``). Each is a process of its own, so that the API server's event loop serves only the
    API, another core runs the rest, and one node's kubelet can stop while the others run on; their output
    goes to the server's log."""
    out = []
    if not args.no_node_agents:
        flink = [] if args.no_flink_operator else ["--flink-operator"]
        grace = ["--node-monitor-grace-period", str(args.node_monitor_grace_period)]
        controllers = internal("controllers", state, "--kubelet", args.kubelet, *grace, *flink)
        out.append(Component("controllers", controllers))
        if args.kubelet != "none":
            firsts = first_devices(node_capacities(args.nodes, capacity_overrides(args)))
            for index, (name, first) in enumerate(zip(node_names(args.nodes), firsts, strict=True)):
                heartbeat = min(RENEW_INTERVAL, args.node_monitor_grace_period / 4)
                where = ["--node", name, "--index", str(index), "--first-device", str(first)]
                where += ["--heartbeat", str(heartbeat)]
                how = [
                    "--kubelet",
                    args.kubelet,
                    "--network",
                    args.network,
                    "--pod-subnet",
                    str(args.pod_subnet),
                ]
                argv = internal("kubelet", state, *where, *how)
                out.append(Component(f"kubelet {name}", argv, grace=AGENTS_STOP_SECONDS))
    if not args.no_controller:
        argv = [sys.executable, "-m", "t9k_provider.controller", "--kubeconfig", str(kubeconfig)]
        out.append(Component("T9k controller", command(os.getpid(), argv), log_name="controller.log"))
    if console is not None:
        fd = console.fileno()
        argv = internal("console", state, "--listen-fd", str(fd))
        out.append(Component("console", argv, log_name="console.log", pass_fds=(fd,)))
    return out


async def serve(state: StateDir, args: argparse.Namespace) -> None:
    """Serve until SIGTERM/SIGINT, as ``t9k-local run``'s ``args`` say."""
    from t9k_provider.local.apiserver.server import ApiServer
    from t9k_provider.local.controllers.inserver import ServerControllers
    from t9k_provider.local.kubelet.network import PodSubnet, namespaces_available
    from t9k_provider.local.kubelet.streaming import ContainerStreams

    lock = state.acquire()
    process = not args.no_node_agents and args.kubelet == "process"
    netns = process and args.network != "host" and namespaces_available()  # as the kubelet decides
    gateway = PodSubnet(args.pod_subnet).gateway if netns else None
    pki = ensure_pki(state.path, gateway)
    state.private_file("store.db")
    capacities = node_capacities(args.nodes, capacity_overrides(args))
    server = ApiServer(
        state.path,
        state.token(),
        pki.server_context(),
        ContainerStreams(state.path),  # the kubelets' streaming endpoints, in this process
        ServerControllers,
        _pick_port(state, args.port),
        dict(zip(node_names(args.nodes), capacities, strict=True)),
        pod_network_host=gateway,
        toleration_seconds=(
            args.default_not_ready_toleration_seconds,
            args.default_unreachable_toleration_seconds,
        ),
    )
    components = Supervisor(state)
    console = None if args.no_controller else listen(state.path)
    owner: asyncio.Future[None] | None = None
    try:
        bound = await server.start()
        names = server.register_crds(crd_documents())
        server.ensure(*DEFAULT_QUEUE)
        kubeconfig = state.write_kubeconfig(bound, server.token)
        server.ready = True
        log.info(
            "t9k-local API server on https://127.0.0.1:%d (state %s, %d CRDs)", bound, state.path, len(names)
        )
        for component in _components(state, args, kubeconfig, console):
            proc = await components.start(component)
            log.info("%s started (pid %d)", component.name, proc.pid)
        state.publish_port(lock, bound)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, components.apply_holds)
        if args.owner_pid is not None:
            owner = asyncio.ensure_future(ended(args.owner_pid))
            owner.add_done_callback(lambda _: stop.set())
        await stop.wait()
        log.info("shutting down%s", "" if owner is None or not owner.done() else f": {args.owner_pid} ended")
    finally:
        if owner is not None:
            owner.cancel()
        await components.stop()
        await server.stop()
        if console is not None:
            console.close()
        state.release(lock)


async def ended(pid: int) -> None:
    """Returns once process ``pid`` has ended (``run --owner-pid``): its pidfd becomes readable then (Linux
    5.3+), so the wait costs nothing; elsewhere it is looked at every second."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfds here
        while alive(pid):
            await asyncio.sleep(1.0)
        return
    loop = asyncio.get_running_loop()
    gone = loop.create_future()
    loop.add_reader(fd, lambda: gone.done() or gone.set_result(None))
    try:
        await gone
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def run_child(server_pid: int, work: Coroutine[Any, Any, None]) -> int:
    """An internal child process: until SIGTERM/SIGINT (a kubelet then stops its containers first)."""
    die_with(server_pid)

    async def main() -> None:
        task = asyncio.ensure_future(work)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())
    return 0
