"""``t9k-local``: start, stop and inspect the embedded local cluster.

``run`` serves in the foreground (API server; node agents and T9k controller as child processes); ``up``
starts ``run`` in the background and returns once the API answers; ``down`` stops it; ``status`` reports it.
``node-agents`` is the agents' child process, started by ``run``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from t9k_provider.kube.resources import GPU
from t9k_provider.local.components import Component, Supervisor, log_tail, read_status
from t9k_provider.local.machinery.quantity import QUANTITY_ERROR, parse_quantity
from t9k_provider.local.state import AlreadyRunning, StateDir, default_state_dir, wait_ready
from t9k_provider.local.tls import ensure_pki

log = logging.getLogger("t9k_provider.local")
KUBELET_MODES = ("process", "simulated", "none")
NETWORK_MODES = ("auto", "netns", "host")
POD_SUBNET_HELP = (
    "netns pod network N (0-255): bridge t9kN with 10.251.N.0/24 (default 0); clusters on different subnets "
    "run side by side without seeing each other's pods"
)
AGENTS_STOP_SECONDS = 15.0  # the kubelet stops containers (3 s grace) and tears down pod networks
PR_SET_PDEATHSIG = 1
FLINK_OPERATOR_OFF = "do not run the local flink-operator (FlinkClusters then stay as written)"
COMPANION_CRDS = Path(__file__).resolve().parent / "crds"
# `up`/`run` flags that set the Node's capacity (and allocatable): flag -> (resource, help)
CAPACITY_FLAGS = {
    "cpus": ("cpu", "CPUs the node advertises (default: the machine's), e.g. 2 or 1500m"),
    "memory": ("memory", "memory the node advertises (default: the machine's), e.g. 4Gi"),
    "gpus": (GPU, f"{GPU} count the node advertises (default: /dev/nvidiaN devices)"),
    "max_pods": ("pods", "pods the node takes (default 110)"),
}


def crd_documents() -> list[dict[str, Any]]:
    """The T9k Job CRDs (generated from the models, as in deploy/crds) plus the companion CRDs."""
    from t9k_provider.jobs.crds import all_crds

    companions = [yaml.safe_load(path.read_text()) for path in sorted(COMPANION_CRDS.glob("*.yaml"))]
    return [*companions, *all_crds().values()]


def _pod_subnet(text: str) -> int:
    index = int(text)
    if not 0 <= index <= 255:
        raise argparse.ArgumentTypeError(f"must be 0-255 (got {index})")
    return index


def _quantity(value: str) -> str:
    if parse_quantity(value) is None or value.startswith("-"):
        raise argparse.ArgumentTypeError(f"{value!r}: {QUANTITY_ERROR}")
    return value


def capacity_overrides(args: argparse.Namespace) -> dict[str, str]:
    return {name: getattr(args, flag) for flag, (name, _) in CAPACITY_FLAGS.items() if getattr(args, flag)}


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


def _node_agents(state: StateDir, kubelet: str, network: str, subnet: int, flink_operator: bool) -> Component:
    """The node agents run in their own process, so the API server's event loop serves only the API (and a
    second core can run them); their output goes to the server's log."""
    argv = [
        sys.executable, "-m", "t9k_provider.local.cli", "node-agents",
        "--state-dir", str(state.path), "--kubelet", kubelet, "--network", network,
        "--pod-subnet", str(subnet), "--server-pid", str(os.getpid()),
        *([] if flink_operator else ["--no-flink-operator"]),
    ]  # fmt: skip
    return Component("node agents", argv, grace=AGENTS_STOP_SECONDS)


def _controller(kubeconfig: Path) -> Component:
    argv = [sys.executable, "-m", "t9k_provider.controller", "--kubeconfig", str(kubeconfig)]
    return Component("T9k controller", argv, log_name="controller.log")


async def serve(
    state: StateDir,
    port: int | None,
    controller: bool,
    kubelet: str | None,
    network: str,
    flink_operator: bool = True,
    capacity: dict[str, str] | None = None,
    subnet: int = 0,
) -> None:
    """Serve until SIGTERM/SIGINT. ``kubelet`` None runs no node agents at all (API server alone);
    ``capacity`` overrides what the Node advertises (`CAPACITY_FLAGS`); ``subnet``: the pods' `PodSubnet`."""
    from t9k_provider.local.apiserver.server import ApiServer
    from t9k_provider.local.controllers.inserver import ServerControllers
    from t9k_provider.local.kubelet.network import PodSubnet, namespaces_available
    from t9k_provider.local.kubelet.streaming import ContainerStreams

    lock = state.acquire()
    netns = kubelet == "process" and network != "host" and namespaces_available()  # as the kubelet decides
    gateway = PodSubnet(subnet).gateway if netns else None
    pki = ensure_pki(state.path, gateway)
    state.private_file("store.db")
    server = ApiServer(
        state.path,
        state.token(),
        pki.server_context(),
        ContainerStreams(state.path),  # the kubelet's streaming endpoints, in this process
        ServerControllers,
        _pick_port(state, port),
        capacity,
        pod_network_host=gateway,
    )
    components = Supervisor(state)
    try:
        bound = await server.start()
        names = server.register_crds(crd_documents())
        kubeconfig = state.write_kubeconfig(bound, server.token)
        server.ready = True
        log.info(
            "t9k-local API server on https://127.0.0.1:%d (state %s, %d CRDs)", bound, state.path, len(names)
        )
        if kubelet is not None:
            agents = await components.start(_node_agents(state, kubelet, network, subnet, flink_operator))
            log.info("node agents started (pid %d, kubelet %s)", agents.pid, kubelet)
        if controller:
            child = await components.start(_controller(kubeconfig))
            log.info("T9k controller started (pid %d, log %s)", child.pid, state.path / "controller.log")
        state.publish_port(lock, bound)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("shutting down")
    finally:
        await components.stop()
        await server.stop()
        state.release(lock)


def _die_with(server_pid: int) -> None:
    """Linux: the kernel SIGKILLs this process when the server dies, as in-process agents would die with it
    (a restarted server starts new agents, and two kubelets must never run at once). Elsewhere: nothing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != server_pid:  # it died before prctl took effect
        os._exit(1)


async def run_agents(
    state: StateDir, kubelet: str, network: str, subnet: int = 0, flink_operator: bool = True
) -> None:
    """The ``node-agents`` process: until SIGTERM/SIGINT, which stop the kubelet's containers first."""
    from t9k_provider.local.agents import run_node_agents

    agents = asyncio.create_task(
        run_node_agents(
            state.kubeconfig, state.path, kubelet, network, subnet=subnet, flink_operator=flink_operator
        )
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, agents.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await agents


# -- commands ---------------------------------------------------------------------------------------------


def _server_args(args: argparse.Namespace, state: StateDir) -> list[str]:
    argv = ["run", "--state-dir", str(state.path), "--kubelet", args.kubelet, "--network", args.network]
    argv += ["--pod-subnet", str(args.pod_subnet)]
    if args.port is not None:
        argv += ["--port", str(args.port)]
    if args.no_controller:
        argv.append("--no-controller")
    if args.no_node_agents:
        argv.append("--no-node-agents")
    if args.no_flink_operator:
        argv.append("--no-flink-operator")
    for flag in CAPACITY_FLAGS:
        if getattr(args, flag):
            argv += [f"--{flag.replace('_', '-')}", getattr(args, flag)]
    return argv


def cmd_run(args: argparse.Namespace, state: StateDir) -> int:
    try:
        kubelet = None if args.no_node_agents else args.kubelet
        flink = not args.no_flink_operator
        capacity = capacity_overrides(args)
        asyncio.run(
            serve(
                state,
                args.port,
                not args.no_controller,
                kubelet,
                args.network,
                flink,
                capacity,
                args.pod_subnet,
            )
        )
    except AlreadyRunning as exc:
        print(f"t9k-local: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_node_agents(args: argparse.Namespace, state: StateDir) -> int:
    _die_with(args.server_pid)
    asyncio.run(run_agents(state, args.kubelet, args.network, args.pod_subnet, not args.no_flink_operator))
    return 0


def cmd_up(args: argparse.Namespace, state: StateDir) -> int:
    state.ensure()
    info = state.running(clean=True)
    if info is not None:
        print(
            f"t9k-local: already running on {state.path} (pid {info.pid}); use `t9k-local down` first",
            file=sys.stderr,
        )
        return 1
    with state.open_log(state.log_file.name) as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "t9k_provider.local.cli", *_server_args(args, state)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_ready(state, proc.pid, args.timeout, lambda: proc.poll() is None)
    except (RuntimeError, TimeoutError) as exc:
        if proc.poll() is None:
            proc.kill()
        tail = "\n".join(f"  | {line}" for line in log_tail(state.log_file))
        print(f"t9k-local: {exc}; its last lines:\n{tail}", file=sys.stderr)
        return 1
    print(state.kubeconfig)
    return 0


def cmd_down(args: argparse.Namespace, state: StateDir) -> int:
    info = state.running(clean=True)
    if info is None:
        print(f"t9k-local: not running on {state.path}")
        return 0
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if state.running() is None:
            print(f"t9k-local: stopped (pid {info.pid})")
            return 0
        time.sleep(0.1)
    os.kill(info.pid, signal.SIGKILL)
    print(f"t9k-local: killed pid {info.pid} after {args.timeout:g}s", file=sys.stderr)
    return 1


def cmd_status(args: argparse.Namespace, state: StateDir) -> int:
    from t9k_provider.local.state import ready

    info = state.running(clean=True)
    if info is None:
        print(f"t9k-local: not running on {state.path}")
        return 1
    healthy = info.port is not None and ready(state, info.port)
    print(f"t9k-local: running (pid {info.pid}) on {state.path}")
    print(f"  server:     https://127.0.0.1:{info.port}" if info.port else "  server:     starting")
    print(f"  ready:      {'yes' if healthy else 'no'}")
    print(f"  kubeconfig: {state.kubeconfig}")
    components = read_status(state)
    for name, component in components.items():
        restarts = component.get("restarts", 0)
        print(f"  {name}: {component.get('state')} (pid {component.get('pid')}, restarts {restarts})")
        last = component.get("lastExit")
        if last:
            ran = f"{last['status']} after {last['ranSeconds']}s"
            print(f"    last exit: {ran}; last lines of {last['log']}:")
            print("\n".join(f"      | {line}" for line in last.get("logTail") or []))
    failing = any(c.get("state") != "running" for c in components.values())
    return 0 if healthy and not failing else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="t9k-local",
        description="Start, stop and inspect the embedded local cluster (docs/local-cluster.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--state-dir",
            type=Path,
            default=None,
            help="state directory (default: $T9K_LOCAL_HOME or ~/.t9k-local)",
        )

    for name, help_text in (
        ("up", "start the cluster in the background"),
        ("run", "run the cluster in the foreground"),
    ):
        p = sub.add_parser(name, help=help_text)
        common(p)
        p.add_argument(
            "--port", type=int, default=None, help="API port (default: the previous one, else free)"
        )
        p.add_argument("--no-controller", action="store_true", help="do not start the T9k controller")
        p.add_argument(
            "--kubelet",
            choices=KUBELET_MODES,
            default="process",
            help="run pods as local processes, simulate them, or none (scheduler and Job controller only)",
        )
        p.add_argument(
            "--network",
            choices=NETWORK_MODES,
            default="auto",
            help="pod network for process pods: netns (needs root), host (loopback fallback), or auto",
        )
        p.add_argument("--pod-subnet", type=_pod_subnet, default=0, help=POD_SUBNET_HELP)
        p.add_argument(
            "--no-node-agents",
            action="store_true",
            help="serve the API alone: no scheduler, kubelet or Job controller (API tests)",
        )
        p.add_argument("--no-flink-operator", action="store_true", help=FLINK_OPERATOR_OFF)
        for flag, (_, help_text) in CAPACITY_FLAGS.items():
            p.add_argument(f"--{flag.replace('_', '-')}", type=_quantity, default=None, help=help_text)
        if name == "up":
            p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for readiness")
    p = sub.add_parser("node-agents", help="(internal) the node agents' process, started by run")
    common(p)
    p.add_argument("--kubelet", choices=KUBELET_MODES, required=True)
    p.add_argument("--network", choices=NETWORK_MODES, required=True)
    p.add_argument("--pod-subnet", type=_pod_subnet, default=0, help=POD_SUBNET_HELP)
    p.add_argument("--server-pid", type=int, required=True, help="the API server's process (its parent)")
    p.add_argument("--no-flink-operator", action="store_true", help=FLINK_OPERATOR_OFF)
    p = sub.add_parser("down", help="stop the background cluster")
    common(p)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait before SIGKILL")
    common(sub.add_parser("status", help="show whether the cluster runs"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    state = StateDir(args.state_dir or default_state_dir())
    commands = {
        "up": cmd_up,
        "run": cmd_run,
        "down": cmd_down,
        "status": cmd_status,
        "node-agents": cmd_node_agents,
    }
    return commands[args.command](args, state)


if __name__ == "__main__":
    sys.exit(main())
