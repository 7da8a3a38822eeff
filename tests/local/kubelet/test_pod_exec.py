"""Acceptance: `pods/exec` on the local cluster with kubectl, the Python client and raw WebSocket clients."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes import client
from kubernetes.stream import stream

from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.testing import LocalCluster, none_left, wait_for
from tests.support.builders import make_container, make_job, make_template
from tests.support.clusters import cluster_fixture

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.usefixtures("kubectl_binary"),
]
NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="container namespaces need root")


#: With the T9k controller, for the debug-mode GenericJob.
cluster = cluster_fixture(controller=True)


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


@pytest.fixture(scope="module")
def ns(core: client.CoreV1Api) -> str:
    name = f"x-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def kubectl(cluster: LocalCluster, ns: str, tmp_path_factory: pytest.TempPathFactory):
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cache), "-n", ns, *args],
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    return run


def create_pod(core: client.CoreV1Api, ns: str, name: str, containers: list[dict], **spec: Any) -> None:
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "containers": containers,
                **spec,
            },
        },
    )


def running_pod(
    core: client.CoreV1Api, ns: str, name: str, containers: list[dict], **spec: Any
) -> client.V1Pod:
    create_pod(core, ns, name, containers, **spec)

    def running() -> client.V1Pod | None:
        pod = core.read_namespaced_pod(name, ns)
        statuses = pod.status.container_statuses or []
        return pod if statuses and all(s.state.running for s in statuses) else None

    return wait_for(f"pod {name} running", running)


@pytest.fixture(scope="module")
def sleeper(core: client.CoreV1Api, ns: str, tmp_path_factory: pytest.TempPathFactory) -> client.V1Pod:
    """Two long-running containers; `main` has a workingDir, an env variable and an emptyDir volume."""
    workdir = tmp_path_factory.mktemp("exec-workdir")
    return running_pod(
        core,
        ns,
        "sleeper",
        volumes=[{"name": "data", "emptyDir": {}}],
        containers=[
            {
                "name": "main",
                "image": "busybox",
                "command": ["sh", "-c", "echo from-main > data/marker; exec sleep 600"],
                "workingDir": str(workdir),
                "env": [{"name": "GREETING", "value": "hello from the pod"}],
                "volumeMounts": [{"name": "data", "mountPath": f"{workdir}/data"}],
            },
            {"name": "side", "image": "busybox", "command": ["sleep", "600"]},
        ],
    )


# -- kubectl -------------------------------------------------------------------------------------------


def test_kubectl_exec_runs_in_the_container_and_returns_its_exit_code(kubectl, sleeper: client.V1Pod) -> None:
    script = 'echo "$HOSTNAME"; cat /etc/hosts; pwd; echo "$GREETING"; echo oops >&2; exit 3'
    result = kubectl("exec", "sleeper", "-c", "main", "--", "sh", "-c", script)
    out = result.stdout.decode()
    assert result.returncode == 3, result.stderr
    lines = out.splitlines()
    assert lines[0] == "sleeper"
    assert any(line.split() == [sleeper.status.pod_ip, "sleeper"] for line in lines), out
    assert sleeper.spec.containers[0].working_dir in lines
    assert "hello from the pod" in lines
    assert "oops" in result.stderr.decode()
    assert "command terminated with exit code 3" in result.stderr.decode()


@NEEDS_ROOT
def test_kubectl_exec_sees_the_container_volumes_and_network(kubectl, sleeper: client.V1Pod) -> None:
    result = kubectl("exec", "sleeper", "-c", "main", "--", "sh", "-c", "cat data/marker; hostname")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split() == ["from-main", "sleeper"]
    assert not (Path(sleeper.spec.containers[0].working_dir) / "data" / "marker").exists()  # only in there
    # The pod's network namespace: its IP is on an interface here (not in the host's namespace).
    ip = sleeper.status.pod_ip
    script = f"import socket; s = socket.socket(); s.bind(('{ip}', 0)); print('bound')"
    result = kubectl("exec", "sleeper", "-c", "side", "--", "python", "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"bound\n"


@NEEDS_ROOT
def test_kubectl_exec_sees_only_the_container_processes(kubectl, sleeper: client.V1Pod) -> None:
    """The container's own PID namespace: `ps`, `pgrep` and `kill` there cannot reach the host."""
    script = "cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'"
    result = kubectl("exec", "sleeper", "-c", "side", "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    cmdline, count = result.stdout.decode().splitlines()
    assert cmdline.strip() == "sleep 600"  # PID 1 is the container's main process
    assert int(count) <= 5  # sleep, the exec'd sh, ls, grep (a host has hundreds)


@NEEDS_ROOT
def test_kubectl_exec_runs_in_the_container_cgroup(kubectl, sleeper: client.V1Pod) -> None:
    """What `kubectl exec` starts counts against the container's limits: it joins the container's cgroup."""
    script = "cat /proc/self/cgroup; echo --; cat /proc/1/cgroup"
    result = kubectl("exec", "sleeper", "-c", "side", "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    exec_cgroups, main_cgroups = result.stdout.decode().split("--\n")
    assert f"/pod{sleeper.metadata.uid}/side-0\n" in main_cgroups
    assert exec_cgroups == main_cgroups


def test_stopping_a_sidecar_by_signal_as_airflow_does(core: client.CoreV1Api, ns: str) -> None:
    """KubernetesPodOperator stops its xcom sidecar through exec: SIGINT to the `sh` that traps it."""
    token = f"sidecar-{uuid.uuid4().hex[:8]}"
    trap = 'trap "exit 0" INT; while true; do sleep 1; done'
    running_pod(
        core, ns, "xcom", [{"name": "sidecar", "image": "alpine", "command": ["sh", "-c", trap, token]}]
    )
    ws = stream(
        core.connect_get_namespaced_pod_exec,
        "xcom",
        ns,
        container="sidecar",
        command=["/bin/sh"],
        stdin=True,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    ws.write_stdin(f"kill -2 $(pgrep -f {token})\n")
    ws.run_forever(timeout=20)
    assert not ws.is_open()

    def finished() -> str | None:
        pod = core.read_namespaced_pod("xcom", ns)
        return pod.status.phase if pod.status.phase in ("Succeeded", "Failed") else None

    assert wait_for("the sidecar to stop", finished) == "Succeeded"


def test_kubectl_exec_forwards_stdin_until_eof(kubectl, sleeper: client.V1Pod) -> None:
    payload = base64.b64encode(os.urandom(300_000)) + b"\nlast line\n"
    result = kubectl("exec", "-i", "sleeper", "-c", "main", "--", "cat", stdin=payload)
    assert result.returncode == 0, result.stderr
    assert hashlib.sha256(result.stdout).hexdigest() == hashlib.sha256(payload).hexdigest()


@NEEDS_ROOT
def test_kubectl_cp_into_and_out_of_a_container_volume(
    kubectl, sleeper: client.V1Pod, tmp_path: Path
) -> None:
    """`kubectl cp` is tar over exec; the file lands in the volume as the container sees it."""
    data = Path(sleeper.spec.containers[0].working_dir) / "data"
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(200_000))
    pushed = kubectl("cp", str(source), f"sleeper:{data}/weights.bin", "-c", "main")
    assert pushed.returncode == 0, pushed.stderr
    assert not (data / "weights.bin").exists()  # only inside the container's mount namespace
    listed = kubectl("exec", "sleeper", "-c", "main", "--", "wc", "-c", "data/weights.bin")
    assert listed.stdout.split()[0] == b"200000"
    back = tmp_path / "back.bin"
    pulled = kubectl("cp", f"sleeper:{data}/weights.bin", str(back), "-c", "main")
    assert pulled.returncode == 0, pulled.stderr
    assert back.read_bytes() == source.read_bytes()


def test_kubectl_exec_errors(kubectl, sleeper: client.V1Pod) -> None:
    unknown = kubectl("exec", "sleeper", "-c", "nope", "--", "true")
    assert unknown.returncode == 1
    assert "container nope is not valid for pod sleeper" in unknown.stderr.decode()
    missing = kubectl("exec", "sleeper", "-c", "main", "--", "no-such-command")
    assert missing.returncode == 1
    assert 'exec: "no-such-command": executable file not found in $PATH' in missing.stderr.decode()
    no_pod = kubectl("exec", "ghost", "--", "true")
    assert no_pod.returncode == 1
    assert 'pods "ghost" not found' in no_pod.stderr.decode()


def test_exec_refuses_a_pid_whose_start_time_differs(
    kubectl, cluster: LocalCluster, core: client.CoreV1Api, ns: str, sleeper: client.V1Pod
) -> None:
    """The pid file names the container by (pid, start time): a live pid that started at another time is a
    reused pid, not the container, so exec must not enter it."""
    pod = core.read_namespaced_pod("sleeper", ns).to_dict()
    pid_file = PodDir.of(cluster.state_dir, pod).container("main").attempt(0).pid
    recorded = pid_file.read_text()
    ids = json.loads(recorded)
    try:
        pid_file.write_text(json.dumps({**ids, "containerStart": ids["containerStart"] + 1}))
        refused = kubectl("exec", "sleeper", "-c", "main", "--", "true")
        assert refused.returncode == 1
        assert 'container not found ("main")' in refused.stderr.decode()
    finally:
        pid_file.write_text(recorded)
    assert kubectl("exec", "sleeper", "-c", "main", "--", "true").returncode == 0


# -- the Python client (what Airflow's KubernetesPodOperator uses for xcom) ----------------------------


def test_python_client_stream(core: client.CoreV1Api, ns: str, sleeper: client.V1Pod) -> None:
    out = stream(
        core.connect_get_namespaced_pod_exec,
        "sleeper",
        ns,
        container="main",
        command=["sh", "-c", "echo to-out; echo to-err >&2"],
        stdout=True,
        stderr=True,
        stdin=False,
        tty=False,
    )
    assert out == "to-out\nto-err\n"
    ws = stream(
        core.connect_get_namespaced_pod_exec,
        "sleeper",
        ns,
        container="side",
        command=["sh", "-c", "read line; echo got $line; echo bad >&2; exit 5"],
        stdout=True,
        stderr=True,
        stdin=True,
        tty=False,
        _preload_content=False,
    )
    ws.write_stdin("ping\n")
    ws.run_forever(timeout=20)
    assert ws.read_stdout() == "got ping\n"
    assert ws.read_stderr() == "bad\n"
    assert ws.returncode == 5


async def test_kubernetes_asyncio_ws_client(cluster: LocalCluster, ns: str, sleeper: client.V1Pod) -> None:
    from kubernetes_asyncio import client as async_client
    from kubernetes_asyncio.stream import WsApiClient

    plain = cluster.async_api_client()
    ws = WsApiClient(configuration=plain.configuration)
    try:
        out = await async_client.CoreV1Api(api_client=ws).connect_get_namespaced_pod_exec(
            "sleeper", ns, container="main", command=["sh", "-c", "echo $GREETING"], stdout=True, stderr=True
        )
    finally:
        await ws.close()
        await plain.close()
    assert out == "hello from the pod\n"


def test_disconnecting_client_ends_the_command(
    core: client.CoreV1Api, ns: str, sleeper: client.V1Pod
) -> None:
    token = uuid.uuid4().hex
    ws = stream(
        core.connect_get_namespaced_pod_exec,
        "sleeper",
        ns,
        container="side",
        command=["sh", "-c", f"echo started; exec python -c 'import time; time.sleep(300)' {token}"],
        stdout=True,
        stderr=True,
        _preload_content=False,
    )
    assert ws.readline_stdout(timeout=20) == "started"

    def sleeping() -> list[str]:
        return [p for p in os.listdir("/proc") if p.isdigit() and token.encode() in _cmdline(p)]

    assert sleeping()
    ws.close()
    wait_for("the exec'd command to end", none_left(sleeping), timeout=10)


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


# -- the channel protocols, on the wire -----------------------------------------------------------------


async def ws_exec(
    cluster: LocalCluster, path: str, protocols: list[str], send: list[bytes | str] = ()
) -> tuple[str | None, list[tuple[int, bytes]]]:
    """Open an exec WebSocket, send messages, collect (channel, data) until the server closes."""
    url = f"wss://127.0.0.1:{cluster.port}{path}"
    headers = {"Authorization": f"Bearer {cluster.token}"}
    received: list[tuple[int, bytes]] = []
    timeout = aiohttp.ClientTimeout(total=30)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.ws_connect(
            url, protocols=protocols, ssl=cluster.state.client_context(), headers=headers
        ) as ws,
    ):
        for message in send:
            await (ws.send_str(message) if isinstance(message, str) else ws.send_bytes(message))
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.BINARY:
                received.append((msg.data[0], msg.data[1:]))
            elif msg.type == aiohttp.WSMsgType.TEXT:
                received.append((int(msg.data[0]), base64.b64decode(msg.data[1:])))
        return ws.protocol, received


def joined(received: list[tuple[int, bytes]], channel: int) -> bytes:
    return b"".join(data for ch, data in received if ch == channel)


def exec_path(ns: str, query: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods/sleeper/exec?container=main&{query}"


async def test_v4_status_json_and_announcement(cluster: LocalCluster, ns: str, sleeper: client.V1Pod) -> None:
    query = "command=sh&command=-c&command=echo+hi%3B+exit+4&stdout=true&stderr=true"
    protocol, received = await ws_exec(cluster, exec_path(ns, query), ["v4.channel.k8s.io"])
    assert protocol == "v4.channel.k8s.io"
    assert received[0] == (1, b"")  # an empty message on stdout says the streams are set up
    assert joined(received, 1) == b"hi\n"
    status = json.loads(joined(received, 3))
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "4"}]
    _, ok = await ws_exec(cluster, exec_path(ns, "command=true&stdout=true"), ["v4.channel.k8s.io"])
    assert json.loads(joined(ok, 3)) == {"metadata": {}, "status": "Success"}


async def test_v1_and_base64_protocols(cluster: LocalCluster, ns: str, sleeper: client.V1Pod) -> None:
    query = "command=sh&command=-c&command=cat%3B+exit+2&stdin=true&stdout=true"
    # channel.k8s.io (v1): no close signal, so stdin stays open; the command ends by itself instead.
    protocol, received = await ws_exec(
        cluster,
        exec_path(ns, "command=sh&command=-c&command=head+-n1%3B+exit+2&stdin=true&stdout=true"),
        ["channel.k8s.io"],
        [b"\x00one\ntwo\n"],
    )
    assert protocol == "channel.k8s.io"
    assert joined(received, 1) == b"one\n"
    assert b"exit code 2" in joined(received, 3)  # v1-v3: the error channel carries plain text
    protocol, received = await ws_exec(
        cluster,
        exec_path(ns, query.replace("cat", "head+-n1")),
        ["base64.channel.k8s.io"],
        ["0" + base64.b64encode(b"via base64\n").decode()],
    )
    assert protocol == "base64.channel.k8s.io"
    assert joined(received, 1) == b"via base64\n"


async def test_v5_close_signal_ends_stdin(cluster: LocalCluster, ns: str, sleeper: client.V1Pod) -> None:
    query = "command=wc&command=-c&stdin=true&stdout=true"
    protocol, received = await ws_exec(
        cluster,
        exec_path(ns, query),
        ["v5.channel.k8s.io", "v4.channel.k8s.io"],
        [b"\x00abcdef", b"\xff\x00"],
    )
    assert protocol == "v5.channel.k8s.io"
    assert joined(received, 1).strip() == b"6"
    assert json.loads(joined(received, 3))["status"] == "Success"


async def test_tty_gets_a_terminal_and_resizes(cluster: LocalCluster, ns: str, sleeper: client.V1Pod) -> None:
    query = "command=sh&stdin=true&stdout=true&stderr=true&tty=true"
    _, received = await ws_exec(
        cluster,
        exec_path(ns, query),
        ["v5.channel.k8s.io"],
        [b'\x04{"Width":123,"Height":45}', b"\x00stty size; tty; echo $TERM; echo err >&2; exit 6\n"],
    )
    out = joined(received, 1).decode()
    assert "45 123\r\n" in out
    assert "/dev/pts/" in out
    assert "xterm\r\n" in out
    assert "err\r\n" in out  # a terminal has one output stream
    assert joined(received, 2) == b""
    assert json.loads(joined(received, 3))["details"]["causes"][0]["message"] == "6"


# -- errors before the upgrade ---------------------------------------------------------------------------


def test_request_errors(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str, sleeper: client.V1Pod
) -> None:
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"}
    upgrade["Sec-WebSocket-Key"] = base64.b64encode(os.urandom(16)).decode()
    status, _, body = cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/pods/ghost/exec?command=true&stdout=true", headers=upgrade
    )
    assert (status, body["message"]) == (404, 'pods "ghost" not found')
    pod_path = f"/api/v1/namespaces/{ns}/pods/sleeper/exec"
    status, _, body = cluster.request("POST", f"{pod_path}?command=true&stdout=true", headers=upgrade)
    assert (status, body["message"]) == (
        400,
        "a container name must be specified for pod sleeper, choose one of: [main side]",
    )
    status, _, body = cluster.request("POST", f"{pod_path}?container=main&stdout=true", headers=upgrade)
    assert (status, body["message"]) == (400, "you must specify at least one command for the container")
    status, _, body = cluster.request("POST", f"{pod_path}?container=main&command=true", headers=upgrade)
    assert (status, body["message"]) == (400, "you must specify at least 1 of stdin, stdout, stderr")
    spdy = {**upgrade, "Upgrade": "SPDY/3.1"}
    status, _, body = cluster.request(
        "POST", f"{pod_path}?container=main&command=true&stdout=1", headers=spdy
    )
    assert status == 400 and "WebSocket only" in body["message"]
    status, _, body = cluster.request(
        "GET",
        f"{pod_path}?container=main&command=true&stdout=1",
        headers={**upgrade, "Sec-WebSocket-Protocol": "v9.channel.k8s.io"},
    )
    assert status == 400 and "not supported" in body["message"]

    create_pod(
        core, ns, "unbound", [{"name": "u", "image": "x", "command": ["true"]}], schedulerName="nobody"
    )
    status, _, body = cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/pods/unbound/exec?command=true&stdout=1", headers=upgrade
    )
    assert (status, body["message"]) == (400, "pod unbound does not have a host assigned")

    create_pod(core, ns, "quick", [{"name": "q", "image": "busybox", "command": ["true"]}])
    wait_for("pod quick to finish", lambda: core.read_namespaced_pod("quick", ns).status.phase == "Succeeded")
    status, _, body = cluster.request(
        "POST", f"/api/v1/namespaces/{ns}/pods/quick/exec?command=true&stdout=1", headers=upgrade
    )
    assert (status, body["reason"], body["message"]) == (500, "InternalError", 'container not found ("q")')


# -- debug mode: what exec is for -----------------------------------------------------------------------


def test_exec_into_a_debug_mode_genericjob_replica(cluster: LocalCluster, kubectl, ns: str) -> None:
    custom = client.CustomObjectsApi(cluster.api_client())
    trainer = make_container("trainer", py="exit(1)", image="t9k/trainer")
    worker = {"type": "worker", "replicas": 1, "template": make_template(trainer)}
    job = make_job("GenericJob", "dbg", {"runMode": {"debug": {"enabled": True}}, "replicaSpecs": [worker]})
    custom.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", job)

    def running() -> bool:
        result = kubectl("get", "pod", "dbg-worker-0", "-o", "jsonpath={.status.containerStatuses[0].state}")
        return b"running" in result.stdout

    wait_for("the debug replica to run", running, timeout=60)
    result = kubectl("exec", "dbg-worker-0", "--", "sh", "-c", "echo $HOSTNAME")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"dbg-worker-0\n"
    # The training command was replaced by a sleeping one: the user starts it by hand.
    started = kubectl("exec", "dbg-worker-0", "--", "python", "-c", "print('training by hand'); exit(1)")
    assert (started.returncode, started.stdout) == (1, b"training by hand\n")
    phase = custom.get_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", "dbg")
    assert (phase.get("status") or {}).get("phase") == "Running"


# -- attach ---------------------------------------------------------------------------------------------


def test_kubectl_attach_streams_new_output_until_the_container_exits(
    core: client.CoreV1Api, ns: str, kubectl
) -> None:
    ticks = "echo before; sleep 1; for i in $(seq 1 20); do echo tick $i; echo warn $i >&2; sleep 0.3; done"
    ticks += "; exit 4"
    running_pod(core, ns, "ticker", [{"name": "t", "image": "busybox", "command": ["sh", "-c", ticks]}])
    result = kubectl("attach", "ticker", timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert "before" not in lines  # only what is written after attaching
    first = int(lines[0].split()[1])
    assert lines == [f"tick {i}" for i in range(first, 21)]
    assert "warn 20" in result.stderr.decode()


async def test_attach_over_v4_ends_with_success(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str, tmp_path: Path
) -> None:
    script = "while [ ! -e go ]; do sleep 0.05; done; echo out; echo err >&2; exit 9"
    running_pod(
        core,
        ns,
        "waiter",
        [{"name": "w", "image": "busybox", "command": ["sh", "-c", script], "workingDir": str(tmp_path)}],
    )
    url = f"wss://127.0.0.1:{cluster.port}/api/v1/namespaces/{ns}/pods/waiter/attach?stdout=1&stderr=1"
    received: list[tuple[int, bytes]] = []
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
        session.ws_connect(
            url,
            protocols=["v4.channel.k8s.io"],
            ssl=cluster.state.client_context(),
            headers={"Authorization": f"Bearer {cluster.token}"},
        ) as ws,
    ):
        async for msg in ws:
            received.append((msg.data[0], msg.data[1:]))
            if len(received) == 1:
                (tmp_path / "go").touch()  # attached: now let the container write
    assert received[0] == (1, b"")
    assert joined(received, 1) == b"out\n"
    assert joined(received, 2) == b"err\n"
    assert json.loads(joined(received, 3)) == {"metadata": {}, "status": "Success"}
