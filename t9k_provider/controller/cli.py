"""``t9k-controller``: run the T9k Job controller against a cluster (real or the embedded local one)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from t9k_provider.controller.runtime import log_format
from t9k_provider.controller.runtime.manager import Manager, Settings
from t9k_provider.kube import collector, kubeconfig

log = logging.getLogger("t9k_provider.controller")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="t9k-controller",
        description="Reconcile TensorStack T9k Jobs (batch.tensorstack.dev/v1beta1) into pods and services.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, then $KUBECONFIG)")
    p.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="NS",
        help="watch only this namespace (repeatable; default: all namespaces)",
    )
    p.add_argument("--workers", type=_positive, default=16, help="concurrent reconciles (default 16)")
    p.add_argument("--metrics-port", type=_port, default=0, help="serve Prometheus /metrics here (0: off)")
    p.add_argument("--health-port", type=_port, default=0, help="serve /healthz and /readyz here (0: off)")
    p.add_argument("--bind-address", default="127.0.0.1", help="address of the metrics/health servers")
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="take a coordination.k8s.io Lease before acting; needed with more than one replica",
    )
    p.add_argument("--lease-name", default="t9k-controller")
    p.add_argument(
        "--lease-namespace", default=None, help="default: the pod's namespace in-cluster, else default"
    )
    p.add_argument(
        "--lease-duration", type=float, default=15.0, help="seconds a standby waits before taking over"
    )
    p.add_argument("--renew-deadline", type=float, default=10.0, help="seconds the leader may fail to renew")
    p.add_argument("--retry-period", type=float, default=2.0, help="seconds between lease attempts")
    p.add_argument("--identity", default="", help="leader identity (default: hostname plus a random suffix)")
    p.add_argument("--log-format", choices=["json", "text"], default="json")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    return p


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be a port number (0 turns the server off)")
    return value


def _in_cluster_namespace() -> str | None:
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


async def run(args: argparse.Namespace) -> int:
    from t9k_provider.controller.kinds.registry import WATCHED_CHILD_TYPES
    from t9k_provider.controller.reconcile import reconcile
    from t9k_provider.jobs import API_VERSION, KINDS
    from t9k_provider.kube.api import api_client
    from t9k_provider.kube.resources import ResourceType

    settings = Settings(
        namespaces=args.namespace,
        workers=args.workers,
        leader_elect=args.leader_elect,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace or _in_cluster_namespace() or "default",
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        identity=args.identity,
        bind_address=args.bind_address,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
    )
    job_types = [ResourceType(API_VERSION, kind, cls.PLURAL) for kind, cls in sorted(KINDS.items())]
    child_types = [ResourceType(*child) for child in WATCHED_CHILD_TYPES]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = await api_client(args.kubeconfig)
    async with client:
        manager = Manager(client, settings, reconcile, job_types, child_types)
        return await manager.run(stop)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.leader_elect and not 0 < args.retry_period < args.renew_deadline < args.lease_duration:
        build_parser().error("need 0 < --retry-period < --renew-deadline < --lease-duration")
    log_format.configure(args.log_format, args.log_level)
    collector.pace_for_a_server()
    try:
        return asyncio.run(run(args))
    except kubeconfig.KubeconfigError as exc:
        log.error("cannot load the cluster configuration: %s", exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
