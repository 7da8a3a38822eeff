"""``t9k-local``: start, stop and inspect the embedded local cluster.

``run`` serves in the foreground (API server; the controllers, a kubelet per node and the T9k controller as
child processes); ``up`` starts ``run`` in the background and returns once the API answers; ``down`` stops
it; ``status`` reports it; ``connection`` prints an Airflow connection to it (the kubeconfig and the console's
link templates); ``node stop|start NAME`` stops a node's kubelet or starts it again.
``controllers``, ``kubelet`` and ``console`` are the child processes ``run`` starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from t9k_provider.kube import collector
from t9k_provider.local.components import log_tail, read_status, request_hold
from t9k_provider.local.controllers.nodelifecycle import DEFAULT_GRACE
from t9k_provider.local.kubelet.heartbeat import RENEW_INTERVAL
from t9k_provider.local.machinery.quantity import QUANTITY_ERROR, parse_quantity
from t9k_provider.local.serving import CAPACITY_FLAGS, run_child, serve
from t9k_provider.local.state import AlreadyRunning, StateDir, default_state_dir, wait_ready

log = logging.getLogger("t9k_provider.local")
KUBELET_MODES = ("process", "simulated", "none")
NETWORK_MODES = ("auto", "netns", "host")
POD_SUBNET_HELP = (
    "netns pod network N (0-255): bridge t9kN with 10.251.N.0/24 (default 0); clusters on different subnets "
    "run side by side without seeing each other's pods"
)
FLINK_OPERATOR_OFF = "do not run the local flink-operator (FlinkClusters then stay as written)"
NODES_HELP = (
    "how many nodes: a kubelet each, as t9k-local-node, t9k-local-node-1, ...; each advertises its share of "
    "the machine's CPUs, memory and GPUs, or what --cpus, --memory, --gpus, --max-pods set (per node)"
)
GRACE_HELP = "seconds a node's kubelet may stay silent before the node is called Unknown (default 50)"
TOLERATION_HELP = "seconds a pod stays on a node whose Ready condition is False or Unknown (default 300)"


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
    return run_child(args.server_pid, work)


def cmd_console(args: argparse.Namespace, state: StateDir) -> int:
    from t9k_provider.local.console.server import serve

    return run_child(args.server_pid, serve(state.kubeconfig, args.listen_fd))


def cmd_kubelet(args: argparse.Namespace, state: StateDir) -> int:
    from t9k_provider.local.agents import run_kubelet

    work = run_kubelet(
        state.kubeconfig, state.path, args.node, args.kubelet, args.network,
        subnet=args.pod_subnet, index=args.index, first_device=args.first_device, heartbeat=args.heartbeat,
    )  # fmt: skip
    return run_child(args.server_pid, work)


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
    from t9k_provider.local.connection import running_console
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
    console = running_console(state)
    if console is not None:
        print(f"  console:    {console['url']}")
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


def cmd_connection(args: argparse.Namespace, state: StateDir) -> int:
    """The ``kubernetes`` connection to this cluster as JSON, for ``AIRFLOW_CONN_KUBERNETES_DEFAULT``: its
    kubeconfig, and the templates of the "T9k Job" and "TensorBoard" links (the console's pages)."""
    from t9k_provider.local.connection import airflow_connection

    if state.running(clean=True) is None:
        print(f"t9k-local: not running on {state.path}", file=sys.stderr)
        return 1
    print(json.dumps(airflow_connection(state)))
    return 0


def _command(sub: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    """A subcommand; every one takes the state directory."""
    p = sub.add_parser(name, help=help_text)
    p.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="state directory (default: $T9K_LOCAL_HOME or ~/.t9k-local)",
    )
    return p


def _cluster_options(p: argparse.ArgumentParser) -> None:
    """What ``up`` and ``run`` take: the cluster's shape."""
    p.add_argument("--port", type=int, default=None, help="API port (default: the previous one, else free)")
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
            f"--default-{which}-toleration-seconds", type=_whole_seconds, default=300, help=TOLERATION_HELP
        )


def _internal_commands(sub: argparse._SubParsersAction) -> None:
    """The child processes ``run`` starts: each knows its server, and dies with it."""
    controllers = _command(sub, "controllers", "(internal) the controllers' process, started by run")
    controllers.add_argument("--kubelet", choices=KUBELET_MODES, required=True)
    controllers.add_argument("--flink-operator", action="store_true", help="run the local flink-operator")
    controllers.add_argument(
        "--node-monitor-grace-period", type=_seconds, default=DEFAULT_GRACE, help=GRACE_HELP
    )
    kubelet = _command(sub, "kubelet", "(internal) a node's kubelet process, started by run")
    kubelet.add_argument("--node", required=True)
    kubelet.add_argument("--index", type=int, default=0, help="the node's place in the cluster")
    kubelet.add_argument("--first-device", type=int, default=0, help="the node's first GPU on the machine")
    kubelet.add_argument(
        "--heartbeat", type=_seconds, default=RENEW_INTERVAL, help="seconds between renewals"
    )
    kubelet.add_argument("--kubelet", choices=KUBELET_MODES, required=True)
    kubelet.add_argument("--network", choices=NETWORK_MODES, required=True)
    kubelet.add_argument("--pod-subnet", type=_pod_subnet, default=0, help=POD_SUBNET_HELP)
    console = _command(sub, "console", "(internal) the console's process, started by run")
    console.add_argument("--listen-fd", type=int, required=True, help="the listening socket run opened")
    for p in (controllers, kubelet, console):
        p.add_argument("--server-pid", type=int, required=True, help="the API server's process (its parent)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="t9k-local",
        description="Start, stop and inspect the embedded local cluster (docs/local-cluster.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = _command(sub, "run", "run the cluster in the foreground")
    _cluster_options(run)
    run.add_argument(
        "--owner-pid",
        type=int,
        default=None,
        help="stop, as on SIGTERM, once this process has ended (a program running a cluster for itself)",
    )
    up = _command(sub, "up", "start the cluster in the background")
    _cluster_options(up)
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for readiness")
    node = _command(sub, "node", "stop a node's kubelet (as if the node were lost) or start it again")
    node.add_argument("action", choices=("stop", "start"))
    node.add_argument("name", help="the node, as `kubectl get nodes` names it")
    node.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for it to happen")
    down = _command(sub, "down", "stop the background cluster")
    down.add_argument("--timeout", type=float, default=30.0, help="seconds to wait before SIGKILL")
    _command(sub, "status", "show whether the cluster runs")
    _command(sub, "connection", "print an Airflow connection to the running cluster (JSON)")
    _internal_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    collector.pace_for_a_server()
    state = StateDir(args.state_dir or default_state_dir())
    commands = {
        "up": cmd_up,
        "run": cmd_run,
        "down": cmd_down,
        "status": cmd_status,
        "connection": cmd_connection,
        "node": cmd_node,
        "controllers": cmd_controllers,
        "kubelet": cmd_kubelet,
        "console": cmd_console,
    }
    return commands[args.command](args, state)


if __name__ == "__main__":
    sys.exit(main())
