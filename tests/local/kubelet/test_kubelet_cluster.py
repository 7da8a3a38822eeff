"""Node agents end to end: a real `t9k-local run` server, pods run as processes, driven by `kubernetes`."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from t9k_provider.local.kubelet import cgroups, network, poddir
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.kubelet.shim import ShimSpec
from t9k_provider.local.machinery.nodes import FIRST_NODE
from t9k_provider.testing import LocalCluster, none_left, require_limits, wait_for
from tests.support.builders import PY, make_container, make_pod
from tests.support.clusters import cluster_fixture
from tests.support.gates import py_gate
from tests.support.pods import phase_is, pod_log, pod_names, terminated, waiting_state

pytestmark = pytest.mark.cluster


#: A second restart backs off 2 s, so that BackOff is observable.
cluster = cluster_fixture(env={"T9K_LOCAL_RESTART_BACKOFF": "2"})


@pytest.fixture
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


def gone(core: client.CoreV1Api, name: str, ns: str) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            core.read_namespaced_pod(name, ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    return probe


_ns_counter = iter(range(1000))


@pytest.fixture
def ns(core: client.CoreV1Api) -> str:
    name = f"t{os.getpid()}-{next(_ns_counter)}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def test_two_containers_exit_codes_phases_and_logs(core: client.CoreV1Api, ns: str, tmp_path: Path) -> None:
    go = tmp_path / "go"  # "bad" runs until the test saw the pod Running
    pod = make_pod(
        "two",
        make_container("ok", py="import time; print('out a', flush=True); time.sleep(1); print('bye a')"),
        make_container(
            "bad",
            py="import sys; print('to stderr', file=sys.stderr, flush=True)\n"
            f"{py_gate(go)}print('last line'); sys.exit(3)",
        ),
    )
    core.create_namespaced_pod(ns, pod)
    running = wait_for("Running", phase_is(core, "two", ns, "Running"))
    go.touch()
    conds = {cd.type: cd.status for cd in running.status.conditions}
    assert conds["PodScheduled"] == "True" and conds["Initialized"] == "True"
    assert running.spec.node_name == "t9k-local-node"
    assert running.status.pod_ip and running.status.host_ip and running.status.start_time
    # follow the failing container: the stream must end by itself once the process exits
    started = time.monotonic()
    stream = core.read_namespaced_pod_log("two", ns, container="bad", follow=True, _preload_content=False)
    text = b"".join(stream.stream()).decode()
    assert time.monotonic() - started < 15
    assert text.splitlines() == ["to stderr", "last line"]
    done = wait_for("Failed", phase_is(core, "two", ns, "Failed"))
    by_name = {s.name: s for s in done.status.container_statuses}
    ok, bad = by_name["ok"].state.terminated, by_name["bad"].state.terminated
    assert (ok.exit_code, ok.reason) == (0, "Completed")
    assert (bad.exit_code, bad.reason) == (3, "Error")
    assert bad.started_at and bad.finished_at and bad.container_id
    assert by_name["bad"].image == "python:3.11" and by_name["bad"].restart_count == 0
    assert pod_log(core, "two", ns, container="ok") == "out a\nbye a\n"
    stamped = pod_log(core, "two", ns, container="ok", timestamps=True, tail_lines=1)
    assert stamped.endswith(" bye a\n") and stamped[:4].isdigit()
    reasons = {e.reason for e in core.list_namespaced_event(ns).items}
    assert {"Scheduled", "Pulled", "Created", "Started"} <= reasons


def test_init_containers_run_in_order_with_env_and_volumes(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "cfg"}, "data": {"greeting": "hello", "f.txt": "F"}}
    )
    core.create_namespaced_secret(ns, {"metadata": {"name": "sec"}, "stringData": {"token": "s3cret"}})
    shared = [{"name": "work", "mountPath": "/scratch"}]
    append = "import os; open('/scratch/order','a').write(os.environ['STEP'])"
    main_script = (
        "import os; print(open('/scratch/order').read()); print(os.environ['MSG']); "
        "print(os.environ['TOKEN']); "
        "print(os.environ['POD']); print(open('/etc/cfg/f.txt').read()); print(os.getcwd()); "
        "print(os.environ['HOSTNAME'])"
    )
    pod = make_pod(
        "init",
        make_container(
            "main",
            py=main_script,
            workingDir="/scratch/sub",
            env=[
                {"name": "G", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
                {"name": "MSG", "value": "$(G) world"},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "token"}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
            volumeMounts=[*shared, {"name": "cfg", "mountPath": "/etc/cfg"}],
        ),
        initContainers=[
            make_container(
                "first",
                py="import time; time.sleep(0.5); " + append,
                env=[{"name": "STEP", "value": "1"}],
                volumeMounts=shared,
            ),
            make_container("second", py=append, env=[{"name": "STEP", "value": "2"}], volumeMounts=shared),
        ],
        volumes=[{"name": "work", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}],
    )
    core.create_namespaced_pod(ns, pod)
    done = wait_for("Succeeded", phase_is(core, "init", ns, "Succeeded", "Failed"))
    assert done.status.phase == "Succeeded", done.status
    inits = done.status.init_container_statuses
    assert [s.name for s in inits] == ["first", "second"]
    assert all(s.state.terminated.exit_code == 0 for s in inits)
    assert inits[0].state.terminated.finished_at <= inits[1].state.terminated.started_at
    lines = pod_log(core, "init", ns, container="main").splitlines()
    assert lines == ["12", "hello world", "s3cret", "init", "F", "/scratch/sub", "init"]


def test_on_failure_restarts_with_last_state(core: client.CoreV1Api, ns: str) -> None:
    script = (
        "import os, sys; p='/data/runs'; n=len(open(p).read()) if os.path.exists(p) else 0; "
        "open(p,'a').write('x'); print('run', n); sys.exit(0 if n >= 2 else 5)"
    )
    pod = make_pod(
        "flaky",
        make_container("main", py=script, volumeMounts=[{"name": "d", "mountPath": "/data"}]),
        restartPolicy="OnFailure",
        volumes=[{"name": "d", "emptyDir": {}}],
    )
    core.create_namespaced_pod(ns, pod)
    done = wait_for("Succeeded", phase_is(core, "flaky", ns, "Succeeded", "Failed"), timeout=40)
    assert done.status.phase == "Succeeded"
    st = done.status.container_statuses[0]
    assert st.restart_count == 2
    assert st.last_state.terminated.exit_code == 5
    assert st.state.terminated.exit_code == 0
    assert pod_log(core, "flaky", ns, container="main") == "run 2\n"
    assert pod_log(core, "flaky", ns, container="main", previous=True) == "run 1\n"
    assert "BackOff" in {e.reason for e in core.list_namespaced_event(ns).items}


def test_graceful_delete_sigterm_then_sigkill(core: client.CoreV1Api, ns: str, cluster: LocalCluster) -> None:
    polite = (
        "import signal, sys, time, pathlib\n"
        "def bye(*a):\n"
        "    pathlib.Path('/out/polite').write_text('terminated'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
        "time.sleep(60)"
    )
    out_dir = cluster.state_dir / "graceful-out"
    out_dir.mkdir()
    vol = [{"name": "out", "mountPath": "/out"}]
    pod = make_pod(
        "slow",
        make_container("polite", py=polite, volumeMounts=vol),
        make_container("stubborn", py=stubborn),
        terminationGracePeriodSeconds=3,
        volumes=[{"name": "out", "hostPath": {"path": str(out_dir)}}],
    )
    core.create_namespaced_pod(ns, pod)
    wait_for("Running", phase_is(core, "slow", ns, "Running"))
    for name in ("polite", "stubborn"):  # both have their SIGTERM handling in place
        wait_for(f"{name} ready", lambda n=name: pod_log(core, "slow", ns, container=n) == "ready\n")
    started = time.monotonic()
    core.delete_namespaced_pod("slow", ns)
    wait_for("pod removed", gone(core, "slow", ns), timeout=20)
    elapsed = time.monotonic() - started
    assert 2.5 <= elapsed < 10, elapsed  # the stubborn container held on until the grace deadline
    assert (out_dir / "polite").read_text() == "terminated"
    assert "Killing" in {e.reason for e in core.list_namespaced_event(ns).items}
    pod_dirs = list((cluster.state_dir / "pods").glob(f"{ns}_slow_*"))
    wait_for("pod dir removed", none_left(lambda: [d for d in pod_dirs if d.exists()]), timeout=5)


@pytest.mark.parametrize(
    "container",
    [{"name": "main", "image": "busybox"}, {"name": "main", "image": "busybox", "args": ["echo"]}],
)
def test_missing_command_is_create_container_error(core: client.CoreV1Api, ns: str, container: dict) -> None:
    core.create_namespaced_pod(ns, make_pod("nocmd", container))

    def create_error() -> Any:
        waiting = waiting_state(core, "nocmd", ns)
        return waiting if waiting and waiting.reason == "CreateContainerError" else None

    assert "no command specified" in wait_for("CreateContainerError", create_error).message
    assert core.read_namespaced_pod("nocmd", ns).status.phase == "Pending"
    assert "Failed" in {e.reason for e in core.list_namespaced_event(ns).items}


def test_unknown_executable_is_a_start_error(core: client.CoreV1Api, ns: str) -> None:
    container = {"name": "main", "image": "x", "command": ["no-such-binary-t9k", "--flag"]}
    core.create_namespaced_pod(ns, make_pod("noexec", container))
    done = wait_for("Failed", phase_is(core, "noexec", ns, "Failed", "Succeeded"))
    term = done.status.container_statuses[0].state.terminated
    assert (done.status.phase, term.exit_code, term.reason) == ("Failed", 128, "StartError")
    assert '"no-such-binary-t9k": executable file not found in $PATH' in term.message
    failed = [e for e in core.list_namespaced_event(ns).items if e.reason == "Failed"]
    assert len(failed) == 1 and failed[0].type == "Warning" and "no-such-binary-t9k" in failed[0].message


def test_missing_configmap_is_create_container_config_error(core: client.CoreV1Api, ns: str) -> None:
    env = [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "k"}}}]
    core.create_namespaced_pod(
        ns, make_pod("cfgerr", make_container("main", py="import os; print(os.environ['X'])", env=env))
    )

    def config_error() -> bool:
        waiting = waiting_state(core, "cfgerr", ns)
        return bool(waiting and waiting.reason == "CreateContainerConfigError")

    wait_for("CreateContainerConfigError", config_error)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "later"}, "data": {"k": "now"}})
    wait_for("Succeeded", phase_is(core, "cfgerr", ns, "Succeeded"), timeout=20)
    assert pod_log(core, "cfgerr", ns) == "now\n"


def test_missing_volume_source_waits_in_container_creating(core: client.CoreV1Api, ns: str) -> None:
    """As the real kubelet: FailedMount, the container waits (not a config error), the mount is retried."""
    pod = make_pod(
        "mnt",
        make_container(
            "main", py="print(open('/cfg/k').read())", volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}]
        ),
        volumes=[{"name": "cfg", "configMap": {"name": "later"}}],
    )
    core.create_namespaced_pod(ns, pod)
    text = 'MountVolume.SetUp failed for volume "cfg" : configmap "later" not found'

    def failed_mount() -> Any:
        events = core.list_namespaced_event(ns).items
        return [e for e in events if e.reason == "FailedMount" and '"cfg"' in e.message]

    events = wait_for("FailedMount", failed_mount)
    assert [(e.type, e.message) for e in events] == [("Warning", text)]

    def waiting() -> list[str]:
        """The containers' waiting reasons once the status holds them (the event may come first: the volumes
        are prepared while the pod's network is set up, and the status is written after both)."""
        sts = core.read_namespaced_pod("mnt", ns).status.container_statuses or []
        return [s.state.waiting.reason for s in sts if s.state.waiting]

    assert wait_for("the container's waiting reason", waiting) == ["ContainerCreating"]
    core.create_namespaced_config_map(ns, {"metadata": {"name": "later"}, "data": {"k": "mounted"}})
    wait_for("Succeeded", phase_is(core, "mnt", ns, "Succeeded"), timeout=20)
    assert pod_log(core, "mnt", ns) == "mounted\n"


def test_active_deadline_fails_the_pod(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(
        ns,
        make_pod("late", make_container("main", py="import time; time.sleep(60)"), activeDeadlineSeconds=2),
    )
    failed = wait_for("Failed", phase_is(core, "late", ns, "Failed"), timeout=20)
    assert failed.status.reason == "DeadlineExceeded"
    wait_for("terminated", lambda: terminated(core, "late", ns))


def test_a_deadline_that_passes_before_the_containers_run_reports_them_terminated(
    core: client.CoreV1Api, ns: str
) -> None:
    """The init container outlives the deadline, so the main container never runs: the failed pod reports
    it terminated (ContainerStatusUnknown, 137), as the kubelet's TerminatePod does, not waiting for good."""
    init = make_container("init", py="import time; time.sleep(60)")
    core.create_namespaced_pod(
        ns,
        make_pod(
            "never-ran", make_container("main", py="pass"), initContainers=[init], activeDeadlineSeconds=2
        ),
    )
    failed = wait_for("Failed", phase_is(core, "never-ran", ns, "Failed"), timeout=30)
    assert failed.status.reason == "DeadlineExceeded"

    wait_for("the main container terminated", lambda: terminated(core, "never-ran", ns))
    status = core.read_namespaced_pod("never-ran", ns).status
    main, (init,) = status.container_statuses[0], status.init_container_statuses
    assert (main.state.terminated.reason, main.state.terminated.exit_code) == ("ContainerStatusUnknown", 137)
    if init.container_id:  # it ran (a slow host may reach the deadline first): SIGKILLed at the deadline
        assert init.state.terminated.exit_code == 137
    else:
        assert init.state.waiting is not None


SERVER = (
    "import os, socket\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind((os.environ.get('BIND', '0.0.0.0'), 8080)); s.listen()\n"
    "print('listening', flush=True)\n"
    "while True:\n"
    "    conn, _ = s.accept(); conn.sendall(os.environ['HOSTNAME'].encode()); conn.close()\n"
)
CLIENT = (
    "import socket, sys, time\n"
    "for target in sys.argv[1:]:\n"
    "    for _ in range(100):\n"
    "        try:\n"
    "            conn = socket.create_connection((target, 8080), timeout=2); break\n"
    "        except OSError:\n"
    "            time.sleep(0.1)\n"
    "    print(target, conn.recv(100).decode(), flush=True)\n"
)


def _service(name: str, selector: dict[str, str]) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [{"port": 8080}],
        },
    }


def _same_port_scenario(core: client.CoreV1Api, ns: str, bind_pod_ip: bool) -> dict[str, Any]:
    env = [{"name": "BIND", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}] if bind_pod_ip else []
    for i in range(2):
        core.create_namespaced_service(ns, _service(f"srv-{i}", {"replica": str(i)}))
        core.create_namespaced_pod(
            ns,
            make_pod(f"srv-{i}", make_container("main", py=SERVER, env=env), labels={"replica": str(i)}),
        )
    for i in range(2):
        wait_for("listening", lambda i=i: pod_log(core, f"srv-{i}", ns) == "listening\n")
    core.create_namespaced_pod(
        ns,
        make_pod(
            "cli",
            {
                "name": "main",
                "image": "x",
                "command": [PY, "-c", CLIENT, "srv-0", f"srv-1.{ns}.svc.cluster.local"],
            },
        ),
    )
    done = wait_for("client done", phase_is(core, "cli", ns, "Succeeded", "Failed"), timeout=40)
    out = pod_log(core, "cli", ns)
    assert done.status.phase == "Succeeded", out
    assert out.splitlines() == ["srv-0 srv-0", f"srv-1.{ns}.svc.cluster.local srv-1"]
    return {i: core.read_namespaced_pod(f"srv-{i}", ns).status.pod_ip for i in range(2)}


@pytest.mark.skipif(os.geteuid() != 0, reason="pod network namespaces need root")
def test_same_port_replicas_reach_each_other_by_service_name(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    ips = _same_port_scenario(core, ns, bind_pod_ip=False)
    subnet = cluster.subnet.network  # the cluster's own pod subnet, on its own bridge
    assert all(ipaddress.ip_address(ip) in subnet for ip in ips.values()) and ips[0] != ips[1]


def test_host_network_fallback_uses_loopback_pod_ips(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    cluster = cluster_factory(network="host")
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespace({"metadata": {"name": "hostnet"}})
    ips = _same_port_scenario(core, "hostnet", bind_pod_ip=True)
    assert all(ip.startswith("127.1.") for ip in ips.values()) and ips[0] != ips[1]
    assert "pod network: host (requested)" in cluster.log_tail(200)


def test_kubelet_restart_readopts_running_pod_and_stop_ends_containers(
    cluster_factory: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = cluster_factory()
    core = client.CoreV1Api(cluster.api_client())
    go = tmp_path / "go"  # the container runs on until the restarted kubelet is up
    script = f"import sys; print('start', flush=True)\n{py_gate(go)}print('end'); sys.exit(4)"
    core.create_namespaced_pod("default", make_pod("survivor", make_container("main", py=script)))
    wait_for("running", lambda: pod_log(core, "survivor", "default") == "start\n")
    cluster.kill()  # SIGKILL: agents die, the shim and its process carry on
    time.sleep(0.5)
    cluster.start()
    go.touch()
    core = client.CoreV1Api(cluster.api_client())
    done = wait_for("Failed", phase_is(core, "survivor", "default", "Failed", "Succeeded"), timeout=30)
    st = done.status.container_statuses[0]
    assert st.state.terminated.exit_code == 4 and st.restart_count == 0
    assert pod_log(core, "survivor", "default") == "start\nend\n"
    pod_dir = next((cluster.state_dir / "pods").glob("default_survivor_*"))
    assert sorted(p.name for p in (pod_dir / "main").glob("[0-9]*.log")) == ["0.log"]  # never started twice

    # A clean stop (SIGTERM), unlike a crash, stops the containers and removes the pod networks.
    core.create_namespaced_pod(
        "default", make_pod("sleeper", make_container("main", py="import time; time.sleep(120)"))
    )
    pod = wait_for("running", phase_is(core, "sleeper", "default", "Running"))
    pid_file = next((cluster.state_dir / "pods").glob("default_sleeper_*/main/0.pid"))
    pid = json.loads(pid_file.read_text())["container"]
    netns = list(Path("/run/netns").glob(f"t9k-*-{pod.metadata.uid[:8]}"))
    assert netns or os.geteuid() != 0
    assert cluster.stop() == []  # the kubelet tore the networks down itself: nothing was left to the harness
    wait_for("container process gone", lambda: not Path(f"/proc/{pid}").exists(), timeout=10)
    assert not any(p.exists() for p in netns)


def test_an_attempt_its_dead_kubelet_never_started_is_started_by_the_next(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    """A kubelet SIGKILLed between writing an attempt's spec and its shim's go leaves the spec alone: the
    container was only created, so the next kubelet starts it even under restartPolicy Never, as upstream
    restarts a container in the created state (before, the pod failed: ContainerStatusUnknown, 137)."""
    cluster = cluster_factory()
    core = client.CoreV1Api(cluster.api_client())
    cluster.stop_node(FIRST_NODE)
    pod = make_pod("created", make_container("main", py="print('ran')"), nodeName=FIRST_NODE)
    uid = core.create_namespaced_pod("default", pod).metadata.uid
    attempt = PodDir(cluster.state_dir / "pods" / f"default_created_{uid}").container("main").attempt(0)
    attempt.directory.mkdir(parents=True)
    # what the dead kubelet wrote; had it been run rather than started afresh, the log would say so
    ShimSpec(argv=[PY, "-c", "print('stale')"], env={}, log_path=str(attempt.log)).dump(attempt.spec)
    cluster.start_node(FIRST_NODE)
    done = wait_for("Succeeded", phase_is(core, "created", "default", "Failed", "Succeeded"), timeout=30)
    main = done.status.container_statuses[0]
    assert done.status.phase == "Succeeded" and main.state.terminated.reason == "Completed"
    assert main.restart_count == 0
    assert pod_log(core, "created", "default") == "ran\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="pod network namespaces need root")
def test_clusters_side_by_side_get_bridges_and_subnets_of_their_own(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    """What lets test workers run clusters at once: each on its own bridge and address range, so that a pod
    of one cannot reach a pod of the other, and each bridge goes with its cluster."""
    clusters = [cluster_factory(flink_operator=False) for _ in range(2)]
    assert clusters[0].subnet != clusters[1].subnet
    cores = [client.CoreV1Api(cluster.api_client()) for cluster in clusters]
    server = make_pod("srv", make_container("main", py=SERVER))
    cores[0].create_namespaced_pod("default", server)
    wait_for("listening", lambda: pod_log(cores[0], "srv", "default") == "listening\n")
    target = cores[0].read_namespaced_pod("srv", "default").status.pod_ip
    assert ipaddress.ip_address(target) in clusters[0].subnet.network
    probe = (
        "import socket, sys\n"
        "try:\n    socket.create_connection((sys.argv[1], 8080), timeout=2)\n"
        "except OSError as exc:\n    print('unreachable', type(exc).__name__)\nelse:\n    print('reached')\n"
    )
    cores[1].create_namespaced_pod(
        "default", make_pod("probe", make_container("main", py=probe, args=[target]))
    )
    wait_for("probe done", phase_is(cores[1], "probe", "default", "Succeeded"), timeout=40)
    assert pod_log(cores[1], "probe", "default").startswith("unreachable")
    for cluster in clusters:
        assert Path(f"/sys/class/net/{cluster.subnet.bridge}").exists()
    bridge = clusters[0].subnet.bridge
    clusters[0].stop()
    assert not Path(f"/sys/class/net/{bridge}").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="pod network namespaces need root")
def test_a_killed_cluster_that_is_not_restarted_leaves_no_pod_network_after_stop(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    """A crash leaves the pod networks to the next kubelet of the state directory; ``stop()`` removes them
    for a cluster that will not start again, so they hold no pod address for good."""
    cluster = cluster_factory()
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_pod(
        "default", make_pod("left", make_container("main", py="import time; time.sleep(120)"))
    )
    pod = wait_for("running", phase_is(core, "left", "default", "Running"))
    (netns,) = Path("/run/netns").glob(f"t9k-*-{pod.metadata.uid[:8]}")
    leases = network.run_dir() / "ipam"
    assert (leases / pod.status.pod_ip).read_text() == netns.name
    cluster.kill()
    time.sleep(0.5)
    assert netns.exists(), "a crash leaves the pod network to the next kubelet"
    assert cluster.stop() == [netns.name]
    assert not netns.exists()
    assert not (leases / pod.status.pod_ip).exists()


def _job(name: str, script: str, **spec: Any) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [make_container("main", py=script)]}
            },
            **spec,
        },
    }


def _job_condition(batch: client.BatchV1Api, name: str, ns: str) -> Callable[[], Any]:
    def probe() -> Any:
        job = batch.read_namespaced_job(name, ns)
        for cond in job.status.conditions or []:
            if cond.type in ("Complete", "Failed") and cond.status == "True":
                return job
        return None

    return probe


def test_batch_job_completions_and_backoff_limit(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    batch = client.BatchV1Api(cluster.api_client())
    batch.create_namespaced_job(ns, _job("ok", "print('work')", completions=3, parallelism=2))
    batch.create_namespaced_job(ns, _job("bad", "import sys; sys.exit(1)", backoffLimit=1))
    ok = wait_for("ok complete", _job_condition(batch, "ok", ns), timeout=40)
    assert [cd.type for cd in ok.status.conditions if cd.status == "True"] == ["Complete"]
    assert ok.status.succeeded == 3 and not ok.status.active
    assert ok.status.start_time and ok.status.completion_time
    pods = core.list_namespaced_pod(ns, label_selector="job-name=ok").items
    assert len(pods) == 3 and all(p.metadata.name.startswith("ok-") for p in pods)
    assert all(p.metadata.owner_references[0].uid == ok.metadata.uid for p in pods)
    bad = wait_for("bad failed", _job_condition(batch, "bad", ns), timeout=40)
    failed = next(cd for cd in bad.status.conditions if cd.type == "Failed")
    assert failed.reason == "BackoffLimitExceeded"
    assert bad.status.failed == 2


def test_batch_job_deadline_deletes_active_pods(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    batch = client.BatchV1Api(cluster.api_client())
    batch.create_namespaced_job(ns, _job("slow", "import time; time.sleep(60)", activeDeadlineSeconds=2))
    job = wait_for("deadline", _job_condition(batch, "slow", ns), timeout=30)
    failed = next(cd for cd in job.status.conditions if cd.type == "Failed")
    assert failed.reason == "DeadlineExceeded"
    wait_for(
        "pods gone",
        lambda: not core.list_namespaced_pod(ns, label_selector="job-name=slow").items,
        timeout=20,
    )


def test_shim_spec_carries_expanded_argv_and_base_env(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    """The shim spec on disk carries argv and the computed env (checked here as the kubelet wrote it)."""
    core.create_namespaced_pod(
        ns,
        make_pod(
            "argv",
            {
                "name": "m",
                "image": "x",
                "command": ["echo"],
                "args": ["$(A)", "$$(A)", "$(NOPE)"],
                "env": [{"name": "A", "value": "a"}],
            },
        ),
    )
    wait_for("Succeeded", phase_is(core, "argv", ns, "Succeeded"))
    assert pod_log(core, "argv", ns) == "a $(A) $(NOPE)\n"
    spec_file = next((cluster.state_dir / "pods").glob(f"{ns}_argv_*/m/0.spec.json"))
    spec = json.loads(spec_file.read_text())
    assert spec["argv"] == ["echo", "a", "$(A)", "$(NOPE)"]
    assert spec["env"]["PATH"].split(":")[0] == os.path.dirname(os.sys.executable)
    assert spec["env"]["HOSTNAME"] == "argv"
    # where pods reach the API server, as default/kubernetes says: 127.0.0.1, or the bridge with netns pods
    api = core.read_namespaced_endpoints("kubernetes", "default").subsets[0].addresses[0].ip
    assert api in ("127.0.0.1", cluster.subnet.gateway)
    assert (spec["env"]["KUBERNETES_SERVICE_HOST"], spec["env"]["KUBERNETES_SERVICE_PORT"]) == (
        api,
        str(cluster.port),
    )


def test_t9k_scheduler_binds_a_podgroup_as_a_gang(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    custom = client.CustomObjectsApi(cluster.api_client())
    custom.create_namespaced_custom_object(
        "scheduler.tensorstack.dev",
        "v1beta1",
        ns,
        "podgroups",
        {
            "apiVersion": "scheduler.tensorstack.dev/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 2},
        },
    )

    def member(name: str) -> dict:
        return make_pod(
            name,
            make_container("main", py="print('hi')"),
            schedulerName="t9k-scheduler",
            labels={"scheduler.tensorstack.dev/group-name": "g"},
        )

    core.create_namespaced_pod(ns, member("m0"))
    time.sleep(1.5)
    assert not core.read_namespaced_pod("m0", ns).spec.node_name  # waits for the rest of its gang
    core.create_namespaced_pod(ns, member("m1"))
    for name in ("m0", "m1"):
        done = wait_for(f"{name} done", phase_is(core, name, ns, "Succeeded"), timeout=20)
        assert done.spec.node_name == "t9k-local-node"


RESOLVER = (
    "import socket, sys, time\n"
    "for name in sys.argv[1:]:\n"
    "    for _ in range(200):\n"
    "        try:\n"
    "            print(name, socket.gethostbyname(name), flush=True); break\n"
    "        except OSError:\n"
    "            time.sleep(0.1)\n"
    "print('nameserver' in open('/etc/resolv.conf').read())\n"
)


def test_hosts_files_follow_pods_and_services_created_later(core: client.CoreV1Api, ns: str) -> None:
    """A running pod sees names of pods/services created after it started (the hosts file is live)."""
    core.create_namespaced_service(ns, _service("sub", {"grp": "x"}))
    argv = [PY, "-c", RESOLVER, "late-0.sub", f"late-svc.{ns}.svc", "early"]
    core.create_namespaced_pod(ns, make_pod("early", {"name": "m", "image": "x", "command": argv}))
    wait_for("early running", phase_is(core, "early", ns, "Running"))
    time.sleep(0.5)
    core.create_namespaced_service(ns, _service("late-svc", {"grp": "x"}))
    late = make_pod(
        "late-0",
        make_container("m", py="import time; time.sleep(30)"),
        hostname="late-0",
        subdomain="sub",
        labels={"grp": "x"},
    )
    core.create_namespaced_pod(ns, late)
    done = wait_for("resolved", phase_is(core, "early", ns, "Succeeded", "Failed"), timeout=30)
    late_ip = core.read_namespaced_pod("late-0", ns).status.pod_ip
    early_ip = done.status.pod_ip
    assert pod_log(core, "early", ns).splitlines() == [
        f"late-0.sub {late_ip}",
        f"late-svc.{ns}.svc {late_ip}",
        f"early {early_ip}",
        "False",  # no nameserver: lookups of unknown names never leave the pod
    ]
    core.delete_namespaced_pod("late-0", ns, grace_period_seconds=0)


REVERSE = (
    "import socket, sys\n"
    "for ip in sys.argv[1:]:\n"
    "    name, _, _ = socket.gethostbyaddr(ip)\n"
    "    print(ip, name, socket.gethostbyname(name), flush=True)\n"
)

GLOO = (
    "import os, socket, sys\n"
    "from datetime import timedelta\n"
    "import torch, torch.distributed as dist\n"
    "rank = int(sys.argv[1])\n"
    "dist.init_process_group('gloo', init_method=f'tcp://{sys.argv[2]}:29500', rank=rank, world_size=2,\n"
    "                        timeout=timedelta(seconds=60))\n"
    "t = torch.tensor([rank + 1.0])\n"
    "dist.all_reduce(t)\n"
    "print('sum', t.item(), flush=True)\n"
    "dist.destroy_process_group()\n"
)


def test_hosts_resolve_pod_ips_back_so_gloo_logs_no_hostname_warning(core: client.CoreV1Api, ns: str) -> None:
    """Reverse lookups of pod IPs answer like cluster DNS (the TCPStore server names each connecting peer)."""
    core.create_namespaced_service(ns, _service("named", {"app": "named"}))
    for name, labels in (("named-0", {"app": "named"}), ("bare", {})):
        sleeper = make_pod(name, make_container("m", py="import time; time.sleep(60)"), labels=labels)
        core.create_namespaced_pod(ns, sleeper)
    ips = {
        n: wait_for(f"{n} ip", lambda n=n: core.read_namespaced_pod(n, ns).status.pod_ip)
        for n in ("named-0", "bare")
    }
    argv = [PY, "-c", REVERSE, ips["named-0"], ips["bare"]]
    core.create_namespaced_pod(ns, make_pod("asker", {"name": "m", "image": "x", "command": argv}))
    rank0 = make_pod("rank-0", {"name": "m", "image": "x", "command": [PY, "-c", GLOO, "0", "rank-0"]})
    core.create_namespaced_pod(ns, rank0)
    master = wait_for("rank-0 ip", lambda: core.read_namespaced_pod("rank-0", ns).status.pod_ip)
    rank1 = make_pod("rank-1", {"name": "m", "image": "x", "command": [PY, "-c", GLOO, "1", master]})
    core.create_namespaced_pod(ns, rank1)

    wait_for("asker done", phase_is(core, "asker", ns, "Succeeded", "Failed"))
    bare_record = f"{ips['bare'].replace('.', '-')}.{ns}.pod.cluster.local"
    assert pod_log(core, "asker", ns).splitlines() == [
        f"{ips['named-0']} named {ips['named-0']}",  # a Service name comes before the pod record
        f"{ips['bare']} {bare_record} {ips['bare']}",
    ]
    for name in ("rank-0", "rank-1"):
        wait_for(f"{name} done", phase_is(core, name, ns, "Succeeded", "Failed"), timeout=90)
    for name in ("rank-0", "rank-1"):
        log = pod_log(core, name, ns)
        assert "sum 3.0" in log and "cannot be retrieved" not in log, log
    for name in ("named-0", "bare"):
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


def test_batch_job_counts_restarts_under_on_failure(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    batch = client.BatchV1Api(cluster.api_client())
    job = _job("crashy", "import sys; sys.exit(2)", backoffLimit=1)
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    batch.create_namespaced_job(ns, job)
    done = wait_for("failed", _job_condition(batch, "crashy", ns), timeout=40)
    failed = next(cd for cd in done.status.conditions if cd.type == "Failed")
    assert failed.reason == "BackoffLimitExceeded"
    wait_for("pod deleted", none_left(lambda: pod_names(core, ns, "job-name=crashy")))
    assert "SuccessfulDelete" in {e.reason for e in core.list_namespaced_event(ns).items}


# -- securityContext identity, projected and downwardAPI volumes


def _container_pid(cluster: LocalCluster, ns: str, pod: str, container: str) -> int:
    pid_file = next((cluster.state_dir / "pods").glob(f"{ns}_{pod}_*/{container}/0.pid"))
    return int(json.loads(pid_file.read_text())["container"])


def _status_ids(pid: int) -> dict[str, list[str]]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.split() for k, v in (line.split(":", 1) for line in lines) if k in ("Uid", "Gid", "Groups")}


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a process's credentials needs root")
def test_run_as_user_group_and_fs_group(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    """The container process has the pod's uid, gid and groups; its emptyDir belongs to the fsGroup; an exec
    probe (the `kubectl exec` path) runs as the same user."""
    script = (
        "import os, time\n"
        "open('/data/out', 'w').write('x')\n"
        "st = os.stat('/data/out')\n"
        "print(os.getuid(), os.getgid(), st.st_uid, st.st_gid, flush=True)\n"
        "time.sleep(60)\n"
    )
    same_user = {"exec": {"command": ["sh", "-c", 'test "$(id -u):$(id -g)" = 1000:3000']}, **FAST}
    pod = make_pod(
        "ids",
        make_container(
            "main", py=script, volumeMounts=[{"name": "d", "mountPath": "/data"}], readinessProbe=same_user
        ),
        securityContext={
            "runAsUser": 1000,
            "runAsGroup": 3000,
            "fsGroup": 2000,
            "supplementalGroups": [4000],
        },
        volumes=[{"name": "d", "emptyDir": {}}],
    )
    core.create_namespaced_pod(ns, pod)
    wait_for("output", lambda: pod_log(core, "ids", ns))
    assert pod_log(core, "ids", ns) == "1000 3000 1000 2000\n"  # the setgid volume gives files its group
    ids = _status_ids(_container_pid(cluster, ns, "ids", "main"))
    assert ids["Uid"] == ["1000"] * 4 and ids["Gid"] == ["3000"] * 4
    assert sorted(ids["Groups"]) == ["2000", "3000", "4000"]
    wait_for("Ready", lambda: _ready_condition(core, "ids", ns) == "True")
    core.delete_namespaced_pod("ids", ns, grace_period_seconds=0)


def test_run_as_non_root_without_a_user_is_refused(core: client.CoreV1Api, ns: str) -> None:
    pod = make_pod(
        "nonroot", make_container("main", py="print('ran')"), securityContext={"runAsNonRoot": True}
    )
    core.create_namespaced_pod(ns, pod)
    if os.geteuid() != 0:  # the local "image" runs as the kubelet's own, non-root user
        wait_for("Succeeded", phase_is(core, "nonroot", ns, "Succeeded"))
        return

    def waiting() -> Any:
        state = waiting_state(core, "nonroot", ns)
        return state if state and state.reason == "CreateContainerConfigError" else None

    uid = core.read_namespaced_pod("nonroot", ns).metadata.uid
    message = (
        f'container has runAsNonRoot and image will run as root (pod: "nonroot_{ns}({uid})", container: main)'
    )
    assert wait_for("CreateContainerConfigError", waiting).message == message
    failed = [e for e in core.list_namespaced_event(ns).items if e.reason == "Failed"]
    assert [e.message for e in failed] == [f"Error: {message}"] and failed[0].type == "Warning"


def test_projected_and_downward_api_volumes(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"k": "cmval"}})
    core.create_namespaced_secret(ns, {"metadata": {"name": "sec"}, "stringData": {"pw": "s3cret"}})
    labels = {"app": "web", "tier": "x"}
    script = (
        "import os\n"
        "for p in ['/p/k', '/p/creds/pw', '/p/name', '/d/labels', '/d/cpu']:\n"
        "    print(p, open(p).read().replace(chr(10), ';'), oct(os.stat(p).st_mode & 0o777), flush=True)\n"
    )
    resources = {"limits": {"cpu": "2"}}
    projected = {
        "defaultMode": 0o440,
        "sources": [
            {"configMap": {"name": "cm"}},
            {"secret": {"name": "sec", "items": [{"key": "pw", "path": "creds/pw"}]}},
            {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        ],
    }
    downward = {
        "items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {
                "path": "cpu",
                "resourceFieldRef": {"containerName": "main", "resource": "limits.cpu"},
                "mode": 0o400,
            },
        ]
    }
    mounts = [{"name": "p", "mountPath": "/p"}, {"name": "d", "mountPath": "/d"}]
    pod = make_pod(
        "proj",
        make_container("main", py=script, volumeMounts=mounts, resources=resources),
        volumes=[{"name": "p", "projected": projected}, {"name": "d", "downwardAPI": downward}],
        labels=labels,
    )
    core.create_namespaced_pod(ns, pod)
    done = wait_for("done", phase_is(core, "proj", ns, "Succeeded", "Failed"))
    out = pod_log(core, "proj", ns)
    assert done.status.phase == "Succeeded", out
    assert out.splitlines() == [
        "/p/k cmval 0o440",
        "/p/creds/pw s3cret 0o440",
        "/p/name proj 0o440",
        '/d/labels app="web";tier="x" 0o644',
        "/d/cpu 2 0o400",
    ]


def test_service_account_token_volume_holds_a_bound_token(core: client.CoreV1Api, ns: str) -> None:
    """A serviceAccountToken source gets a token from the API server's TokenRequest: for its audience,
    bound to the pod."""
    token = {"serviceAccountToken": {"path": "token", "audience": "api", "expirationSeconds": 3600}}
    pod = make_pod(
        "tok",
        make_container(
            "main",
            py="print(open('/var/run/secrets/tokens/token').read())",
            volumeMounts=[{"name": "t", "mountPath": "/var/run/secrets/tokens"}],
        ),
        volumes=[{"name": "t", "projected": {"sources": [token]}}],
    )
    created = core.create_namespaced_pod(ns, pod)
    done = wait_for("done", phase_is(core, "tok", ns, "Succeeded", "Failed"))
    out = pod_log(core, "tok", ns).strip()
    assert done.status.phase == "Succeeded", out
    payload = out.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["aud"] == ["api"]
    assert claims["sub"] == f"system:serviceaccount:{ns}:default"
    assert claims["kubernetes.io"]["pod"] == {"name": "tok", "uid": created.metadata.uid}


def test_load_incluster_config_from_a_pod(core: client.CoreV1Api, ns: str) -> None:
    """The ServiceAccount admission's kube-api-access volume and the kubelet's KUBERNETES_SERVICE_HOST/PORT
    are all kubernetes' in-cluster loader needs; automountServiceAccountToken: false leaves them out."""
    script = (
        "from kubernetes import client, config\n"
        "config.load_incluster_config()\n"
        "print(client.AuthenticationV1Api().create_self_subject_review({}).status.user_info.username)\n"
        "print(open('/var/run/secrets/kubernetes.io/serviceaccount/namespace').read())\n"
    )
    async_script = (
        "import asyncio\n"
        "from kubernetes_asyncio import client, config\n"
        "async def main():\n"
        "    config.load_incluster_config()\n"
        "    async with client.ApiClient() as api:\n"
        "        review = await client.AuthenticationV1Api(api).create_self_subject_review({})\n"
        "    print(review.status.user_info.username)\n"
        "asyncio.run(main())\n"
    )
    core.create_namespaced_pod(
        ns, make_pod("incluster", make_container("main", py=script), make_container("aio", py=async_script))
    )
    quiet_script = "import os; print(os.path.exists('/var/run/secrets/kubernetes.io/serviceaccount/token'))"
    core.create_namespaced_pod(
        ns, make_pod("quiet", make_container("main", py=quiet_script), automountServiceAccountToken=False)
    )
    done = wait_for("done", phase_is(core, "incluster", ns, "Succeeded", "Failed"), timeout=60)
    out = pod_log(core, "incluster", ns, container="main")
    aio = pod_log(core, "incluster", ns, container="aio")
    assert done.status.phase == "Succeeded", out + aio
    assert out.split() == [f"system:serviceaccount:{ns}:default", ns]
    assert aio.split() == [f"system:serviceaccount:{ns}:default"]
    wait_for("quiet done", phase_is(core, "quiet", ns, "Succeeded"), timeout=60)
    assert pod_log(core, "quiet", ns).strip() == "False"


# -- probes

FAST = {"periodSeconds": 1, "timeoutSeconds": 5}  # exec probes start an interpreter: room on a busy CI


def _events(core: client.CoreV1Api, ns: str, reason: str) -> list[Any]:
    return [e for e in core.list_namespaced_event(ns).items if e.reason == reason]


def _container_status(core: client.CoreV1Api, name: str, ns: str) -> Any:
    return (core.read_namespaced_pod(name, ns).status.container_statuses or [None])[0]


def test_failing_liveness_probe_restarts_the_container(core: client.CoreV1Api, ns: str) -> None:
    """Healthy for a second, then the exec probe fails: the kubelet kills the container, and restartPolicy
    Always starts it again."""
    script = (
        "import os, time\n"
        "open('/state/healthy', 'w').close()\n"
        "print('up', flush=True)\n"
        "time.sleep(1)\n"
        "os.remove('/state/healthy')\n"
        "time.sleep(120)\n"
    )
    liveness = {"exec": {"command": ["cat", "/state/healthy"]}, "failureThreshold": 2, **FAST}
    pod = make_pod(
        "live",
        make_container(
            "main", py=script, livenessProbe=liveness, volumeMounts=[{"name": "s", "mountPath": "/state"}]
        ),
        restartPolicy="Always",
        terminationGracePeriodSeconds=2,
        volumes=[{"name": "s", "emptyDir": {}}],
    )
    core.create_namespaced_pod(ns, pod)
    restarted = wait_for(
        "restart", lambda: (st := _container_status(core, "live", ns)) and st.restart_count >= 1 and st, 60
    )
    assert restarted.last_state.terminated is not None
    killing = _events(core, ns, "Killing")
    assert [e.message for e in killing][:1] == ["Container main failed liveness probe, will be restarted"]
    unhealthy = _events(core, ns, "Unhealthy")
    assert unhealthy and all(e.message.startswith("Liveness probe failed: ") for e in unhealthy)
    assert (
        unhealthy[0].type == "Warning" and unhealthy[0].involved_object.field_path == "spec.containers{main}"
    )
    core.delete_namespaced_pod("live", ns, grace_period_seconds=0)


READY_SERVER = (
    "import http.server, os\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        ok = os.path.exists('/flags/ready')\n"
    "        self.send_response(200 if ok else 503); self.end_headers()\n"
    "    def log_message(self, *args): pass\n"
    "http.server.HTTPServer((os.environ['BIND'], 8080), H).serve_forever()\n"
)

RESOLVE_LOOP = (
    "import socket, time\n"
    "last = None\n"
    "for _ in range(1200):\n"
    "    try:\n"
    "        ip = socket.gethostbyname('websvc')\n"
    "    except OSError:\n"
    "        ip = 'none'\n"
    "    if ip != last:\n"
    "        print(ip, flush=True); last = ip\n"
    "    time.sleep(0.1)\n"
)


def _ready_condition(core: client.CoreV1Api, name: str, ns: str) -> str:
    conditions = core.read_namespaced_pod(name, ns).status.conditions or []
    return next((cd.status for cd in conditions if cd.type == "Ready"), "")


def _endpoint_ips(core: client.CoreV1Api, ns: str) -> tuple[list[str], list[str]]:
    """(ready, not ready) addresses of the `websvc` Endpoints object."""
    try:
        subsets = core.read_namespaced_endpoints("websvc", ns).subsets or []
    except ApiException:
        return [], []
    ready = [a.ip for s in subsets for a in s.addresses or []]
    return ready, [a.ip for s in subsets for a in s.not_ready_addresses or []]


def test_readiness_probe_gates_the_ready_condition_and_service_endpoints(
    core: client.CoreV1Api, ns: str, tmp_path: Path
) -> None:
    """A pod is a Service's ready endpoint (its name resolves to it in other pods, the Endpoints object lists
    it under `addresses`) only while its readiness probe passes; the probe's answers are flipped from outside
    through a hostPath file."""
    flags = tmp_path / "flags"
    flags.mkdir()
    bind = [{"name": "BIND", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    readiness = {"httpGet": {"path": "/healthz", "port": "http"}, "failureThreshold": 1, **FAST}
    web = make_container(
        "main",
        py=READY_SERVER,
        env=bind,
        ports=[{"name": "http", "containerPort": 8080}],
        readinessProbe=readiness,
        volumeMounts=[{"name": "flags", "mountPath": "/flags"}],
    )
    core.create_namespaced_service(
        ns, {"metadata": {"name": "websvc"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 8080}]}}
    )
    core.create_namespaced_pod(
        ns,
        make_pod(
            "web", web, volumes=[{"name": "flags", "hostPath": {"path": str(flags)}}], labels={"app": "web"}
        ),
    )
    wait_for("web running", phase_is(core, "web", ns, "Running"))
    refused = "Readiness probe failed: HTTP probe failed with statuscode: 503"
    wait_for("503", lambda: refused in [e.message for e in _events(core, ns, "Unhealthy")])
    assert _ready_condition(core, "web", ns) == "False"
    status = wait_for(
        "running", lambda: (st := _container_status(core, "web", ns)) and st.state.running and st
    )
    assert (status.started, status.ready) == (True, False)
    web_ip = core.read_namespaced_pod("web", ns).status.pod_ip
    wait_for("not-ready endpoint", lambda: _endpoint_ips(core, ns) == ([], [web_ip]))

    core.create_namespaced_pod(ns, make_pod("client", make_container("main", py=RESOLVE_LOOP)))
    wait_for("not resolvable", lambda: pod_log(core, "client", ns) == "none\n")
    (flags / "ready").touch()
    wait_for("Ready", lambda: _ready_condition(core, "web", ns) == "True")
    wait_for("resolvable", lambda: pod_log(core, "client", ns) == f"none\n{web_ip}\n")
    assert _endpoint_ips(core, ns) == ([web_ip], [])
    (flags / "ready").unlink()
    wait_for("not Ready", lambda: _ready_condition(core, "web", ns) == "False")
    wait_for("gone again", lambda: pod_log(core, "client", ns) == f"none\n{web_ip}\nnone\n")
    assert _endpoint_ips(core, ns) == ([], [web_ip])
    assert _container_status(core, "web", ns).restart_count == 0  # readiness never restarts
    for name in ("web", "client"):
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


def test_startup_probe_holds_liveness_until_the_container_listens(
    core: client.CoreV1Api, ns: str, tmp_path: Path
) -> None:
    """The server listens once the test says so: until then the tcpSocket startup probe fails (without a
    restart: its threshold is high) and `started` is false; then it turns true, and only then does the
    liveness probe run."""
    script = (
        "import os, socket, time\n"
        "while not os.path.exists('/flags/listen'):\n"
        "    time.sleep(0.1)\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind((os.environ['BIND'], 8081)); s.listen()\n"
        "while True:\n"
        "    s.accept()[0].close()\n"
    )
    flags = tmp_path / "flags"
    flags.mkdir()
    bind = [{"name": "BIND", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    startup = {"tcpSocket": {"port": 8081}, "failureThreshold": 120, **FAST}
    liveness = {"tcpSocket": {"port": 8081}, "failureThreshold": 1, **FAST}
    mounts = [{"name": "flags", "mountPath": "/flags"}]
    container = make_container(
        "main", py=script, env=bind, startupProbe=startup, livenessProbe=liveness, volumeMounts=mounts
    )
    pod = make_pod(
        "slow",
        container,
        restartPolicy="Always",
        volumes=[{"name": "flags", "hostPath": {"path": str(flags)}}],
    )
    core.create_namespaced_pod(ns, pod)
    wait_for("startup probe failing", lambda: _events(core, ns, "Unhealthy"))

    def running_not_started() -> Any:
        st = _container_status(core, "slow", ns)
        return st and st.state.running and (st.started, st.ready) == (False, False)

    wait_for("running, not started", running_not_started)
    assert _ready_condition(core, "slow", ns) == "False"
    (flags / "listen").touch()
    wait_for("started", lambda: (st := _container_status(core, "slow", ns)) and st.started and st.ready, 30)
    time.sleep(2.5)  # liveness probes run now and pass
    assert _container_status(core, "slow", ns).restart_count == 0
    unhealthy = _events(core, ns, "Unhealthy")
    assert all(e.message.startswith("Startup probe failed: dial tcp ") for e in unhealthy), unhealthy
    assert not _events(core, ns, "Killing")
    core.delete_namespaced_pod("slow", ns, grace_period_seconds=0)


# -- resource limits (cgroups)


def attempt_cgroups(cluster: LocalCluster, pod: client.V1Pod, container: str, n: int = 0) -> list[str]:
    """The cgroup directories the kubelet gave an attempt (its shim spec names them)."""
    meta = {"namespace": pod.metadata.namespace, "name": pod.metadata.name, "uid": pod.metadata.uid}
    files = PodDir.of(cluster.state_dir, {"metadata": meta}).container(container).attempt(n)
    return wait_for("the attempt's spec", lambda: poddir.read_json(files.spec).get("cgroups"))


def test_memory_limit_ends_in_oom_killed(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    require_limits(cluster.limits_verdict())  # skips without cgroups, fails so on CI
    hog = make_container(
        "main",
        py="b = bytearray(200 * 1024 * 1024); print('survived')",
        resources={"limits": {"memory": "64Mi"}},
    )
    core.create_namespaced_pod(ns, make_pod("hog", hog))
    core.create_namespaced_pod(ns, make_pod("hog-again", hog, restartPolicy="OnFailure"))
    pod = wait_for("hog failed", phase_is(core, "hog", ns, "Failed", "Succeeded"))
    assert pod.status.phase == "Failed"
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)
    assert "survived" not in pod_log(core, "hog", ns)
    dirs = attempt_cgroups(cluster, pod, "main")
    wait_for("the attempt's cgroup removed", none_left(lambda: [d for d in dirs if Path(d).exists()]))

    def restarted() -> Any:
        """hog-again's last termination once it restarted; its status may not hold the container yet (the
        kubelet writes it after its first start, which a loaded machine delays past hog's end)."""
        statuses = core.read_namespaced_pod("hog-again", ns).status.container_statuses
        status = statuses[0] if statuses else None
        return status is not None and status.restart_count >= 1 and status.last_state.terminated

    last = wait_for("hog-again restarted", restarted)
    assert (last.reason, last.exit_code) == ("OOMKilled", 137)
    core.delete_namespaced_pod("hog-again", ns, grace_period_seconds=0)


def test_cpu_limit_gives_about_the_quota(cluster: LocalCluster, core: client.CoreV1Api, ns: str) -> None:
    """limits.cpu 200m: about 0.2 CPU per CFS period, as the kernel counts it in cpu.stat (not by a clock);
    the pod's cgroups go with the pod."""
    require_limits(cluster.limits_verdict())  # skips without cgroups, fails so on CI
    spin = make_container("main", py="while True: pass", resources={"limits": {"cpu": "200m"}})
    core.create_namespaced_pod(ns, make_pod("spin", spin))
    pod = wait_for("spin running", phase_is(core, "spin", ns, "Running"))
    dirs = attempt_cgroups(cluster, pod, "main")
    wait_for("20 CFS periods", lambda: cgroups.cpu_usage(dirs)[1] >= 20, timeout=60)
    usage, periods = cgroups.cpu_usage(dirs)
    assert 0.02 < usage / (periods * cgroups.CPU_PERIOD_US / 1e6) <= 0.25
    core.delete_namespaced_pod("spin", ns, grace_period_seconds=0)
    wait_for("spin gone", gone(core, "spin", ns))
    pod_cgroups = {str(Path(d).parent) for d in dirs}
    wait_for("the pod's cgroups removed", none_left(lambda: [d for d in pod_cgroups if Path(d).exists()]))


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a process's credentials needs root")
def test_non_root_container_and_its_exec_run_in_the_attempts_cgroup(
    cluster: LocalCluster, core: client.CoreV1Api, ns: str
) -> None:
    """Joining a cgroup needs the kubelet's privileges: the shim and exec join it before they drop to the
    container's user, so both a runAsUser container and an exec probe in it run limited."""
    require_limits(cluster.limits_verdict())  # skips without cgroups, fails so on CI
    script = (
        "import os, time\n"
        "open('/data/cgroup', 'w').write(open('/proc/self/cgroup').read())\n"
        "print(os.getuid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    same = 'test "$(id -u)" = 1000 && test "$(cat /proc/self/cgroup)" = "$(cat /data/cgroup)"'
    main = make_container(
        "main",
        py=script,
        resources={"limits": {"memory": "64Mi"}},
        volumeMounts=[{"name": "d", "mountPath": "/data"}],
        readinessProbe={"exec": {"command": ["sh", "-c", same]}, **FAST},
    )
    pod = make_pod(
        "limited",
        main,
        securityContext={"runAsUser": 1000, "fsGroup": 2000},
        volumes=[{"name": "d", "emptyDir": {}}],
    )
    created = core.create_namespaced_pod(ns, pod)
    wait_for("output", lambda: pod_log(core, "limited", ns))
    assert pod_log(core, "limited", ns) == "1000\n"
    dirs = attempt_cgroups(cluster, created, "main")
    lines = Path(f"/proc/{_container_pid(cluster, ns, 'limited', 'main')}/cgroup").read_text().splitlines()
    joined = {line.split(":", 2)[2] for line in lines} - {"/"}
    assert dirs and all(any(d.endswith(p) for p in joined) for d in dirs), (dirs, joined)
    wait_for(
        "Ready (the exec probe ran as 1000 in the same cgroup)",
        lambda: _ready_condition(core, "limited", ns) == "True",
    )
    core.delete_namespaced_pod("limited", ns, grace_period_seconds=0)


def test_the_kubelet_keeps_the_conditions_others_own(core: client.CoreV1Api, ns: str, tmp_path: Path) -> None:
    """Its status writes merge its own conditions by type, as the kubelet's status manager patches them: a
    DisruptionTarget the eviction API or the scheduler set survives the kubelet's next write."""
    go = tmp_path / "go"
    core.create_namespaced_pod(ns, make_pod("marked", make_container(py=f"{py_gate(go)}print('bye')")))
    wait_for("marked running", phase_is(core, "marked", ns, "Running"))
    mark = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "message": "m"}
    core.patch_namespaced_pod_status("marked", ns, {"status": {"conditions": [mark]}})
    go.touch()  # the container ends: the kubelet writes the pod's status again
    done = wait_for("marked ended", phase_is(core, "marked", ns, "Succeeded"))
    kinds = {c.type: c.reason for c in done.status.conditions}
    assert kinds.get("DisruptionTarget") == "EvictionByEvictionAPI", kinds
    assert {"PodScheduled", "Initialized", "ContainersReady", "Ready"} <= kinds.keys()
