"""Acceptance: ``kubectl port-forward`` (SPDY tunnelled through a WebSocket) to a pod's HTTP server."""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.stream import portforward

from t9k_provider.testing import LocalCluster, free_port
from tests.support.clusters import cluster_fixture

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.usefixtures("kubectl_binary"),
]
POD_PORT = 18080
BIG = bytes(range(256)) * 16 * 1024  # 4 MiB: far past SPDY's 64 KiB initial window


cluster = cluster_fixture()


@pytest.fixture(scope="module")
def server_pod(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A running pod serving a directory with one file over ``python -m http.server``."""
    core = client.CoreV1Api(cluster.api_client())
    ns = f"pf-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": ns}})
    root = tmp_path_factory.mktemp("served")
    (root / "hello.txt").write_text("hello through port-forward\n")
    (root / "big.bin").write_bytes(BIG)
    command = [sys.executable, "-m", "http.server", str(POD_PORT), "--directory", str(root)]
    container = {"name": "web", "image": "python", "command": command}
    core.create_namespaced_pod(
        ns, {"metadata": {"name": "web"}, "spec": {"restartPolicy": "Never", "containers": [container]}}
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod("web", ns)
        if pod.status.phase == "Running" and pod.status.pod_ip and _listening(pod.status.pod_ip, POD_PORT):
            return ns, "web"
        time.sleep(0.3)
    raise AssertionError("the pod's HTTP server did not come up")


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _port_forward(
    cluster: LocalCluster, pod: tuple[str, str], remote: int
) -> Iterator[tuple[int, subprocess.Popen[str], list[str]]]:
    """``kubectl port-forward``, stopped when the block ends; yields the local port, the process and, once
    ended, the command's (stdout, stderr)."""
    ns, name = pod
    local = free_port()
    kubeconfig = str(cluster.kubeconfig)
    proc = subprocess.Popen(
        ["kubectl", "--kubeconfig", kubeconfig, "-n", ns, "port-forward", f"pod/{name}", f"{local}:{remote}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    output: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while not _listening("127.0.0.1", local):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate(timeout=5)
            time.sleep(0.2)
        yield local, proc, output
    finally:
        proc.terminate()
        output += proc.communicate(timeout=10)


def test_kubectl_port_forward_fetches_from_the_pod(
    cluster: LocalCluster, server_pod: tuple[str, str]
) -> None:
    with _port_forward(cluster, server_pod, POD_PORT) as (local, proc, output):
        for _ in range(3):  # one forwarded connection after another over the same session
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/hello.txt", timeout=20) as resp:
                assert resp.read() == b"hello through port-forward\n"
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/big.bin", timeout=60) as resp:
            assert resp.read() == BIG
        assert proc.poll() is None
    out, err = output
    assert f"Forwarding from 127.0.0.1:{local} -> {POD_PORT}" in out, (out, err)
    assert "error" not in err.lower(), err


def test_port_forward_to_a_closed_port_reports_the_error(
    cluster: LocalCluster, server_pod: tuple[str, str]
) -> None:
    """The error reaches kubectl on the port's error stream; kubectl (1.23+) then closes the session and exits
    with "lost connection to pod", as it does against a real cluster."""
    with _port_forward(cluster, server_pod, 1) as (local, proc, output):
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10).read()
        assert proc.wait(timeout=20) == 1
    err = output[1]
    assert "error forwarding port 1" in err, output
    assert "lost connection to pod" in err, output


def test_python_client_portforward_over_channels(cluster: LocalCluster, server_pod: tuple[str, str]) -> None:
    """kubernetes' ``portforward`` speaks the kubelet's ``v4.channel.k8s.io`` WebSocket protocol."""
    ns, name = server_pod
    core = client.CoreV1Api(cluster.api_client())
    forward = portforward(core.connect_get_namespaced_pod_portforward, name, ns, ports=str(POD_PORT))
    conn = http.client.HTTPConnection("pod", POD_PORT, timeout=20)
    conn.sock = forward.socket(POD_PORT)
    conn.request("GET", "/big.bin")
    assert conn.getresponse().read() == BIG
    conn.close()
    assert forward.error(POD_PORT) is None

    closed = portforward(core.connect_get_namespaced_pod_portforward, name, ns, ports="1")
    sock = closed.socket(1)
    sock.settimeout(20)
    assert sock.recv(10) == b""  # the pod side was never reached: the stream ends
    assert "error forwarding port 1" in (closed.error(1) or "")


def test_portforward_without_a_websocket_upgrade_is_a_400_status(
    cluster: LocalCluster, server_pod: tuple[str, str]
) -> None:
    ns, name = server_pod
    status, _, body = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/portforward")
    assert status == 400 and body["kind"] == "Status" and "Upgrade request required" in body["message"]
