"""MPI, ColossalAI, DeepSpeed and Beam jobs on the local cluster: the documented objects, commands and files.

The tests put stand-ins on the replicas' PATH (and point ``ssh.sshdPath`` at one), so they need neither sshd
nor the launchers installed and stay fast: a fake sshd that listens on port 22 (the launcher's wait needs it),
and fake launchers that print their argv and the files the controller mounted, as seen from inside the
container. The real sshd, mpirun, deepspeed and colossalai run in tests/examples (the example DAGs).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.testing import wait_for
from tests.controller.e2e_support import NS, TERMINAL, Jobs, fake_tools
from tests.support.builders import make_job
from tests.support.clusters import cluster_fixture, controller_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_tools(tmp_path_factory.mktemp("fake-tools"))


#: The BeamJob test plays the flink-operator (no Flink processes needed to check the controller).
cluster = cluster_fixture(flink_operator=False)
controller = controller_fixture()


def path_env(tools: Path, hostfile: str) -> list[dict[str, str]]:
    return [{"name": "PATH", "value": f"{tools}:/usr/bin:/bin"}, {"name": "HOSTFILE", "value": hostfile}]


def wait_terminal(jobs: Jobs, kind: str, name: str, timeout: float = 60) -> dict[str, Any]:
    wait_for(f"{kind} {name} terminal", lambda: jobs.phase(kind, name) in TERMINAL, timeout)
    return jobs.get(kind, name)


def launcher_report(jobs: Jobs, pod: str) -> dict[str, Any]:
    lines = [line for line in jobs.log(pod).splitlines() if line.startswith("{")]
    assert lines, jobs.log(pod)
    return json.loads(lines[-1])


def secret_data(jobs: Jobs, name: str) -> dict[str, str]:
    secret = jobs.core.read_namespaced_secret(name, NS)
    return {k: base64.b64decode(v).decode() for k, v in secret.data.items()}


def owner_of(obj: Any) -> str:
    (ref,) = obj.metadata.owner_references
    assert ref.controller is True
    return ref.name


def test_mpijob_objects_commands_and_files(jobs: Jobs, tools: Path) -> None:
    worker = {"name": "mpi-worker", "image": "mpi:x", "env": path_env(tools, "/etc/mpi/hostfile")}
    jobs.create(make_job("MPIJob", "mpi", {
        "worker": {"replicas": 2, "processesPerWorker": 2, "cmd": ["./hello", "--n", "3"],
                   "extraMPIArgs": ["--allow-run-as-root"], "template": {"spec": {"containers": [worker]}}},
        "mca": {"btl": "^openib"},
        "mpiHome": "/opt/openmpi",
        "ssh": {"sshAuthMountPath": "/root/.ssh", "sshdPath": str(tools / "sshd")},
    }, namespace=NS))  # fmt: skip
    obj = wait_terminal(jobs, "MPIJob", "mpi")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert (
        "mpirun exited 0"
        in next(c for c in obj["status"]["conditions"] if c["type"] == "Completed")["message"]
    )

    assert jobs.pod_names("mpi") == ["mpi-launcher", "mpi-worker-0", "mpi-worker-1"]
    for name in ("mpi-worker-0", "mpi-worker-1"):
        pod = jobs.core.read_namespaced_pod(name, NS)
        assert pod.spec.containers[0].command == [str(tools / "sshd"), "-D", "-e"]
        assert jobs.log(name).startswith("fake sshd -D -e")
    launcher = jobs.core.read_namespaced_pod("mpi-launcher", NS)
    workers_started = min(
        jobs.core.read_namespaced_pod(f"mpi-worker-{i}", NS).status.start_time for i in range(2)
    )
    assert launcher.metadata.creation_timestamp >= workers_started, "the launcher waits for running workers"

    report = launcher_report(jobs, "mpi-launcher")
    assert report["argv"] == [
        "--hostfile", "/etc/mpi/hostfile", "--prefix", "/opt/openmpi", "-mca", "btl", "^openib",
        "--allow-run-as-root", "./hello", "--n", "3",
    ]  # fmt: skip
    assert report["hostfile"] == "mpi-worker-0 slots=2\nmpi-worker-1 slots=2\n"
    assert {"authorized_keys", "id_rsa", "id_rsa.pub", "config"} <= set(report["ssh"])
    assert "StrictHostKeyChecking no" in report["ssh_config"]
    assert report["env"]["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"

    secret = jobs.core.read_namespaced_secret("mpi-ssh", NS)
    assert secret.type == "kubernetes.io/ssh-auth" and owner_of(secret) == "mpi"
    keys = secret_data(jobs, "mpi-ssh")
    assert keys["ssh-privatekey"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert keys["ssh-publickey"].startswith("ssh-ed25519 ")
    hostfile = jobs.core.read_namespaced_config_map("mpi-hostfile", NS)
    assert hostfile.data == {"hostfile": report["hostfile"]} and owner_of(hostfile) == "mpi"
    services = jobs.owned("mpi", jobs.core.list_namespaced_service)
    assert services == ["mpi-worker-0", "mpi-worker-1"]
    for name in services:
        svc = jobs.core.read_namespaced_service(name, NS)
        assert svc.spec.cluster_ip == "None" and svc.spec.publish_not_ready_addresses is True


def test_colossalaijob_objects_commands_and_files(jobs: Jobs, tools: Path) -> None:
    jobs.create(make_job("ColossalAIJob", "cai", {
        "ssh": {"authMountPath": "/root/.ssh", "sshdPath": str(tools / "sshd")},
        "launcher": {"image": "colossalai:x", "workingDir": "/tmp",
                     "env": path_env(tools, "/etc/colossalai/hostfile")},
        "worker": {"replicas": 2, "procPerWorker": 2, "command": ["train.py", "--epochs", "1"],
                   "torchArgs": ["--max_restarts=0"],
                   "template": {"spec": {"containers": [{"name": "worker", "image": "colossalai:x"}]}}},
    }, namespace=NS))  # fmt: skip
    obj = wait_terminal(jobs, "ColossalAIJob", "cai")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert jobs.pod_names("cai") == ["cai-launcher", "cai-worker-0", "cai-worker-1"]
    worker = jobs.core.read_namespaced_pod("cai-worker-0", NS).spec.containers[0].command
    assert worker[:2] == ["sh", "-c"] and worker[4:7] == [str(tools / "sshd"), "-D", "-e"]
    report = launcher_report(jobs, "cai-launcher")
    assert report["argv"] == [
        "run", "--hostfile", "/etc/colossalai/hostfile", "--nproc_per_node", "2",
        "--master_addr", "cai-worker-0", "--master_port", "29500",
        "--extra_launch_args", "max_restarts=0", "train.py", "--epochs", "1",
    ]  # fmt: skip
    assert report["hostfile"] == "cai-worker-0\ncai-worker-1\n"
    assert {"authorized_keys", "id_rsa", "config"} <= set(report["ssh"])


DUMP_FILES = (
    "import json, os; print(json.dumps({'hostfile': open('/t9k/hostfile').read(), "
    "'env_file': open('/root/.deepspeed_env').read(), 'ssh': sorted(os.listdir('/root/.ssh'))}))"
)


def test_deepspeedjob_objects_commands_and_files(jobs: Jobs) -> None:
    """Normal mode shows the commands (worker-0 launches deepspeed after sshd); the files are read from inside
    a debug-mode twin, whose replicas run a file dump instead of sshd (no sshd on this machine)."""
    worker = {"name": "worker", "image": "deepspeed:x", "env": [{"name": "NCCL_DEBUG", "value": "INFO"}]}
    spec = {
        "worker": {"replicas": 2, "restartPolicy": "Never", "template": {"spec": {"containers": [worker]}}},
        "config": {"run": {"python": ["train.py", "--deepspeed"]}, "slotsPerWorker": 2, "localRank": False},
    }
    jobs.create(make_job("DeepSpeedJob", "ds", spec, namespace=NS))
    jobs.create(make_job("DeepSpeedJob", "ds-debug", {
        **spec,
        "runMode": {"debug": {"enabled": True, "replicaSpecs": [
            {"type": "worker", "command": [sys.executable, "-c", DUMP_FILES]}]}},
    }, namespace=NS))  # fmt: skip
    pods = wait_for("two DeepSpeed workers", lambda: len(jobs.pods("ds")) == 2 and jobs.pods("ds"), 30)
    launch = pods[0].spec.containers[0].command
    assert launch[:2] == ["sh", "-c"] and launch[2].endswith('&& exec deepspeed "$@"')
    assert launch[4:] == ["--hostfile=/t9k/hostfile", "--master_addr=ds-worker-0", "--no_local_rank",
                          "train.py", "--deepspeed"]  # fmt: skip
    assert pods[1].spec.containers[0].command[4:7] == ["/usr/sbin/sshd", "-D", "-e"]
    data = jobs.core.read_namespaced_config_map("ds-hostfile", NS).data
    assert data == {
        "hostfile": "ds-worker-0 slots=2\nds-worker-1 slots=2\n",
        "deepspeed_env": "NCCL_DEBUG=INFO\n",
    }
    assert secret_data(jobs, "ds-ssh")["ssh-publickey"].startswith("ssh-")

    def dumped() -> dict[str, Any] | None:
        try:
            lines = [line for line in jobs.log("ds-debug-worker-1").splitlines() if line.startswith("{")]
        except client.ApiException:
            return None
        return json.loads(lines[-1]) if lines else None

    files = wait_for("debug replica file dump", dumped, 30)
    assert files["hostfile"] == "ds-debug-worker-0 slots=2\nds-debug-worker-1 slots=2\n"
    assert files["env_file"] == "NCCL_DEBUG=INFO\n"
    assert {"authorized_keys", "id_rsa", "config"} <= set(files["ssh"])


def test_beamjob_flinkcluster_then_submit_job(jobs: Jobs) -> None:
    submit = {
        "name": "submit",
        "image": "beam:x",
        "command": ["sh", "-c", 'echo "submit $FLINK_MASTER $*"', "sh"],
    }
    jobs.create(make_job("BeamJob", "beam", {
        "flinkClusterTemplate": {"spec": {"flinkVersion": "1.17", "image": {"name": "flink:1.17"}}},
        "jobTemplate": {"spec": {"template": {"spec": {"containers": [submit]}}}},
        "runPolicy": {"cleanUpCluster": True},
    }, namespace=NS))  # fmt: skip
    flink = ("flinkoperator.k8s.io", "v1beta1", NS, "flinkclusters", "beam-flinkcluster")
    cluster = wait_for("FlinkCluster beam-flinkcluster", lambda: _get(jobs, flink), 30)
    assert cluster["spec"]["flinkVersion"] == "1.17"
    assert cluster["metadata"]["ownerReferences"][0]["name"] == "beam"
    batch = client.BatchV1Api(jobs.core.api_client)
    assert not batch.list_namespaced_job(NS).items or all(
        j.metadata.name != "beam-batchjob" for j in batch.list_namespaced_job(NS).items
    ), "the submit Job waits for the Flink cluster"
    # Play the flink operator: the cluster reports Running, so the controller submits the pipeline.
    jobs.custom.patch_namespaced_custom_object_status(*flink, {"status": {"state": "Running"}})
    obj = wait_terminal(jobs, "BeamJob", "beam")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    submitted = batch.read_namespaced_job("beam-batchjob", NS)
    (container,) = submitted.spec.template.spec.containers
    assert {"name": "FLINK_MASTER", "value": "beam-flinkcluster-jobmanager:8081"} in [
        {"name": e.name, "value": e.value} for e in container.env
    ]
    assert "--runner=FlinkRunner" in container.args
    wait_for("cleanUpCluster deletes the FlinkCluster", lambda: _get(jobs, flink) is None, 30)


def _get(jobs: Jobs, ref: tuple[str, ...]) -> dict[str, Any] | None:
    try:
        return jobs.custom.get_namespaced_custom_object(*ref)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
