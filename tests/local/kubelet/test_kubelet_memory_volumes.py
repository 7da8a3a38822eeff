"""`emptyDir: {medium: Memory}` on the process kubelet: a tmpfs at `/dev/shm`, as a real kubelet mounts one.

Its size is the volume's sizeLimit, no more than the pod's memory limit, no more than the node's memory (here
advertised as 3Gi); what a container writes there counts against its memory limit; the mount goes with the
pod, with a finished pod's volumes, and with the cluster, and a restarted kubelet keeps the one it finds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.testing import LocalCluster, none_left, require_limits, wait_for
from t9k_provider.testing.cluster import unavailable
from tests.support.builders import make_container, make_pod
from tests.support.clusters import cluster_fixture
from tests.support.pods import pod_log

pytestmark = pytest.mark.cluster

MI = 1024 * 1024
NODE_MEMORY = "3Gi"

cluster = cluster_fixture(capacity={"memory": NODE_MEMORY})

#: Prints what the container sees at /dev/shm: filesystem type (the topmost mount there), size in bytes,
#: mode and the nosuid/nodev flags; then waits for the file `finish` to appear in it (written from the host).
REPORT = """
import os, sys, time
line = [x.split() for x in open('/proc/self/mountinfo') if x.split()[4] == '/dev/shm'][-1]
st, mode = os.statvfs('/dev/shm'), oct(os.stat('/dev/shm').st_mode & 0o7777)
flags = ','.join(sorted({'nosuid', 'nodev'} & set(line[5].split(','))))
print(line[line.index('-') + 1], st.f_blocks * st.f_frsize, mode, flags, flush=True)
"""
WAIT_FINISH = "\nwhile not os.path.exists('/dev/shm/finish'): time.sleep(0.1)\n"


@pytest.fixture(autouse=True)
def as_root() -> None:
    if os.geteuid() != 0:
        unavailable("tmpfs volumes (a kubelet that may mount)", "not root")


@pytest.fixture
def core(cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


def shm_pod(name: str, *containers: dict[str, Any], size_limit: str | None = None, **spec: Any) -> dict:
    empty_dir = {"medium": "Memory", **({"sizeLimit": size_limit} if size_limit else {})}
    return make_pod(name, *containers, volumes=[{"name": "shm", "emptyDir": empty_dir}], **spec)


def shm_container(name: str, py: str, memory: str | None = None) -> dict[str, Any]:
    resources = {"limits": {"memory": memory}} if memory else {}
    return make_container(
        name, py=py, volumeMounts=[{"name": "shm", "mountPath": "/dev/shm"}], resources=resources
    )


def phase(core: client.CoreV1Api, name: str, ns: str = "default") -> str:
    return core.read_namespaced_pod(name, ns).status.phase


def volume_dir(cluster: LocalCluster, pod: client.V1Pod) -> Path:
    meta = {"namespace": pod.metadata.namespace, "name": pod.metadata.name, "uid": pod.metadata.uid}
    return PodDir.of(cluster.state_dir, {"metadata": meta}).volumes / "shm"


def mounts_under(path: Path) -> list[list[str]]:
    """The host's mounts at or below `path` (mountinfo fields)."""
    root = os.path.realpath(path)
    lines = [x.split() for x in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [f for f in lines if f[4] == root or f[4].startswith(root + "/")]


def gone(core: client.CoreV1Api, name: str, ns: str = "default") -> Callable[[], bool]:
    def probe() -> bool:
        try:
            core.read_namespaced_pod(name, ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    return probe


def test_a_memory_emptydir_is_one_tmpfs_of_its_size_limit_shared_by_the_containers(
    cluster: LocalCluster, core: client.CoreV1Api
) -> None:
    writer = REPORT + "open('/dev/shm/msg', 'w').write('from writer')" + WAIT_FINISH
    reader = (
        REPORT
        + "while not os.path.exists('/dev/shm/msg'): time.sleep(0.1)\n"
        + "print(open('/dev/shm/msg').read(), flush=True)"
        + WAIT_FINISH
    )
    pod = shm_pod("shm", shm_container("writer", writer), shm_container("reader", reader), size_limit="64Mi")
    core.create_namespaced_pod("default", pod)
    wait_for(
        "the reader read", lambda: "from writer" in pod_log(core, "shm", "default", container="reader"), 60
    )
    expected = f"tmpfs {64 * MI} 0o1777 nodev,nosuid\n"
    # Each container's start is reported as its shim records it, so the status may show the reader running a
    # moment before the writer, which started first: its log is served once the status says it runs.
    wait_for("the writer's log", lambda: pod_log(core, "shm", "default", container="writer"), 30)
    assert pod_log(core, "shm", "default", container="writer") == expected
    assert pod_log(core, "shm", "default", container="reader") == expected + "from writer\n"
    running = core.read_namespaced_pod("shm", "default")
    host = volume_dir(cluster, running)
    (mount,) = mounts_under(host)  # one tmpfs, mounted by the kubelet in the host's mount namespace
    assert mount[mount.index("-") + 1] == "tmpfs" and f"size={64 * 1024}k" in mount[-1]
    (host / "finish").write_text("")
    wait_for("Succeeded", lambda: phase(core, "shm") == "Succeeded", 30)
    # A finished pod's volumes are torn down: its memory is freed while the pod object stays.
    wait_for("the finished pod's tmpfs unmounted", none_left(lambda: mounts_under(host)), 15)
    core.delete_namespaced_pod("shm", "default")
    wait_for("pod gone", gone(core, "shm"), 30)
    wait_for("pod directory removed", lambda: not host.parent.parent.exists(), 15)


@pytest.mark.parametrize(
    ("name", "limits", "size_limit", "expected"),
    [
        ("below", ["32Mi"], "64Mi", 32 * MI),  # the pod's memory limit, below the sizeLimit
        ("sum", ["32Mi", "48Mi"], "1Gi", 80 * MI),  # the pod's limit: the sum of its containers'
        ("partial", ["32Mi", None], "96Mi", 96 * MI),  # a container without a limit: the pod has none
        ("node", [None], None, 3 * 1024 * MI),  # nothing set: the node's memory
    ],
)
def test_the_size_is_capped_by_the_pod_memory_limit_and_the_node_memory(
    core: client.CoreV1Api, name: str, limits: list[str | None], size_limit: str | None, expected: int
) -> None:
    containers = [shm_container(f"c{i}", REPORT, memory) for i, memory in enumerate(limits)]
    core.create_namespaced_pod("default", shm_pod(name, *containers, size_limit=size_limit))
    wait_for("Succeeded", lambda: phase(core, name) in ("Succeeded", "Failed"), 60)
    assert pod_log(core, name, "default", container="c0") == f"tmpfs {expected} 0o1777 nodev,nosuid\n"
    core.delete_namespaced_pod(name, "default")


def test_writing_past_the_memory_limit_ooms_the_writer_and_past_the_size_fails(
    cluster: LocalCluster, core: client.CoreV1Api
) -> None:
    require_limits(cluster.limits_verdict())
    fill = (
        "import errno, sys\n"
        "chunk = b'x' * (1024 * 1024)\n"
        "try:\n"
        "    with open('/dev/shm/fill', 'wb') as out:\n"
        "        for _ in range(int(sys.argv[1])):\n"
        "            out.write(chunk); out.flush()\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno], flush=True); sys.exit(3)\n"
        "print('survived')\n"
    )
    # The tmpfs has room (64Mi + 512Mi): the pages written are charged to the writer's 64Mi.
    hog = shm_container("writer", fill, "64Mi")
    hog["args"] = ["200"]
    idle = shm_container("idle", "pass", "512Mi")
    core.create_namespaced_pod("default", shm_pod("hog", hog, idle))
    # The tmpfs is full (16Mi) long before the writer's limit.
    full = shm_container("writer", fill, "256Mi")
    full["args"] = ["32"]
    core.create_namespaced_pod("default", shm_pod("full", full, size_limit="16Mi"))
    for name in ("hog", "full"):
        wait_for(f"{name} done", lambda name=name: phase(core, name) in ("Succeeded", "Failed"), 60)
    terminated = core.read_namespaced_pod("hog", "default").status.container_statuses
    writer = next(s for s in terminated if s.name == "writer").state.terminated
    assert (writer.reason, writer.exit_code) == ("OOMKilled", 137)
    assert "survived" not in pod_log(core, "hog", "default", container="writer")
    assert pod_log(core, "full", "default") == "ENOSPC\n"
    for name in ("hog", "full"):
        core.delete_namespaced_pod(name, "default")


def test_the_tmpfs_survives_a_kubelet_restart_and_goes_with_the_cluster(
    cluster_factory: Callable[..., LocalCluster],
) -> None:
    cluster = cluster_factory()
    core = client.CoreV1Api(cluster.api_client())
    keep = REPORT + "open('/dev/shm/data', 'w').write('kept')\nprint('written', flush=True)\ntime.sleep(300)"
    core.create_namespaced_pod("default", shm_pod("keep", shm_container("main", keep), size_limit="8Mi"))
    wait_for("written", lambda: "written" in pod_log(core, "keep", "default"), 60)
    host = volume_dir(cluster, core.read_namespaced_pod("keep", "default"))
    assert len(mounts_under(host)) == 1
    cluster.kill()  # a crash: the shims, their containers and the tmpfs stay
    time.sleep(0.5)
    assert len(mounts_under(host)) == 1
    cluster.start()
    core = client.CoreV1Api(cluster.api_client())
    # Another pod started after the restart: the kubelet has prepared the pods it found by then.
    core.create_namespaced_pod("default", shm_pod("later", shm_container("main", keep), size_limit="8Mi"))
    wait_for("the later pod written", lambda: "written" in pod_log(core, "later", "default"), 60)
    time.sleep(1)
    assert len(mounts_under(host)) == 1, "a restarted kubelet mounts no second tmpfs over the first"
    assert (host / "data").read_text() == "kept"
    assert phase(core, "keep") == "Running"
    pods_dir = cluster.state_dir / "pods"
    assert len(mounts_under(pods_dir)) == 2
    cluster.kill()  # left to a next kubelet that will not come: stop() removes what is left
    time.sleep(0.5)
    cluster.stop()
    assert mounts_under(cluster.state_dir) == []


def test_a_stopped_cluster_leaves_no_mount(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory()
    core = client.CoreV1Api(cluster.api_client())
    sleeper = REPORT + "print('up', flush=True)\ntime.sleep(300)"
    core.create_namespaced_pod("default", shm_pod("sleeper", shm_container("main", sleeper)))
    wait_for("up", lambda: "up" in pod_log(core, "sleeper", "default"), 60)
    assert len(mounts_under(cluster.state_dir / "pods")) == 1
    cluster.stop()
    assert mounts_under(cluster.state_dir) == []
