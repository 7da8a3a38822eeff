"""``LocalCluster``: a local cluster in a child process, for tests that need to stop, kill or restart it.

``unavailable`` and ``require_limits`` skip a test whose kernel mechanism this machine lacks, except under
``CI=true`` as root, where every mechanism exists and a missing one must fail the run instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

from t9k_provider.local.components import describe_exit, read_status, request_hold
from t9k_provider.local.kubelet import cgroups
from t9k_provider.local.kubelet import network as pod_network
from t9k_provider.local.machinery.nodes import FIRST_NODE, node_roots
from t9k_provider.local.state import StateDir, alive, wait_ready
from t9k_provider.testing import diagnose, polling

# CI sets CI=true (as GitHub Actions and most CI services do) and runs the suite as root.
CI_ENV = "CI"


def ci_must_exercise_everything() -> bool:
    """CI runs as root on a kernel with writable cgroups and network namespaces: there a test that would
    skip for want of a mechanism has found a regression, not a limited machine."""
    return os.environ.get(CI_ENV, "").strip().lower() in {"true", "1", "yes"} and os.geteuid() == 0


def unavailable(what: str, why: str = "") -> NoReturn:
    """Skip a test for want of ``what`` (a developer's machine without root or cgroup delegation), but fail
    it under ``CI=true`` as root, where a silent skip would hide that the mechanism broke."""
    import pytest  # only tests call this; the local cluster itself never needs pytest

    detail = f"{what} not available here" + (f": {why}" if why else "")
    if ci_must_exercise_everything():
        must = f"{CI_ENV}=true as root: CI must exercise it, so this fails instead of skipping"
        pytest.fail(f"{detail} ({must})", pytrace=False)
    pytest.skip(detail)


def require_limits(verdict: str | None) -> None:
    """Go on only if the kubelet's verdict on the Node (``LocalCluster.limits_verdict``: ``enforced: ...``
    or ``not enforced: <why>``) says limits are enforced; else ``unavailable``."""
    if verdict is None or not verdict.startswith("enforced"):
        unavailable("resource limits (cgroups)", verdict or "the kubelet recorded no verdict on the Node")


#: Pod subnets the harness leases (`PodSubnet` 0 stays the default of `t9k-local up`).
LEASED_SUBNETS = range(1, 255)


def lease_pod_subnet(state_dir: Path) -> int:
    """A pod subnet no other running `LocalCluster` on this machine holds, leased to this process until
    `release_pod_subnet`: clusters of parallel test workers get bridges and address ranges of their own.
    Leases whose process is gone (killed before it released them) are taken back, and the others of them
    swept, so none outlives a crashed run for long."""
    leased = None
    with _subnet_leases() as directory:
        for index in LEASED_SUBNETS:
            path = directory / str(index)
            holder = _read_int(path)
            if holder is not None and alive(holder):
                continue
            if leased is None:
                path.write_text(f"{os.getpid()}\n{state_dir}\n")
                leased = index
            elif path.exists():
                path.unlink()
    if leased is None:
        held = f"every pod subnet the harness leases ({LEASED_SUBNETS}) is held by a live process"
        raise RuntimeError(held)
    return leased


def release_pod_subnet(index: int) -> None:
    with _subnet_leases() as directory:
        if _read_int(directory / str(index)) == os.getpid():
            (directory / str(index)).unlink(missing_ok=True)


@contextlib.contextmanager
def _subnet_leases() -> Iterator[Path]:
    """The lease directory, under a machine-wide lock (flock)."""
    directory = pod_network.run_dir() / "pod-subnets"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield directory
    finally:
        os.close(fd)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class LocalCluster:
    """Runs ``t9k-local run`` on ``state_dir``; ``restart()`` keeps port and token, so clients carry on.

    ``node_agents=False`` serves the API alone (no scheduler, kubelet or Job controller);
    ``flink_operator=False`` leaves FlinkClusters to the test (no local flink-operator);
    ``capacity`` sets what each Node advertises, by ``t9k-local run`` flag (``{"cpus": "2"}``);
    ``nodes``: how many nodes (a kubelet each); ``node_grace`` and ``toleration_seconds``: how soon a silent
    node is called Unknown and its pods go (``--node-monitor-grace-period``, DefaultTolerationSeconds);
    ``pod_subnet`` (`PodSubnet` index) defaults to one leased from start to ``stop()``, so that clusters
    started side by side (parallel test workers) never share a bridge or an address range; ``env`` adds
    to the environment of the cluster's processes (``T9K_LOCAL_RESTART_BACKOFF``, say).
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        port: int = 0,
        controller: bool = False,
        kubelet: str = "process",
        network: str = "auto",
        node_agents: bool = True,
        flink_operator: bool = True,
        capacity: dict[str, str] | None = None,
        pod_subnet: int | None = None,
        env: dict[str, str] | None = None,
        nodes: int = 1,
        node_grace: float | None = None,
        toleration_seconds: int | None = None,
    ) -> None:
        self.state = StateDir(Path(state_dir))
        self.pod_subnet = pod_subnet
        self.env = dict(env or {})
        self._leased: int | None = None
        self.port = port
        self.controller = controller
        self.kubelet = kubelet
        self.network = network
        self.node_agents = node_agents
        self.flink_operator = flink_operator
        self.capacity = dict(capacity or {})
        self.nodes = nodes
        self.node_grace = node_grace
        self.toleration_seconds = toleration_seconds
        self.token = ""
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.state.kubeconfig

    @property
    def state_dir(self) -> Path:
        return self.state.path

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def subnet(self) -> pod_network.PodSubnet:
        """The pod subnet of this cluster's netns pods (leased at the first ``start()``)."""
        index = self.pod_subnet if self.pod_subnet is not None else self._leased
        return pod_network.PodSubnet(index or 0)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def agent_pids(self) -> list[int]:
        """The server's node agents (Linux /proc): its ``controllers`` process and every node's kubelet."""
        return self.child_pids("controllers") + self.child_pids("kubelet")

    def kubelet_pid(self, node: str = FIRST_NODE) -> int | None:
        """The pid of ``node``'s kubelet, if it runs."""
        return next((pid for pid in self.child_pids("kubelet") if node in _cmdline(pid)), None)

    def child_pid(self, argument: str) -> int | None:
        """The server's child process with ``argument`` in its command line (``controllers``,
        ``t9k_provider.controller``), if it runs."""
        return next(iter(self.child_pids(argument)), None)

    def child_pids(self, argument: str) -> list[int]:
        if self.pid is None:
            return []
        found = []
        for task in Path(f"/proc/{self.pid}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                found += [int(c) for c in task.read_text().split() if argument in _cmdline(int(c))]
        return found

    def stop_node(self, node: str, timeout: float = 30) -> None:
        """``t9k-local node stop``: ``node``'s kubelet SIGKILLed and held stopped (its containers run on)."""
        self._hold(node, True, "stopped", timeout)

    def start_node(self, node: str, timeout: float = 30) -> None:
        """``t9k-local node start``: ``node``'s kubelet runs again."""
        self._hold(node, False, "running", timeout)

    def _hold(self, node: str, held: bool, wanted: str, timeout: float) -> None:
        component = f"kubelet {node}"
        request_hold(self.state, component, held)
        polling.wait_for(
            f"{component} {wanted}", lambda: read_status(self.state)[component]["state"] == wanted, timeout
        )

    def start(self, timeout: float = 30) -> LocalCluster:
        if self._proc is not None and self._proc.poll() is None:
            raise RuntimeError("this LocalCluster is already running")
        self.state.ensure()
        if self.pod_subnet is None and self._leased is None:
            self._leased = lease_pod_subnet(self.state.path)
            # No live cluster holds it: what a holder that died without stop() left on its bridge goes.
            pod_network.clear_subnet(self.subnet)
        argv = [sys.executable, "-m", "t9k_provider.local.cli", "run", "--state-dir", str(self.state.path)]
        argv += ["--owner-pid", str(os.getpid())]  # a killed test process leaves no cluster running
        argv += ["--port", str(self.port), "--kubelet", self.kubelet, "--network", self.network]
        argv += ["--pod-subnet", str(self.subnet.index), "--nodes", str(self.nodes)]
        if self.node_grace is not None:
            argv += ["--node-monitor-grace-period", str(self.node_grace)]
        if self.toleration_seconds is not None:
            for which in ("not-ready", "unreachable"):
                argv += [f"--default-{which}-toleration-seconds", str(self.toleration_seconds)]
        if not self.controller:
            argv.append("--no-controller")
        if not self.node_agents:
            argv.append("--no-node-agents")
        if not self.flink_operator:
            argv.append("--no-flink-operator")
        for flag, value in self.capacity.items():
            argv += [f"--{flag.replace('_', '-')}", value]
        with self.state.open_log(self.state.log_file.name) as out:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            )
        proc = self._proc
        try:
            self.port = wait_ready(self.state, proc.pid, timeout, lambda: proc.poll() is None)
        except (RuntimeError, TimeoutError) as exc:
            self.kill()
            raise RuntimeError(f"{exc}\n--- server log tail ---\n{self.log_tail()}") from None
        self.token = self.state.token()
        polling.add_reporter(self, self.report)
        return self

    def stop(self, timeout: float = 20) -> list[str]:
        """SIGTERM and wait (SIGKILL after ``timeout``); then nothing of this cluster's kubelet is left (no
        cgroup, pod network namespace, address lease or bridge of its own), even what a kubelet left to a
        next one (``stop_pods_on_exit=False``) or a killed one left behind: also after ``kill()``; its pod
        subnet lease ends. Returns the pod network namespaces the kubelet had left, so a test can tell its
        teardown from this one."""
        polling.remove_reporter(self)
        self._terminate(timeout)
        removed = []
        for root in node_roots(self.state_dir):
            cgroups.remove_leftovers(root)
            removed += pod_network.remove_leftovers(root, self.subnet if self.subnet.index else None)
        if self._leased is not None:
            release_pod_subnet(self._leased)
            self._leased = None
        return removed

    def _terminate(self, timeout: float) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self._proc = None

    def kill(self) -> None:
        """SIGKILL, as a crash would; the next ``start()`` finds and replaces the stale pid file."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        self._proc = None

    def restart(self, timeout: float = 30) -> LocalCluster:
        """Stop and start again on the same pod subnet: pods a kubelet left to the next one stay reachable."""
        self._terminate(20)
        return self.start(timeout)

    def report(self, namespace: str | None = None) -> str:
        """What this cluster looks like, in words (`diagnose`): its server and components (how a dead one
        ended, its last log lines) and the pods that tell, of ``namespace`` or all."""
        head = f"cluster {self.state_dir}:"
        proc = self._proc
        if proc is None or proc.poll() is not None:
            code = "never started" if proc is None else describe_exit(proc.returncode)
            tail = "\n".join(f"  | {line}" for line in self.log_tail(15).splitlines())
            return (
                f"{head} the server is not running ({code}); the last lines of {self.state.log_file}:\n{tail}"
            )
        lines = [head]
        for name, component in read_status(self.state).items():
            last = component.get("lastExit")
            if component.get("state") != "running" or last:
                lines.append(f"  {name}: {component.get('state')}, restarts {component.get('restarts')}")
                if last:
                    lines.append(f"    last exit: {last['status']} after {last['ranSeconds']}s; last lines:")
                    lines += [f"      | {line}" for line in last.get("logTail") or []]

        def request(method: str, path: str) -> tuple[int, dict[str, str], Any]:
            return self.request(method, path, timeout=5)

        lines += [f"  {line}" for line in diagnose.cluster_report(request, namespace).splitlines()]
        return "\n".join(lines)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.state.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def limits_verdict(self, timeout: float = 30) -> str | None:
        """The kubelet's verdict on resource limits, from the Node once the kubelet has recorded it (None if
        it has not within ``timeout``): pass it to ``require_limits``."""
        from t9k_provider.local.kubelet.kubelet import RESOURCE_LIMITS_ANNOTATION

        deadline = time.monotonic() + timeout
        while True:
            status, _, node = self.request("GET", f"/api/v1/nodes/{FIRST_NODE}")
            metadata = (node.get("metadata") or {}) if status == 200 and isinstance(node, dict) else {}
            verdict = (metadata.get("annotations") or {}).get(RESOURCE_LIMITS_ANNOTATION)
            if verdict is not None or time.monotonic() > deadline:
                return verdict
            time.sleep(0.2)

    # -- clients -------------------------------------------------------------------------------------------

    def connection(self, timeout: float = 30) -> http.client.HTTPSConnection:
        """A connected raw HTTPS connection that trusts this cluster's CA (send the ``token`` yourself).

        TCP_NODELAY is set, as urllib3 and aiohttp do: ``http.client`` sends headers and body in separate
        writes, which Nagle's algorithm would otherwise hold back until the server's delayed ACK.
        """
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, timeout=timeout, context=self.state.client_context()
        )
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, dict[str, str], Any]:
        """One raw HTTP request with the bearer token: (status, headers, JSON body or text).

        ``body`` may be bytes (sent as is) or any JSON value; set ``Content-Type`` in ``headers`` as needed.
        """
        conn = self.connection(timeout)
        sent = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        data: bytes | None
        if body is None or isinstance(body, bytes):
            data = body
        else:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=data, headers=sent)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        text = raw.decode(errors="replace")
        try:
            parsed: Any = json.loads(text) if "json" in (resp.getheader("Content-Type") or "") else text
        except ValueError:
            parsed = text
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed

    def api_client(self) -> Any:
        """A sync ``kubernetes.client.ApiClient`` bound to this cluster (the global config is left alone)."""
        from kubernetes import client

        return client.ApiClient(self._configured(client.Configuration()))

    def kube_session(self) -> Any:
        """A ``t9k_provider.kube.api.Session`` on this cluster, for a ``KubeApi`` (the controller's and the
        provider's client); open it in a running event loop and close it there (``async with``)."""
        from t9k_provider.kube import kubeconfig
        from t9k_provider.kube.api import Session

        return Session(kubeconfig.load(self.kubeconfig))

    def async_api_client(self) -> Any:
        """A ``kubernetes_asyncio.client.ApiClient`` bound to this cluster; close it in the same loop."""
        from kubernetes_asyncio import client

        return client.ApiClient(self._configured(client.Configuration()))

    def _configured(self, config: Any) -> Any:
        config.host = self.base_url
        config.api_key = {"BearerToken": self.token}
        config.api_key_prefix = {"BearerToken": "Bearer"}
        config.ssl_ca_cert = str(self.state.ca_cert)
        return config


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []
