"""``t9k-local``: start, stop and inspect the embedded local cluster.

``run`` serves in the foreground (API server; the controllers, a kubelet per node and the T9k controller as
child processes); ``up`` starts ``run`` in the background and returns once the API answers; ``down`` stops
it; ``status`` reports it; ``node stop|start NAME`` stops a node's kubelet or starts it again.
``controllers``, ``kubelet`` and ``console`` are the child processes ``run`` starts.
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
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import yaml

from t9k_provider.kube.resources import GPU
from t9k_provider.local.apiserver.strategies.nodes import first_devices, node_capacities
from t9k_provider.local.components import Component, Supervisor, log_tail, read_status, request_hold
from t9k_provider.local.controllers.nodelifecycle import DEFAULT_GRACE
from t9k_provider.local.kubelet.heartbeat import RENEW_INTERVAL
from t9k_provider.local.machinery.nodes import node_names
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
NODES_HELP = (
    "how many nodes: a kubelet each, as t9k-local-node, t9k-local-node-1, ...; each advertises its share of "
    "the machine's CPUs, memory and GPUs, or what --cpus, --memory, --gpus, --max-pods set (per node)"
)
GRACE_HELP = "seconds a node's kubelet may stay silent before the node is called Unknown (default 50)"
TOLERATION_HELP = "seconds a pod stays on a node whose Ready condition is False or Unknown (default 300)"
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


def _node_count(text: str) -> int:
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"a cluster has at least one node (got {count})")
    return count


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (got {text})")
    return value


def _whole_seconds(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds (got {text})")
    return value


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


def _internal(command: str, state: StateDir, *args: str) -> list[str]:
    """The command line of one of the server's internal child processes."""
    return [
        sys.executable, "-m", "t9k_provider.local.cli", command,
        "--state-dir", str(state.path), "--server-pid", str(os.getpid()), *args,
    ]  # fmt: skip


def _components(state: StateDir, args: argparse.Namespace, kubeconfig: Path) -> list[Component]:
    """What the server runs beside itself: the controllers and a kubelet per node (unless
    ``--no-node-agents``), and the T9k controller and the console (unless ``--no-controller``). Each is a
    process of its own, so that the API server's event loop serves only the API, another core runs the rest,
    and one node's kubelet can stop while the others run on; their output goes to the server's log."""
    out = []
    if not args.no_node_agents:
        flink = [] if args.no_flink_operator else ["--flink-operator"]
        grace = ["--node-monitor-grace-period", str(args.node_monitor_grace_period)]
        controllers = _internal("controllers", state, "--kubelet", args.kubelet, *grace, *flink)
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
                argv = _internal("kubelet", state, *where, *how)
                out.append(Component(f"kubelet {name}", argv, grace=AGENTS_STOP_SECONDS))
    if not args.no_controller:
        argv = [sys.executable, "-m", "t9k_provider.controller", "--kubeconfig", str(kubeconfig)]
        out.append(Component("T9k controller", argv, log_name="controller.log"))
        out.append(Component("console", _internal("console", state), log_name="console.log"))
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
    try:
        bound = await server.start()
        names = server.register_crds(crd_documents())
        kubeconfig = state.write_kubeconfig(bound, server.token)
        server.ready = True
        log.info(
            "t9k-local API server on https://127.0.0.1:%d (state %s, %d CRDs)", bound, state.path, len(names)
        )
        for component in _components(state, args, kubeconfig):
            proc = await components.start(component)
            log.info("%s started (pid %d)", component.name, proc.pid)
        state.publish_port(lock, bound)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, components.apply_holds)
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


def _run_child(server_pid: int, work: Coroutine[Any, Any, None]) -> int:
    """An internal child process: until SIGTERM/SIGINT (a kubelet then stops its containers first)."""
    _die_with(server_pid)

    async def main() -> None:
        task = asyncio.ensure_future(work)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())
    return 0


# -- commands ---------------------------------------------------------------------------------------------


def _server_args(args: argparse.Namespace, state: StateDir) -> list[str]:
    argv = ["run", "--state-dir", str(state.path), "--kubelet", args.kubelet, "--network", args.network]
    argv += ["--pod-subnet", str(args.pod_subnet), "--nodes", str(args.nodes)]
    argv += ["--node-monitor-grace-period", str(args.node_monitor_grace_period)]
    argv += ["--default-not-ready-toleration-seconds", str(args.default_not_ready_toleration_seconds)]
    argv += ["--default-unreachable-toleration-seconds", str(args.default_unreachable_toleration_seconds)]
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
        asyncio.run(serve(state, args))
    except AlreadyRunning as exc:
        print(f"t9k-local: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_controllers(args: argparse.Namespace, state: StateDir) -> int:
    from t9k_provider.local.agents import run_controllers

    work = run_controllers(
        state.kubeconfig,
        state.path,
        mode=args.kubelet,
        flink_operator=args.flink_operator,
        node_grace=args.node_monitor_grace_period,
    )
    return _run_child(args.server_pid, work)


def cmd_console(args: argparse.Namespace, state: StateDir) -> int:
    from t9k_provider.local.console.server import serve

    return _run_child(args.server_pid, serve(state.kubeconfig, state.path))


def cmd_kubelet(args: argparse.Namespace, state: StateDir) -> int:
    from t9k_provider.local.agents import run_kubelet

    work = run_kubelet(
        state.kubeconfig, state.path, args.node, args.kubelet, args.network,
        subnet=args.pod_subnet, index=args.index, first_device=args.first_device, heartbeat=args.heartbeat,
    )  # fmt: skip
    return _run_child(args.server_pid, work)


def cmd_node(args: argparse.Namespace, state: StateDir) -> int:
    """``node stop|start NAME``: hold a node's kubelet stopped (SIGKILLed, as a crashed kubelet or a node cut
    off from the cluster: its containers run on, nobody reports them) or start it again."""
    component = f"kubelet {args.name}"
    stop = args.action == "stop"
    try:
        request_hold(state, component, held=stop)
    except RuntimeError as exc:
        print(f"t9k-local: {exc}", file=sys.stderr)
        return 1
    except LookupError:
        nodes = sorted(n.removeprefix("kubelet ") for n in read_status(state) if n.startswith("kubelet "))
        print(f"t9k-local: no node named {args.name!r}; nodes: {', '.join(nodes) or 'none'}", file=sys.stderr)
        return 2
    wanted = "stopped" if stop else "running"
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if read_status(state).get(component, {}).get("state") == wanted:
            said = (
                "its kubelet was SIGKILLed; its containers run on unreported" if stop else "its kubelet runs"
            )
            print(f"t9k-local: node {args.name} {wanted} ({said})")
            return 0
        time.sleep(0.05)
    print(f"t9k-local: node {args.name} not {wanted} after {args.timeout:g}s", file=sys.stderr)
    return 1


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
        p.add_argument("--nodes", type=_node_count, default=1, help=NODES_HELP)
        p.add_argument("--node-monitor-grace-period", type=_seconds, default=DEFAULT_GRACE, help=GRACE_HELP)
        for which in ("not-ready", "unreachable"):
            p.add_argument(
                f"--default-{which}-toleration-seconds",
                type=_whole_seconds,
                default=300,
                help=TOLERATION_HELP,
            )
        if name == "up":
            p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for readiness")
    p = sub.add_parser("node", help="stop a node's kubelet (as if the node were lost) or start it again")
    common(p)
    p.add_argument("action", choices=("stop", "start"))
    p.add_argument("name", help="the node, as `kubectl get nodes` names it")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for it to happen")
    p = sub.add_parser("controllers", help="(internal) the controllers' process, started by run")
    common(p)
    p.add_argument("--kubelet", choices=KUBELET_MODES, required=True)
    p.add_argument("--server-pid", type=int, required=True, help="the API server's process (its parent)")
    p.add_argument("--flink-operator", action="store_true", help="run the local flink-operator")
    p.add_argument("--node-monitor-grace-period", type=_seconds, default=DEFAULT_GRACE, help=GRACE_HELP)
    p = sub.add_parser("kubelet", help="(internal) a node's kubelet process, started by run")
    common(p)
    p.add_argument("--node", required=True)
    p.add_argument("--index", type=int, default=0, help="the node's place in the cluster")
    p.add_argument("--first-device", type=int, default=0, help="the node's first GPU on the machine")
    p.add_argument(
        "--heartbeat", type=_seconds, default=RENEW_INTERVAL, help="seconds between Lease renewals"
    )
    p.add_argument("--kubelet", choices=KUBELET_MODES, required=True)
    p.add_argument("--network", choices=NETWORK_MODES, required=True)
    p.add_argument("--pod-subnet", type=_pod_subnet, default=0, help=POD_SUBNET_HELP)
    p.add_argument("--server-pid", type=int, required=True, help="the API server's process (its parent)")
    p = sub.add_parser("console", help="(internal) the console's process, started by run")
    common(p)
    p.add_argument("--server-pid", type=int, required=True, help="the API server's process (its parent)")
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
        "node": cmd_node,
        "controllers": cmd_controllers,
        "kubelet": cmd_kubelet,
        "console": cmd_console,
    }
    return commands[args.command](args, state)


if __name__ == "__main__":
    sys.exit(main())
