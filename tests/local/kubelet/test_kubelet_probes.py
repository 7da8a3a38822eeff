"""Probe verdicts and handlers, without a cluster (the end-to-end cases are in test_kubelet_cluster.py)."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from t9k_provider.local.kubelet import probes
from t9k_provider.local.kubelet.probes import ContainerProber, Probe, ProbeState, ProbeTarget, run_probe


def test_defaults_are_kubernetes_defaults() -> None:
    probe = Probe.of("liveness", {"tcpSocket": {"port": 80}})
    assert (probe.initial_delay, probe.period, probe.timeout) == (0, 10, 1)
    assert (probe.success_threshold, probe.failure_threshold) == (1, 3)


def test_verdict_changes_only_after_threshold_results_in_a_row() -> None:
    probe = Probe.of("readiness", {"tcpSocket": {"port": 80}, "successThreshold": 2, "failureThreshold": 3})
    state = ProbeState(probe, result=False)
    assert [state.record(ok) for ok in (True, False, True, True)] == [False, False, False, True]
    assert state.result is True
    assert [state.record(ok) for ok in (False, False, True, False, False, False)] == [False] * 5 + [True]
    assert state.result is False


class _Server(http.server.BaseHTTPRequestHandler):
    codes = {"/ok": 200, "/moved": 302, "/bad": 500}

    def do_GET(self) -> None:
        self.send_response(self.codes.get(self.path, 404))
        self.end_headers()
        self.wfile.write(self.headers.get("X-Probe", "").encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _run(handler: dict, container: dict | None = None) -> tuple[bool, str]:
    target = ProbeTarget("127.0.0.1", container or {"name": "c"}, None)
    return asyncio.run(run_probe(Probe.of("liveness", {**handler, "timeoutSeconds": 2}), target))


def test_http_get_success_codes_named_ports_and_headers(http_port: int) -> None:
    container = {"name": "c", "ports": [{"name": "web", "containerPort": http_port}]}
    headers = [{"name": "X-Probe", "value": "hello"}]
    assert _run({"httpGet": {"path": "/ok", "port": "web", "httpHeaders": headers}}, container) == (
        True,
        "hello",
    )
    assert _run({"httpGet": {"path": "/moved", "port": http_port}})[0] is True  # 3xx passes, not followed
    assert _run({"httpGet": {"path": "/bad", "port": http_port}}) == (
        False,
        "HTTP probe failed with statuscode: 500",
    )
    assert _run({"httpGet": {"port": "nope"}}, container) == (
        False,
        "port 'nope' not found in the container's ports",
    )


def test_tcp_socket_and_unsupported_handlers(http_port: int) -> None:
    assert _run({"tcpSocket": {"port": http_port}}) == (True, "")
    closed = _run({"tcpSocket": {"port": 1}})
    assert closed == (False, "dial tcp 127.0.0.1:1: connect: connection refused")
    ok, message = _run({"grpc": {"port": 1}})
    assert not ok and "not supported" in message
    assert _run({"exec": {"command": ["true"]}}) == (False, "container is not running")


def test_liveness_and_readiness_wait_for_the_startup_probe(http_port: int) -> None:
    """Until startup passes only it runs; a liveness failure at its threshold asks for one kill."""
    container = {
        "name": "c",
        "startupProbe": {"tcpSocket": {"port": http_port}, "periodSeconds": 1},
        "livenessProbe": {"tcpSocket": {"port": 1}, "periodSeconds": 1, "failureThreshold": 1},
        "readinessProbe": {"httpGet": {"path": "/ok", "port": http_port}, "periodSeconds": 1},
    }
    target = ProbeTarget("127.0.0.1", container, None)

    async def scenario() -> list[tuple[bool, bool, list[str], str | None]]:
        prober = ContainerProber(container, attempt=0, started_at=0.0)
        seen = []
        for _ in range(200):
            verdict = prober.due(target)
            running = sorted(kind for kind, s in prober.states.items() if s.task is not None)
            seen.append((prober.started, prober.ready, running, verdict.kill and verdict.kill.kind))
            if verdict.kill is not None:
                break
            for state in prober.states.values():
                state.next_at = 0.0  # do not wait out the period
            await asyncio.sleep(0.02)
        prober.cancel()
        return seen

    seen = asyncio.run(scenario())
    assert seen[0] == (False, False, ["startup"], None)
    assert all(started for started, _, running, _ in seen if "liveness" in running or "readiness" in running)
    assert any("liveness" in running for _, _, running, _ in seen)
    assert seen[-1][3] == "liveness"


def test_an_answer_that_is_not_http_fails_the_probe() -> None:
    """A port that speaks something else: a failed probe with a message, as upstream."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer_garbage() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    try:
        ok, message = _run({"httpGet": {"path": "/", "port": port}})
    finally:
        thread.join(5)
        listener.close()
    assert not ok
    assert message.startswith(f'Get "http://127.0.0.1:{port}/": malformed HTTP response: BadStatusLine')


def test_a_probe_that_raises_is_a_failure_and_the_next_one_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever a probe raises, the prober counts a failure and goes on probing (it never re-raises a
    finished task's error on every pass, which would stop the pod's probes and status updates)."""
    calls = []

    async def broken(probe: Probe, target: ProbeTarget) -> tuple[bool, str]:
        calls.append(probe.kind)
        raise RuntimeError("boom")

    monkeypatch.setattr(probes, "run_probe", broken)
    container = {"name": "c", "readinessProbe": {"tcpSocket": {"port": 1}, "periodSeconds": 1}}
    target = ProbeTarget("127.0.0.1", container, None)

    async def scenario() -> list[str]:
        prober = ContainerProber(container, attempt=0, started_at=0.0)
        messages: list[str] = []
        for _ in range(50):
            messages += [message for _, message in prober.due(target).failures]
            if len(messages) == 2:
                break
            prober.states["readiness"].next_at = 0.0
            await asyncio.sleep(0.01)
        prober.cancel()
        return messages

    assert asyncio.run(scenario()) == ["probe error: RuntimeError: boom"] * 2
    assert len(calls) >= 2
