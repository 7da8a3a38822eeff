"""One compiler per kind: the objects, commands, env and rules each kind produces, played in the Sim."""

from __future__ import annotations

import base64
import json
import shlex

import pytest
from cryptography.hazmat.primitives.serialization import load_ssh_private_key, load_ssh_public_key

from t9k_provider.controller.engine import Create, Delete
from t9k_provider.controller.engine.initwait import WAIT_CONTAINER_NAME
from t9k_provider.controller.kinds.colossalai import extra_launch_args
from t9k_provider.controller.kinds.pytorch import elastic_counts
from t9k_provider.controller.kinds.registry import REGISTRY
from t9k_provider.controller.kinds.ssh import generate_keypair
from t9k_provider.jobs import KINDS
from t9k_provider.jobs.specparts import PyTorchReplicaSpec
from t9k_provider.local.kubelet.podenv import expand
from tests.controller.engine_sim import Sim, job
from tests.support.builders import make_container, make_template


def env_of(pod: dict, cname: str | None = None) -> dict[str, str]:
    containers = pod["spec"]["containers"]
    c = next((x for x in containers if x["name"] == cname), containers[0])
    return {e["name"]: e.get("value") for e in c.get("env") or []}


def main(pod: dict, cname: str) -> dict:
    return next(c for c in pod["spec"]["containers"] if c["name"] == cname)


def init_names(pod: dict) -> list[str]:
    return [c["name"] for c in pod["spec"].get("initContainers") or []]


def run_to_running(sim: Sim, rounds: int = 4) -> None:
    for _ in range(rounds):
        sim.step()
        sim.run_all()
    sim.step()


# -- PyTorchTrainingJob -----------------------------------------------------------------------------


def pytorch(**spec: object) -> dict:
    body = {
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 3,
                "restartPolicy": "ExitCode",
                "template": make_template(
                    make_container("pytorch", command=["python"], args=["train.py", "--epochs=1"])
                ),
            },
        ],
        **spec,
    }
    return job("PyTorchTrainingJob", body)


def test_pytorch_env_ranks_port_services_and_wait():
    manifest = job(
        "PyTorchTrainingJob",
        {
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": make_template(make_container("pytorch"))},
                {"type": "master", "replicas": 1, "template": make_template(make_container("pytorch"))},
            ]
        },
    )
    sim = Sim(manifest)
    sim.step()
    master = sim.pod("demo-master-0")
    assert env_of(master) | {} == {
        "MASTER_ADDR": "demo-master-0",
        "MASTER_PORT": "23456",
        "RANK": "0",
        "WORLD_SIZE": "3",
        "PYTHONUNBUFFERED": "1",
        "PET_MASTER_ADDR": "demo-master-0",
        "PET_MASTER_PORT": "23456",
        "PET_NODE_RANK": "0",
        "PET_NNODES": "3",
    }
    assert env_of(sim.pod("demo-worker-1"))["RANK"] == "2"
    assert main(master, "pytorch")["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}
    ]
    assert init_names(master) == []
    assert init_names(sim.pod("demo-worker-0")) == [WAIT_CONTAINER_NAME]
    assert sim.pod("demo-worker-0")["spec"]["initContainers"][0]["command"][-1] == "demo-master-0"
    assert sim.kinds("Service") == ["demo-master-0", "demo-worker-0", "demo-worker-1"]
    assert sim.objects[("Service", "demo-master-0")]["spec"]["ports"][0]["port"] == 23456


def test_pytorch_first_type_is_master_and_declared_port_wins():
    c = make_container(
        "python",
        ports=[{"name": "pytorchjob-port", "containerPort": 30000}],
        env=[{"name": "WORLD_SIZE", "value": "user"}],
    )
    manifest = job(
        "PyTorchTrainingJob",
        {
            "replicaSpecs": [
                {"type": "ps", "replicas": 1, "template": make_template(c)},
                {"type": "worker", "replicas": 2, "template": make_template(make_container("python"))},
            ]
        },
    )
    sim = Sim(manifest)
    sim.step()
    ps_env = env_of(sim.pod("demo-ps-0"))
    assert ps_env["MASTER_ADDR"] == "demo-ps-0" and ps_env["MASTER_PORT"] == "30000"
    assert ps_env["WORLD_SIZE"] == "user"  # a variable the user set keeps the user's value
    assert env_of(sim.pod("demo-worker-1"))["RANK"] == "2"


def test_pytorch_torchrun_command():
    gpu = make_container(
        "pytorch", command=["python"], args=["-m", "pkg.train"], resources={"limits": {"nvidia.com/gpu": 4}}
    )
    manifest = pytorch(
        torchrunConfig={
            "enabled": True,
            "procPerNode": "gpu",
            "maxRestarts": 2,
            "extraOptions": ["--log_dir=/tmp/x"],
        }
    )
    manifest["spec"]["replicaSpecs"][0]["template"] = make_template(gpu)
    sim = Sim(manifest)
    sim.step()
    c = main(sim.pod("demo-worker-1"), "pytorch")
    assert c["command"] == [
        "torchrun",
        "--nnodes=3",
        "--nproc_per_node=4",
        "--max_restarts=2",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=demo-worker-0:23456",
        "--rdzv_id=uid-demo",
        "--log_dir=/tmp/x",
        "-m",
        "pkg.train",
    ]
    assert "args" not in c


def test_pytorch_debug_replaces_torchrun():
    manifest = pytorch(torchrunConfig={"enabled": True}, runMode={"debug": {"enabled": True}})
    sim = Sim(manifest)
    sim.step()
    assert main(sim.pod("demo-worker-0"), "pytorch")["command"] == ["sleep", "inf"]


def test_pytorch_success_is_the_master_and_failure_is_fail_fast():
    sim = Sim(pytorch())
    run_to_running(sim)
    sim.finish("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Running"
    sim.finish("demo-worker-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"
    assert sim.cond("Completed")["message"] == "The job has finished successfully."

    sim = Sim(pytorch())
    run_to_running(sim)
    sim.finish("demo-worker-2", exit_code=1)  # ExitCode: 1 is permanent
    sim.step()
    assert sim.status["phase"] == "Failed"
    assert sim.cond("Failed")["message"] == "The job exited with an error code."
    assert "demo-worker-2 failed with exit code 1" in sim.cond("ReplicaFailure")["message"]


@pytest.mark.parametrize(
    ("code", "restarts"),
    [(130, True), (137, True), (143, True), (138, True), (1, False), (2, False), (139, False), (255, False)],
)
def test_exit_code_policy(code, restarts):
    sim = Sim(pytorch())
    run_to_running(sim)
    sim.finish("demo-worker-1", exit_code=code)
    decision = sim.step()
    assert any(isinstance(a, Delete) for a in decision.actions) is restarts
    assert sim.status["phase"] == ("Running" if restarts else "Failed")
    assert sim.status["backoffCount"] == (1 if restarts else 0)


def test_exit_code_137_restarts_until_backoff_limit_then_fails():
    sim = Sim(pytorch(runPolicy={"backoffLimit": 2}))
    run_to_running(sim)
    for expected in (1, 2):
        sim.finish("demo-worker-1" if expected == 1 else "demo-worker-2", exit_code=137)
        sim.step()
        assert sim.status["backoffCount"] == expected  # one budget shared by every replica
        run_to_running(sim, rounds=2)
    sim.finish("demo-worker-0", exit_code=137)
    sim.step()
    assert sim.status["phase"] == "Failed" and sim.status["backoffCount"] == 2
    assert "restart budget is exhausted" in sim.cond("ReplicaFailure")["message"]
    assert sim.status["tasks"][0]["restartCount"] == 2


def test_an_oom_killed_replica_is_named_in_the_failure_messages():
    """The kubelet's termination reason (OOMKilled) reaches ReplicaFailure and the Failed condition; a plain
    exit code leaves the T9k message as it is (test above)."""
    sim = Sim(pytorch(runPolicy={"backoffLimit": 0}))
    run_to_running(sim)
    sim.finish("demo-worker-1", exit_code=137)
    sim.pod("demo-worker-1")["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "OOMKilled"
    sim.step()
    assert sim.status["phase"] == "Failed"
    assert sim.cond("Failed")["message"] == (
        "The job exited with an error code. Pod demo-worker-1: OOMKilled (exit code 137)."
    )
    assert "Pod demo-worker-1 failed with exit code 137 (OOMKilled)" in sim.cond("ReplicaFailure")["message"]


def test_deepspeed_workers_are_not_restarted_by_default():
    """03-deepspeedjob-api.md, Worker.restartPolicy: "Defaults to Never"."""
    spec = {
        "config": {"run": {"python": ["train.py"]}},
        "worker": {"replicas": 2, "template": make_template(make_container("worker"))},
    }
    sim = Sim(job("DeepSpeedJob", spec))
    run_to_running(sim)
    sim.finish("demo-worker-1", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Failed" and sim.status.get("backoffCount", 0) == 0


def test_training_default_restart_policy_is_on_failure_and_priority_ten():
    """The T9k Scheduler's default priority is 10 (03-deepspeedjob-api.md, T9kScheduler)."""
    manifest = job(
        "PyTorchTrainingJob",
        {
            "scheduler": {"t9kScheduler": {"queue": "q"}},
            "replicaSpecs": [
                {"type": "worker", "replicas": 1, "template": make_template(make_container("pytorch"))}
            ],
        },
    )
    sim = Sim(manifest)
    run_to_running(sim)
    assert sim.objects[("PodGroup", "demo")]["spec"]["priority"] == 10
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    assert sim.status["backoffCount"] == 1 and sim.status["phase"] == "Running"


@pytest.mark.parametrize(
    ("names", "chosen"),
    [
        (["sidecar", "python", "pytorch"], "pytorch"),
        (["sidecar", "python"], "python"),
        (["trainer", "sidecar"], "trainer"),
    ],
)
def test_torchrun_container_preference(names, chosen):
    containers = [make_container(n, command=["python"], args=["t.py"]) for n in names]
    manifest = pytorch(torchrunConfig={"enabled": True})
    manifest["spec"]["replicaSpecs"][0]["template"] = make_template(*containers)
    sim = Sim(manifest)
    sim.step()
    commands = {c["name"]: c["command"][0] for c in sim.pod("demo-worker-0")["spec"]["containers"]}
    assert commands == {n: "torchrun" if n == chosen else "python" for n in names}


def test_pytorch_elastic_scales_and_reports():
    manifest = pytorch(
        torchrunConfig={"enabled": True},
        elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 9},
        scheduler={"t9kScheduler": {"queue": "q"}},
    )
    sim = Sim(manifest)
    sim.step()
    assert sim.objects[("PodGroup", "demo")]["spec"]["minMember"] == 1
    sim.step()
    assert sim.kinds("Pod") == [f"demo-worker-{i}" for i in range(4)]  # expected clamped to max
    assert main(sim.pod("demo-worker-0"), "pytorch")["command"][1] == "--nnodes=1:4"
    assert env_of(sim.pod("demo-worker-0"))["PET_NNODES"] == "1:4"
    sim.run_all()
    sim.step()
    sim.job["spec"]["elastic"]["expectedReplicas"] = 2
    decision = sim.step()
    deleted = sorted((a.kind, a.name) for a in decision.actions if isinstance(a, Delete))
    assert deleted == [
        ("Pod", "demo-worker-2"),
        ("Pod", "demo-worker-3"),
        ("Service", "demo-worker-2"),
        ("Service", "demo-worker-3"),
    ]
    assert [r["name"] for r in sim.status["tasks"][0]["status"]] == ["demo-worker-0", "demo-worker-1"]
    sim.finish("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Succeeded"  # elastic: any worker finishing ends the job


def test_elastic_counts_follow_scaling_weight():
    specs = [
        PyTorchReplicaSpec(type="master", replicas=1, scaling_weight=1),
        PyTorchReplicaSpec(type="worker", replicas=1, scaling_weight=3),
    ]
    assert elastic_counts(specs, 4) == [1, 3]
    assert elastic_counts(specs, 2) == [1, 1]
    assert elastic_counts(specs, 1) == [1, 0]


def test_tensorboard_companion_and_status():
    manifest = pytorch(tensorboardSpec={"image": "tb:1", "trainingLogFilesets": ["t9k://pvc/p/log"]})
    sim = Sim(manifest)
    decision = sim.step()
    assert decision.actions[0].obj["kind"] == "TensorBoard"
    tb = sim.objects[("TensorBoard", "demo")]
    assert tb["apiVersion"] == "tensorstack.dev/v1beta1"
    assert tb["spec"] == {"image": "tb:1", "trainingLogFilesets": ["t9k://pvc/p/log"]}
    sim.step()
    assert sim.status["tensorboard"]["ready"] is False
    assert sim.status["tensorboard"]["note"] == "TensorBoard [demo] is not ready yet"
    # Why it is not ready, as its Ready condition says: a bad file set fails it (a Warning)...
    bad = 'persistentvolumeclaim "p" not found (file set t9k://pvc/p/log)'
    tb["status"] = {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False", "message": bad}]}
    sim.step()
    assert sim.status["tensorboard"]["note"] == f"TensorBoard [demo] is not ready yet: {bad}"
    assert (sim.status["tensorboard"]["ready"], sim.status["tensorboard"]["type"]) == (False, "Warning")
    # ... a pod on its way does not.
    starting = "pod demo-tensorboard: ContainerCreating"
    waiting = {"type": "Ready", "status": "False", "message": starting}
    tb["status"] = {"phase": "Pending", "conditions": [waiting]}
    sim.step()
    assert sim.status["tensorboard"]["note"] == f"TensorBoard [demo] is not ready yet: {starting}"
    assert sim.status["tensorboard"]["type"] == "Normal"
    tb["status"] = {"phase": "Running"}
    sim.step()
    assert sim.status["tensorboard"] == {
        "dependent": {
            "apiVersion": "tensorstack.dev/v1beta1",
            "kind": "TensorBoard",
            "name": "demo",
            "namespace": "ns",
            "uid": tb["metadata"]["uid"],
        },
        "ready": True,
        "reason": "DependentReady",
        "action": "NOP",
        "note": "TensorBoard [demo] is ready",
        "type": "Normal",
    }


# -- TensorFlowTrainingJob --------------------------------------------------------------------------


def tensorflow(**spec: object) -> dict:
    return job(
        "TensorFlowTrainingJob",
        {
            "replicaSpecs": [
                {"type": "chief", "template": make_template(make_container("tensorflow"))},
                {
                    "type": "ps",
                    "template": make_template(
                        make_container("tensorflow", ports=[{"name": "x", "containerPort": 5000}])
                    ),
                },
                {"type": "worker", "replicas": 2, "template": make_template(make_container("tensorflow"))},
                {"type": "evaluator", "template": make_template(make_container("tensorflow"))},
            ],
            **spec,
        },
    )


def test_tf_config():
    sim = Sim(tensorflow())
    sim.step()
    config = json.loads(env_of(sim.pod("demo-worker-1"))["TF_CONFIG"])
    assert config == {
        "cluster": {
            "chief": ["demo-chief-0:2222"],
            "ps": ["demo-ps-0:5000"],
            "worker": ["demo-worker-0:2222", "demo-worker-1:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    evaluator = json.loads(env_of(sim.pod("demo-evaluator-0"))["TF_CONFIG"])
    assert "evaluator" not in evaluator["cluster"] and evaluator["task"] == {"type": "evaluator", "index": 0}
    assert all(init_names(pod) == [] for pod in sim.pods().values())


def test_tf_chief_decides_and_unfinished_cleanup_removes_ps():
    sim = Sim(tensorflow(runPolicy={"cleanUpPolicy": "Unfinished"}))
    run_to_running(sim)
    sim.finish("demo-worker-0")
    sim.finish("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Running"
    sim.finish("demo-chief-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"
    sim.step()
    assert sim.kinds("Pod") == ["demo-chief-0", "demo-worker-0", "demo-worker-1"]


def never_restarted(manifest: dict) -> dict:
    for rs in manifest["spec"]["replicaSpecs"]:
        rs["restartPolicy"] = "Never"
    return manifest


def test_tf_replicas_other_than_the_chief_failing_for_good_do_not_fail_the_job():
    """04-tensorflowtrainingjob.md, 成功和失败: the chief decides, success and failure alike. A worker and a
    PS that failed for good leave the job running, and the chief still makes it succeed."""
    sim = Sim(never_restarted(tensorflow()))
    run_to_running(sim)
    sim.finish("demo-worker-1", exit_code=1)
    sim.finish("demo-ps-0", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Running"
    sim.finish("demo-chief-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"


@pytest.mark.parametrize(("chief", "master"), [(True, "demo-chief-0"), (False, "demo-worker-0")])
def test_tf_the_master_failing_for_good_fails_the_job(chief: bool, master: str):
    manifest = never_restarted(tensorflow())
    if not chief:
        manifest["spec"]["replicaSpecs"] = manifest["spec"]["replicaSpecs"][1:]
    sim = Sim(manifest)
    run_to_running(sim)
    sim.finish(master, exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Failed"


def test_tf_without_chief_worker_zero_decides():
    manifest = job(
        "TensorFlowTrainingJob",
        {
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": make_template(make_container("tensorflow"))}
            ]
        },
    )
    sim = Sim(manifest)
    run_to_running(sim)
    sim.finish("demo-worker-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"


# -- XGBoostTrainingJob -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ports", "port"), [([{"name": "xgboost-port", "containerPort": 9991}], "9991"), ([], "9999")]
)
def test_xgboost_env(ports, port):
    manifest = job(
        "XGBoostTrainingJob",
        {
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": make_template(make_container("xgboost"))},
                {"type": "master", "template": make_template(make_container("xgboost", ports=ports))},
            ]
        },
    )
    sim = Sim(manifest)
    sim.step()
    assert env_of(sim.pod("demo-master-0"), "xgboost") == {
        "MASTER_ADDR": "demo-master-0",
        "MASTER_PORT": port,
        "RANK": "0",
        "WORLD_SIZE": "3",
        "PYTHONUNBUFFERED": "1",
    }
    assert env_of(sim.pod("demo-worker-1"), "xgboost")["RANK"] == "2"
    run_to_running(sim)
    sim.finish("demo-master-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"


# -- MPIJob -----------------------------------------------------------------------------------------


MPI_DOCUMENTED = {
    "worker": {
        "replicas": 2,
        "cmd": ["./hello"],
        "extraMPIArgs": ["-N", "2", "--allow-run-as-root"],
        "processesPerWorker": 3,
        "processRecovery": {"enable": True, "limit": 100},
        "template": make_template(make_container("mpi-worker", command=["ignored"])),
    },
    "mca": {"btl": "^openib", "pml": "ob1"},
    "mpiHome": "/usr/local/openmpi",
    "ssh": {"sshAuthMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
}
MPI_NEW = {
    "mpiConfig": {
        "mca": {"btl": "^openib", "pml": "ob1"},
        "home": "/usr/local/openmpi",
        "extraArgs": ["-N", "2", "--allow-run-as-root"],
        "script": ["./hello"],
    },
    "replicaSpecs": [
        {
            "type": "worker",
            "replicas": 2,
            "template": make_template(make_container("worker", command=["ignored"])),
        },
        {"type": "launcher", "template": {}},
    ],
}


@pytest.mark.parametrize("spec", [MPI_DOCUMENTED, MPI_NEW], ids=["documented", "replicaSpecs"])
def test_mpi_objects_and_launcher_after_workers(spec):
    sim = Sim(job("MPIJob", spec))
    decision = sim.step()
    assert [a.obj["kind"] for a in decision.actions if isinstance(a, Create)][:2] == ["Secret", "ConfigMap"]
    secret = sim.objects[("Secret", "demo-ssh")]
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert base64.b64decode(secret["data"]["ssh-publickey"]).decode() == "ssh-ed25519 TEST t9k"
    assert "StrictHostKeyChecking no" in base64.b64decode(secret["data"]["config"]).decode()
    slots = "3" if "worker" in spec else "1"
    assert sim.objects[("ConfigMap", "demo-hostfile")]["data"] == {
        "hostfile": f"demo-worker-0 slots={slots}\ndemo-worker-1 slots={slots}\n"
    }
    assert sim.kinds("Pod") == ["demo-worker-0", "demo-worker-1"]  # no launcher yet
    wname = "mpi-worker" if "worker" in spec else "worker"
    worker = main(sim.pod("demo-worker-0"), wname)
    assert worker["command"] == ["/usr/sbin/sshd", "-D", "-e"] and "args" not in worker
    assert {"name": "t9k-ssh", "mountPath": "/root/.ssh", "readOnly": True} in worker["volumeMounts"]
    sim.step()
    assert ("Pod", "demo-launcher") not in sim.objects
    sim.run_all()
    sim.step()
    launcher = sim.pod("demo-launcher")
    lmain = launcher["spec"]["containers"][0]
    expected = [
        "mpirun",
        "--hostfile",
        "/etc/mpi/hostfile",
        "--prefix",
        "/usr/local/openmpi",
        "-mca",
        "btl",
        "^openib",
        "-mca",
        "pml",
        "ob1",
    ]
    if "worker" in spec:
        expected += ["--enable-recovery", "--max-restarts", "100"]
    assert lmain["command"] == [*expected, "-N", "2", "--allow-run-as-root", "./hello"]
    assert env_of(launcher)["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert {
        "name": "t9k-hostfile",
        "mountPath": "/etc/mpi/hostfile",
        "subPath": "hostfile",
        "readOnly": True,
    } in lmain["volumeMounts"]
    assert launcher["spec"]["initContainers"][0]["command"][-2:] == ["demo-worker-0:22", "demo-worker-1:22"]
    assert sim.kinds("Service") == ["demo-worker-0", "demo-worker-1"]


def test_mpi_succeeds_with_launcher_and_cleans_workers_only():
    spec = {**MPI_DOCUMENTED, "runPolicy": {"cleanUpWorkers": True}}
    sim = Sim(job("MPIJob", spec))
    run_to_running(sim)
    assert sim.status["phase"] == "Running"
    sim.finish("demo-launcher")
    sim.step()
    assert sim.status["phase"] == "Succeeded"
    assert "mpirun exited 0" in sim.cond("Completed")["message"]
    sim.step()
    assert sim.kinds("Pod") == ["demo-launcher"]


def test_mpi_launcher_failure_fails_the_job():
    sim = Sim(job("MPIJob", MPI_DOCUMENTED))
    run_to_running(sim)
    sim.finish("demo-launcher", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Failed"


def test_mpi_gang_counts_workers_only_and_debug_commands():
    spec = {
        **MPI_DOCUMENTED,
        "scheduler": {"t9kScheduler": {"queue": "q"}},
        "runMode": {"debug": {"enabled": True}},
    }
    sim = Sim(job("MPIJob", spec))
    run_to_running(sim)
    assert sim.objects[("PodGroup", "demo")]["spec"]["minMember"] == 2
    assert main(sim.pod("demo-worker-0"), "mpi-worker")["command"] == ["/usr/sbin/sshd", "-D"]
    assert sim.pod("demo-launcher")["spec"]["containers"][0]["command"] == ["sleep", "inf"]
    assert sim.pod("demo-launcher")["metadata"]["labels"]["scheduler.tensorstack.dev/role"] == "launcher"


def test_ssh_secret_is_created_once_and_never_rotated():
    sim = Sim(job("MPIJob", MPI_DOCUMENTED))
    run_to_running(sim)
    before = sim.objects[("Secret", "demo-ssh")]
    assert not any(isinstance(a, Create) and a.obj["kind"] == "Secret" for a in sim.decide().actions)
    assert sim.objects[("Secret", "demo-ssh")] is before


def test_generated_keypair_is_a_valid_openssh_pair():
    private, public = generate_keypair()
    key = load_ssh_private_key(private.encode(), password=None)
    assert public.startswith("ssh-ed25519 ")
    assert load_ssh_public_key(public.encode()).public_bytes_raw() == key.public_key().public_bytes_raw()
    assert generate_keypair() != (private, public)


# -- ColossalAIJob ----------------------------------------------------------------------------------


COLOSSAL_DOCUMENTED = {
    "ssh": {"authMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
    "launcher": {"image": "hpcaitech/colossalai:0.3.0", "workingDir": "/workspace", "env": []},
    "worker": {
        "replicas": 2,
        "procPerWorker": 2,
        "command": ["train.py", "arg1"],
        "torchArgs": ["--max_restarts=2"],
        "template": make_template(make_container("worker", command=["ignored"])),
    },
}
COLOSSAL_NEW = {
    "torchConfig": {"procPerWorker": 2, "script": ["train.py", "arg1"], "extraArgs": ["--max_restarts", "2"]},
    "replicaSpecs": [
        {"type": "launcher", "template": make_template(make_container("launcher"))},
        {"type": "worker", "replicas": 2, "template": make_template(make_container("worker"))},
    ],
}


@pytest.mark.parametrize("spec", [COLOSSAL_DOCUMENTED, COLOSSAL_NEW], ids=["documented", "replicaSpecs"])
def test_colossalai_launcher_command(spec):
    sim = Sim(job("ColossalAIJob", spec))
    run_to_running(sim)
    launcher = sim.pod("demo-launcher")["spec"]["containers"][0]
    assert launcher["name"] == "launcher"
    assert launcher["command"] == [
        "colossalai",
        "run",
        "--hostfile",
        "/etc/colossalai/hostfile",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "demo-worker-0",
        "--master_port",
        "29500",
        "--extra_launch_args",
        "max_restarts=2",
        "train.py",
        "arg1",
    ]
    assert sim.objects[("ConfigMap", "demo-hostfile")]["data"] == {
        "hostfile": "demo-worker-0\ndemo-worker-1\n"
    }
    sim.finish("demo-launcher")
    sim.step()
    assert sim.status["phase"] == "Succeeded" and "read its log" in sim.cond("Completed")["message"]


def test_extra_launch_args_forms():
    assert extra_launch_args(["--a=1", "--b", "2", "--flag"]) == ["--extra_launch_args", "a=1,b=2,flag"]
    assert extra_launch_args([]) == []


def session_env_dir(pod: dict, cname: str) -> str:
    """Where the container mounts a pod-private in-memory emptyDir (the session environment's home)."""
    memory = {
        v["name"] for v in pod["spec"]["volumes"] if (v.get("emptyDir") or {}).get("medium") == "Memory"
    }
    (path,) = [m["mountPath"] for m in main(pod, cname).get("volumeMounts") or [] if m["name"] in memory]
    return path


def assert_kubelet_keeps(command: list[str]) -> None:
    """The kubelet expands `$(VAR)` and turns `$$` into `$` in commands: the scripts use neither."""
    assert all(expand(arg, lambda _: "EXPANDED") == arg for arg in command), command


def assert_sshd_sources(args: list[str], env_file: str) -> None:
    """sshd options that make every session source `env_file`, then run the client's command."""
    (force,) = [a.removeprefix("ForceCommand=") for a in args if a.startswith("ForceCommand=")]
    assert force.startswith(f". {env_file};") and 'eval "$SSH_ORIGINAL_COMMAND"' in force


@pytest.mark.parametrize("spec", [COLOSSAL_DOCUMENTED, COLOSSAL_NEW], ids=["documented", "replicaSpecs"])
def test_colossalai_workers_write_their_env_for_ssh_sessions(spec):
    """`colossalai run` starts the training in SSH sessions, which sshd gives a fresh environment: each
    worker snapshots its container's env (Kubernetes resolved its valueFrom entries) into a pod-private
    in-memory volume before sshd starts, and sshd's ForceCommand sources it in every session."""
    secret_env = {
        "name": "ENV_REFERENCED",
        "valueFrom": {"secretKeyRef": {"name": "secret-name", "key": "k"}},
    }
    spec = json.loads(json.dumps(spec))
    workers = spec["worker"] if "worker" in spec else spec["replicaSpecs"][1]
    workers["template"]["spec"]["containers"][0]["env"] = [{"name": "ENV_DIRECT", "value": "v"}, secret_env]
    sim = Sim(job("ColossalAIJob", spec))
    run_to_running(sim)
    for name in ("demo-worker-0", "demo-worker-1"):
        pod = sim.pod(name)
        worker = main(pod, "worker")
        env_file = f"{session_env_dir(pod, 'worker')}/environment"
        sh, c, script, _, *sshd = worker["command"]
        assert (sh, c) == ("sh", "-c") and sshd[:3] == ["/usr/sbin/sshd", "-D", "-e"]
        assert script.startswith("(umask 077 && awk ") and script.endswith(f'{env_file} && exec "$@"')
        assert_sshd_sources(sshd[3:], env_file)
        assert_kubelet_keeps(worker["command"])
        # the Secret stays a reference for Kubernetes to resolve: its value is never in an object
        assert worker["env"] == [{"name": "ENV_DIRECT", "value": "v"}, secret_env]
    launcher = sim.pod("demo-launcher")
    assert main(launcher, "launcher")["command"][:2] == ["colossalai", "run"]
    assert not any("emptyDir" in v for v in launcher["spec"]["volumes"])


def test_mpi_workers_run_plain_sshd():
    sim = Sim(job("MPIJob", MPI_DOCUMENTED))
    run_to_running(sim)
    worker = sim.pod("demo-worker-0")
    assert worker["spec"]["containers"][0]["command"][:2] != ["sh", "-c"]
    assert not any("emptyDir" in v for v in worker["spec"]["volumes"])


# -- DeepSpeedJob -----------------------------------------------------------------------------------


def deepspeed(config: dict, **spec: object) -> dict:
    worker = make_container(
        "worker",
        command=["ignored"],
        env=[
            {"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
    )
    return job(
        "DeepSpeedJob",
        {"worker": {"replicas": 3, "template": make_template(worker)}, "config": config, **spec},
    )


@pytest.mark.parametrize(
    ("config", "args"),
    [
        (
            {"run": {"python": ["train.py", "--deepspeed"]}, "slotsPerWorker": 2},
            ["--hostfile=/t9k/hostfile", "--master_addr=demo-worker-0", "train.py", "--deepspeed"],
        ),
        (
            {
                "run": {"module": ["pkg.train"]},
                "localRank": False,
                "autotune": "tune",
                "otherArgs": ["--num_gpus=1"],
            },
            [
                "--hostfile=/t9k/hostfile",
                "--master_addr=demo-worker-0",
                "--no_local_rank",
                "--autotuning=tune",
                "--module",
                "--num_gpus=1",
                "pkg.train",
            ],
        ),
        (
            {"run": {"exec": "bash run.sh"}, "otherArgs": ["--master_addr=10.0.0.1"]},
            ["--hostfile=/t9k/hostfile", "--no_python", "--master_addr=10.0.0.1", "bash run.sh"],
        ),
    ],
)
def test_deepspeed_launcher_command(config, args):
    sim = Sim(deepspeed(config))
    sim.step()
    sim.step()
    w0 = main(sim.pod("demo-worker-0"), "worker")
    assert w0["command"][:2] == ["sh", "-c"] and w0["command"][3:] == ["deepspeed", *args]
    assert w0["command"][2].endswith('&& exec deepspeed "$@"')
    assert main(sim.pod("demo-worker-2"), "worker")["command"][4:7] == ["/usr/sbin/sshd", "-D", "-e"]
    mounts = {m["mountPath"] for m in w0["volumeMounts"]}
    assert {"/root/.ssh", "/t9k/hostfile", "/root/.deepspeed_env"} <= mounts
    assert init_names(sim.pod("demo-worker-0")) == [WAIT_CONTAINER_NAME]
    assert init_names(sim.pod("demo-worker-1")) == []


def test_deepspeed_files_and_custom_command():
    sim = Sim(deepspeed({"customCommand": "deepspeed --hostfile /t9k/hostfile t.py", "slotsPerWorker": 4}))
    sim.step()
    data = sim.objects[("ConfigMap", "demo-hostfile")]["data"]
    assert data["hostfile"] == "".join(f"demo-worker-{i} slots=4\n" for i in range(3))
    assert data["deepspeed_env"] == "NCCL_DEBUG=INFO\n"
    sim.step()
    (sh, c, script) = main(sim.pod("demo-worker-0"), "worker")["command"]
    assert (sh, c) == ("sh", "-c") and script.endswith("&& deepspeed --hostfile /t9k/hostfile t.py")
    assert "/usr/sbin/sshd -o 'ForceCommand=" in script
    disabled = Sim(deepspeed({"run": {"python": ["t.py"]}}, disableCustomEnv=True))
    disabled.step()
    assert disabled.objects[("ConfigMap", "demo-hostfile")]["data"]["deepspeed_env"] == ""


def test_deepspeed_worker0_decides_and_elastic_resizes_the_hostfile():
    spec = {
        "elastic": {"enabled": True, "minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 4},
        "scheduler": {"t9kScheduler": {"queue": "q"}},
    }
    sim = Sim(deepspeed({"run": {"python": ["t.py"]}}, **spec))
    run_to_running(sim)
    assert len(sim.kinds("Pod")) == 4
    assert sim.objects[("PodGroup", "demo")]["spec"]["minMember"] == 2
    # DeepSpeed 0.19.8 has no --elastic_training (its launcher refuses the flag): resizes relaunch worker-0.
    command = main(sim.pod("demo-worker-0"), "worker")["command"]
    assert not [a for a in command if "elastic" in a], command
    sim.job["spec"]["elastic"]["expectedReplicas"] = 3
    sim.step()
    assert sim.objects[("ConfigMap", "demo-hostfile")]["data"]["hostfile"].count("\n") == 3
    assert len(sim.kinds("Pod")) == 2  # worker-3 removed; worker-0 relaunched on the 3 left
    run_to_running(sim)
    assert len(sim.kinds("Pod")) == 3
    sim.finish("demo-worker-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded" and sim.status["backoffCount"] == 0


def test_deepspeed_debug_runs_sshd():
    sim = Sim(deepspeed({"run": {"python": ["t.py"]}}, runMode={"debug": {"enabled": True}}))
    sim.step()
    sim.step()
    assert main(sim.pod("demo-worker-0"), "worker")["command"] == ["/usr/sbin/sshd", "-D"]


def worker_commands(sim: Sim) -> dict[str, list[str]]:
    return {name: main(pod, "worker")["command"] for name, pod in sorted(sim.pods().items())}


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        (
            [{"type": "master", "command": ["m"]}, {"type": "worker", "command": ["w"]}],
            {"demo-worker-0": ["m"], "demo-worker-1": ["w"], "demo-worker-2": ["w"]},
        ),
        (
            [{"type": "worker", "command": ["w"]}, {"type": "master", "command": ["m"]}],
            {"demo-worker-0": ["m"], "demo-worker-1": ["w"], "demo-worker-2": ["w"]},
        ),
        (
            [{"type": "master", "command": ["m"]}],
            {"demo-worker-0": ["m"], "demo-worker-1": ["/usr/sbin/sshd", "-D"]},
        ),
        (
            [{"type": "master"}, {"type": "worker", "command": ["w"]}],
            {"demo-worker-0": ["/usr/sbin/sshd", "-D"], "demo-worker-1": ["w"]},
        ),
        ([{"type": "worker", "command": ["w"]}], {"demo-worker-0": ["w"], "demo-worker-1": ["w"]}),
    ],
    ids=["master-and-worker", "worker-then-master", "master-only", "master-default", "worker-only"],
)
def test_deepspeed_debug_master_entry_is_worker_0(entries, expected):
    """03-deepspeedjob-api.md, ReplicaDebugSet.type: "one of master or worker". `master` is worker 0, the
    worker that runs the launcher: its entry wins over the `worker` entry there; the `worker` entry is the
    other workers' (worker 0's too without a `master` entry); a worker no entry names runs the default."""
    run_mode = {"debug": {"enabled": True, "replicaSpecs": entries}}
    sim = Sim(deepspeed({"run": {"python": ["t.py"]}}, runMode=run_mode))
    sim.step()
    sim.step()
    commands = worker_commands(sim)
    assert {name: commands[name] for name in expected} == expected


def test_deepspeed_resume_master_entry_is_worker_0():
    """03-deepspeedjob-api.md, ResumeSpec.type: "one of master or worker". After a pause, worker 0 (the
    launcher) restarts with the `master` entry, the other workers with the `worker` entry."""
    resume = [
        {"type": "master", "command": ["deepspeed"], "args": ["--hostfile=/t9k/hostfile", "resume.py"]},
        {"type": "worker", "skipInitContainer": True, "command": ["/usr/sbin/sshd", "-D"]},
    ]
    sim = Sim(
        deepspeed({"run": {"python": ["t.py"]}}, runMode={"pause": {"enabled": True, "resumeSpecs": resume}})
    )
    sim.step()
    assert sim.kinds("Pod") == []
    sim.job["spec"]["runMode"]["pause"]["enabled"] = False
    sim.step()
    sim.step()
    w0 = main(sim.pod("demo-worker-0"), "worker")
    assert (w0["command"], w0["args"]) == (["deepspeed"], ["--hostfile=/t9k/hostfile", "resume.py"])
    assert init_names(sim.pod("demo-worker-0")) == [WAIT_CONTAINER_NAME]  # the master entry keeps them
    for name in ("demo-worker-1", "demo-worker-2"):
        assert main(sim.pod(name), "worker")["command"] == ["/usr/sbin/sshd", "-D"]
    only_master = Sim(
        deepspeed(
            {"run": {"python": ["t.py"]}}, runMode={"pause": {"enabled": True, "resumeSpecs": resume[:1]}}
        )
    )
    only_master.step()
    only_master.job["spec"]["runMode"]["pause"]["enabled"] = False
    only_master.step()
    only_master.step()
    assert main(only_master.pod("demo-worker-0"), "worker")["command"] == ["deepspeed"]
    assert main(only_master.pod("demo-worker-1"), "worker")["command"][4:7] == ["/usr/sbin/sshd", "-D", "-e"]


#: Plain values DeepSpeed's launcher would mangle in .deepspeed_env (stripped, `$` expanded, pdsh's `%h`...).
MANGLED = {"DOLLAR": "a $b", "QUOTE": 'say "hi"', "PAD": " x ", "PCT": "50%h", "LINES": "a\nb", "B": "a\\b"}


def deepspeed_env_job(**spec: object) -> dict:
    manifest = deepspeed({"run": {"python": ["t.py"]}}, **spec)
    env = manifest["spec"]["worker"]["template"]["spec"]["containers"][0]["env"]
    env += [{"name": "OK", "value": "it's a;b"}, {"name": "my.var", "value": "x"}]
    env += [{"name": k, "value": v} for k, v in MANGLED.items()]
    env.append({"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    return manifest


def test_deepspeed_every_worker_writes_its_env_for_ssh_sessions():
    """The ranks run in SSH sessions (pdsh from worker-0, to every worker including itself): each worker
    snapshots its own container's env before its sshd starts, so valueFrom entries (a Secret, the pod's
    own name) reach its ranks; .deepspeed_env (exported on every node from worker-0's copy) keeps only the
    plain values it carries unchanged, and never a Secret."""
    sim = Sim(deepspeed_env_job())
    sim.step()
    sim.step()
    data = sim.objects[("ConfigMap", "demo-hostfile")]["data"]
    assert data["deepspeed_env"] == "NCCL_DEBUG=INFO\nOK=it's a;b\n"
    w0_pod = sim.pod("demo-worker-0")
    w0 = main(w0_pod, "worker")
    env_file = f"{session_env_dir(w0_pod, 'worker')}/environment"
    script = w0["command"][2]
    snapshot, sshd, launch = script.split(" && ")[-3:]
    assert script.startswith("(umask 077 && awk ") and snapshot.endswith(env_file)
    assert sshd.startswith("/usr/sbin/sshd -o 'ForceCommand=") and launch == 'exec deepspeed "$@"'
    assert_sshd_sources(shlex.split(sshd)[1:], env_file)
    assert_kubelet_keeps(w0["command"])
    for i in (1, 2):
        pod = sim.pod(f"demo-worker-{i}")
        sh, c, script, _, *sshd_argv = main(pod, "worker")["command"]
        env_file = f"{session_env_dir(pod, 'worker')}/environment"
        assert (sh, c, sshd_argv[:3]) == ("sh", "-c", ["/usr/sbin/sshd", "-D", "-e"])
        assert script.endswith(f'{env_file} && exec "$@"')
        assert_sshd_sources(sshd_argv[3:], env_file)
        secret = {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
        assert secret in main(pod, "worker")["env"]


def test_deepspeed_disable_custom_env_carries_no_env():
    sim = Sim(deepspeed_env_job(disableCustomEnv=True))
    sim.step()
    sim.step()
    assert sim.objects[("ConfigMap", "demo-hostfile")]["data"]["deepspeed_env"] == ""
    w0, w1 = sim.pod("demo-worker-0"), sim.pod("demo-worker-1")
    assert main(w0, "worker")["command"][:3] == ["sh", "-c", '/usr/sbin/sshd && exec deepspeed "$@"']
    assert main(w1, "worker")["command"] == ["/usr/sbin/sshd", "-D", "-e"]
    assert not any("emptyDir" in v for v in w0["spec"]["volumes"] + w1["spec"]["volumes"])


# -- BeamJob ----------------------------------------------------------------------------------------


def beam(**spec: object) -> dict:
    return job(
        "BeamJob",
        {
            "flinkClusterTemplate": {"spec": {"flinkVersion": "1.10.1", "image": {"name": "flink:1.10.1"}}},
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                make_container(
                                    "submit",
                                    command=["python3", "-m", "apache_beam.examples.wordcount"],
                                    args=["--output=/tmp/o"],
                                )
                            ]
                        }
                    }
                }
            },
            **spec,
        },
    )


def test_beam_flinkcluster_then_submit_job_then_outcome():
    sim = Sim(beam(runPolicy={"cleanUpCluster": True}))
    sim.step()
    assert sim.status["phase"] == "Initializing"
    cluster = sim.objects[("FlinkCluster", "demo-flinkcluster")]
    assert cluster["apiVersion"] == "flinkoperator.k8s.io/v1beta1"
    assert cluster["spec"] == {"flinkVersion": "1.10.1", "image": {"name": "flink:1.10.1"}}
    assert cluster["metadata"]["ownerReferences"][0]["uid"] == "uid-demo"
    sim.step()
    assert sim.kinds("Job") == []  # the cluster is not running yet
    cluster["status"] = {"state": "Running", "components": {"job": {"id": "abc"}}}
    sim.step()
    batch = sim.objects[("Job", "demo-batchjob")]
    submit = batch["spec"]["template"]["spec"]["containers"][0]
    assert submit["args"] == [
        "--output=/tmp/o",
        "--runner=FlinkRunner",
        "--flink_master=demo-flinkcluster-jobmanager:8081",
    ]
    assert {"name": "FLINK_MASTER", "value": "demo-flinkcluster-jobmanager:8081"} in submit["env"]
    assert batch["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert sim.cond("ClusterRunning")["status"] == "True"
    batch["status"] = {"active": 1}
    sim.step()
    assert sim.status["phase"] == "Running" and sim.cond("JobRunning")["status"] == "True"
    assert sim.status["jobURL"] == "/t9k/flink-cluster/demo-flinkcluster/namespace/ns/#/job/abc/overview/"
    batch["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    decision = sim.step()
    assert sim.status["phase"] == "Succeeded" and decision.actions == []
    sim.step()
    assert sim.kinds("FlinkCluster") == [] and sim.kinds("Job") == ["demo-batchjob"]


def test_beam_failed_submit_job_fails_and_keeps_cluster_by_default():
    sim = Sim(beam())
    sim.step()
    sim.objects[("FlinkCluster", "demo-flinkcluster")]["status"] = {"state": "Running"}
    sim.step()
    sim.objects[("Job", "demo-batchjob")]["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    sim.step()
    sim.step()
    assert sim.status["phase"] == "Failed" and sim.cond("Failed")["status"] == "True"
    assert sim.kinds("FlinkCluster") == ["demo-flinkcluster"]


def test_beam_user_runner_options_are_kept():
    manifest = beam()
    manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] = [
        "--runner=PortableRunner",
        "--flink_master=elsewhere:8081",
    ]
    sim = Sim(manifest)
    sim.step()
    sim.objects[("FlinkCluster", "demo-flinkcluster")]["status"] = {"state": "Running"}
    sim.step()
    args = sim.objects[("Job", "demo-batchjob")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--runner=PortableRunner", "--flink_master=elsewhere:8081"]


# -- every kind -------------------------------------------------------------------------------------


EVERY_KIND = {
    "GenericJob": {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": make_template()}]},
    "PyTorchTrainingJob": pytorch()["spec"],
    "TensorFlowTrainingJob": tensorflow()["spec"],
    "XGBoostTrainingJob": {
        "replicaSpecs": [{"type": "master", "template": make_template(make_container("xgboost"))}]
    },
    "MPIJob": MPI_DOCUMENTED,
    "ColossalAIJob": COLOSSAL_DOCUMENTED,
    "DeepSpeedJob": deepspeed({"run": {"python": ["t.py"]}})["spec"],
    "BeamJob": beam()["spec"],
}


@pytest.mark.parametrize("kind", sorted(EVERY_KIND))
def test_every_child_is_owned_labelled_and_watched(kind):
    sim = Sim(job(kind, EVERY_KIND[kind]))
    run_to_running(sim)
    if kind == "BeamJob":
        sim.objects[("FlinkCluster", "demo-flinkcluster")]["status"] = {"state": "Running"}
        sim.step()
    declared = {(api, k) for api, k, _ in REGISTRY[KINDS[kind]].children}
    assert sim.objects
    for (k, name), obj in sim.objects.items():
        assert (obj["apiVersion"], k) in declared, (k, name)
        ref = obj["metadata"]["ownerReferences"]
        assert ref == [
            {
                "apiVersion": "batch.tensorstack.dev/v1beta1",
                "kind": kind,
                "name": "demo",
                "uid": "uid-demo",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert obj["metadata"]["labels"]["tensorstack.dev/owner-name"] == "demo"
        assert obj["metadata"]["namespace"] == "ns"
        if k == "Pod":
            assert obj["spec"]["restartPolicy"] == "Never"
    assert sim.already_exists == []


@pytest.mark.parametrize("kind", sorted(EVERY_KIND))
def test_every_kind_is_idempotent_when_nothing_changes(kind):
    sim = Sim(job(kind, EVERY_KIND[kind]))
    run_to_running(sim)
    settled = sim.settle()
    assert settled.actions == [] and sim.decide() == settled


@pytest.mark.parametrize("kind", ["PyTorchTrainingJob", "MPIJob", "DeepSpeedJob", "TensorFlowTrainingJob"])
def test_every_prefix_of_every_early_decision_converges(kind):
    """Crash after any prefix of the first decisions (status written or not): same objects, no duplicates."""

    def play(crash: tuple[int, int, bool] | None) -> Sim:
        sim = Sim(job(kind, EVERY_KIND[kind]))
        for step in range(6):
            if crash is not None and crash[0] == step:
                sim.step(write_status=crash[2], prefix=crash[1])
            else:
                sim.step()
            sim.run_all()
        sim.settle()
        return sim

    reference = Sim(job(kind, EVERY_KIND[kind]))
    points = []
    for step in range(6):
        decision = reference.step()
        points += [(step, k, w) for k in range(len(decision.actions)) for w in (True, False)]
        reference.run_all()
    clean = play(None)
    for point in points:
        crashed = play(point)
        assert crashed.already_exists == [], point
        assert sorted(crashed.objects) == sorted(clean.objects), point
        assert crashed.status["phase"] == clean.status["phase"], point


REPLICA_KINDS = sorted(k for k in EVERY_KIND if k != "BeamJob")
DEBUG_COMMANDS = {
    "GenericJob": {"demo-worker-0": ["sleep", "inf"]},
    "PyTorchTrainingJob": {"demo-worker-0": ["sleep", "inf"]},
    "TensorFlowTrainingJob": {"demo-chief-0": ["sleep", "inf"]},
    "XGBoostTrainingJob": {"demo-master-0": ["sleep", "inf"]},
    "MPIJob": {"demo-worker-0": ["/usr/sbin/sshd", "-D"], "demo-launcher": ["sleep", "inf"]},
    "ColossalAIJob": {"demo-worker-0": ["sleep", "inf"], "demo-launcher": ["sleep", "inf"]},
    "DeepSpeedJob": {"demo-worker-0": ["/usr/sbin/sshd", "-D"]},
}
TRAINING_CONTAINER = {
    "PyTorchTrainingJob": "pytorch",
    "TensorFlowTrainingJob": "tensorflow",
    "XGBoostTrainingJob": "xgboost",
    "MPIJob": "mpi-worker",
    "DeepSpeedJob": "worker",
    "ColossalAIJob": "worker",
}


def with_spec(kind: str, **extra: object) -> dict:
    return job(kind, {**EVERY_KIND[kind], **extra})


@pytest.mark.parametrize("kind", REPLICA_KINDS)
def test_every_kind_debug_mode(kind):
    sim = Sim(with_spec(kind, runMode={"debug": {"enabled": True}}))
    run_to_running(sim)
    for pod_name, command in DEBUG_COMMANDS[kind].items():
        pod = sim.pod(pod_name)
        cname = (
            "launcher"
            if pod_name.endswith("launcher") and kind == "ColossalAIJob"
            else TRAINING_CONTAINER.get(kind)
        )
        assert main(pod, cname or pod["spec"]["containers"][0]["name"])["command"] == command
    for name in sim.pods():
        sim.finish(name, exit_code=1)
    decision = sim.step()
    assert sim.status["phase"] == "Running" and not any(isinstance(a, Delete) for a in decision.actions)


def test_colossalai_debug_listing_only_the_worker_starts_no_training_on_the_launcher():
    """The seed's ColossalAIJob debug example 1 (02-colossalaijob.md, 调试模式): only ``worker`` is listed,
    and debug mode deploys the environment without starting training, so the launcher never runs
    ``colossalai run``."""
    debug = {
        "enabled": True,
        "replicaSpecs": [{"type": "worker", "skipInitContainer": True, "command": ["/usr/bin/sshd"]}],
    }
    sim = Sim(with_spec("ColossalAIJob", runMode={"debug": debug}))
    run_to_running(sim)
    assert main(sim.pod("demo-worker-0"), "worker")["command"] == ["/usr/bin/sshd"]
    launcher = main(sim.pod("demo-launcher"), "launcher")
    assert launcher["command"] == ["sleep", "inf"] and "args" not in launcher


@pytest.mark.parametrize("kind", REPLICA_KINDS)
def test_every_kind_pause_and_resume(kind):
    sim = Sim(with_spec(kind, runMode={"pause": {"enabled": False}}))
    run_to_running(sim)
    kept = {k: v for k, v in sim.objects.items() if k[0] != "Pod"}
    pods = sim.kinds("Pod")
    sim.job["spec"]["runMode"]["pause"]["enabled"] = True
    sim.step()
    assert sim.kinds("Pod") == [] and sim.status["phase"] == "Paused"
    assert {
        k: v for k, v in sim.objects.items() if k[0] != "Pod"
    } == kept  # services, secrets, configmaps stay
    sim.job["spec"]["runMode"]["pause"]["enabled"] = False
    run_to_running(sim)
    assert sim.kinds("Pod") == pods and sim.status["phase"] == "Running"
    assert sim.status.get("backoffCount", 0) == 0


@pytest.mark.parametrize("kind", REPLICA_KINDS)
def test_every_kind_t9k_scheduler(kind):
    sim = Sim(with_spec(kind, scheduler={"t9kScheduler": {"queue": "gpu", "priority": 7}}))
    first = sim.step()
    assert [a.obj["kind"] for a in first.actions if isinstance(a, Create) and a.obj["kind"] == "Pod"] == []
    assert sim.objects[("PodGroup", "demo")]["spec"]["queue"] == "gpu"
    run_to_running(sim)
    for pod in sim.pods().values():
        assert pod["spec"]["schedulerName"] == "t9k-scheduler"
        assert pod["metadata"]["labels"]["scheduler.tensorstack.dev/queue"] == "gpu"
        assert (
            pod["metadata"]["labels"]["scheduler.tensorstack.dev/role"]
            == pod["metadata"]["labels"]["batch.tensorstack.dev/replica-type"]
        )


@pytest.mark.parametrize(
    "kind", ["PyTorchTrainingJob", "TensorFlowTrainingJob", "XGBoostTrainingJob", "DeepSpeedJob"]
)
def test_every_training_kind_active_deadline(kind):
    spec = EVERY_KIND[kind]
    sim = Sim(job(kind, {**spec, "runPolicy": {"activeDeadlineSeconds": 30}}))
    run_to_running(sim)
    sim.advance(31)
    sim.step()
    assert sim.status["phase"] == "Failed" and sim.cond("Failed")["reason"] == "DeadlineExceeded"
    sim.step()
    assert sim.kinds("Pod") == []


# -- what the engine writes survives the CRD schema (a structural schema prunes unknown fields) -------------


def _pruned(value: object, schema: dict, path: str) -> list[str]:
    """Paths of `value` a structural schema would prune or reject by type."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(value, dict):
        assert schema.get("type") == "object", path
        props = schema.get("properties") or {}
        for key, item in value.items():
            if key not in props:
                out.append(f"{path}.{key}")
            else:
                out += _pruned(item, props[key], f"{path}.{key}")
    elif isinstance(value, list):
        assert schema.get("type") == "array", path
        for i, item in enumerate(value):
            out += _pruned(item, schema["items"], f"{path}[{i}]")
    else:
        expected = {str: "string", bool: "boolean", int: "integer"}[type(value)]
        assert schema.get("type") == expected or (expected == "integer" and schema.get("type") == "number"), (
            path
        )
        if "enum" in schema:
            assert value in schema["enum"], path
    return out


@pytest.mark.parametrize("kind", sorted(EVERY_KIND))
def test_written_status_is_kept_by_the_crd_schema(kind):
    from t9k_provider.jobs.crds import crd

    schema = crd(KINDS[kind])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    spec = dict(EVERY_KIND[kind])
    if kind in ("PyTorchTrainingJob", "TensorFlowTrainingJob"):
        spec["tensorboardSpec"] = {"image": "tb"}
    sim = Sim(job(kind, spec))
    statuses = []
    run_to_running(sim)
    if kind == "BeamJob":
        sim.objects[("FlinkCluster", "demo-flinkcluster")]["status"] = {
            "state": "Running",
            "components": {"job": {"id": "j1"}},
        }
        sim.step()
        sim.objects[("Job", "demo-batchjob")]["status"] = {"active": 1}
    else:
        first = sorted(sim.pods())[0]
        sim.set_pod(first, "Failed", exit_code=137)  # a restart: replacedUid, restartCount, backoffCount
    sim.step()
    statuses.append(sim.status)
    for name in sim.pods():
        sim.finish(name)
    if kind == "BeamJob":
        sim.objects[("Job", "demo-batchjob")]["status"] = {
            "conditions": [{"type": "Complete", "status": "True"}]
        }
    sim.step()
    statuses.append(sim.status)
    for status in statuses:
        assert _pruned(status, schema, "status") == []


# -- every child the engine creates is a well-formed Kubernetes object --------------------------------------

K8S_MODELS = {
    "Pod": "V1Pod",
    "Service": "V1Service",
    "ConfigMap": "V1ConfigMap",
    "Secret": "V1Secret",
    "Job": "V1Job",
}


class _Response:
    def __init__(self, body: dict) -> None:
        self.data = json.dumps(body)


@pytest.mark.parametrize("kind", sorted(EVERY_KIND))
def test_children_round_trip_through_the_kubernetes_models(kind):
    """A field name the Kubernetes API does not know would be dropped by the round trip."""
    from kubernetes.client import ApiClient

    api = ApiClient()
    sim = Sim(job(kind, EVERY_KIND[kind]))
    run_to_running(sim)
    if kind == "BeamJob":
        sim.objects[("FlinkCluster", "demo-flinkcluster")]["status"] = {"state": "Running"}
        sim.step()
    checked = 0
    for (k, _), obj in sim.objects.items():
        if k not in K8S_MODELS:
            continue
        body = {key: value for key, value in obj.items() if key != "status"}
        body["metadata"] = {key: value for key, value in body["metadata"].items() if key != "uid"}
        model = api.deserialize(_Response(body), K8S_MODELS[k])
        assert api.sanitize_for_serialization(model) == body
        checked += 1
    assert checked


def test_beam_cluster_that_stops_before_submission_fails_the_job():
    sim = Sim(beam())
    sim.step()
    sim.objects[("FlinkCluster", "demo-flinkcluster")]["status"] = {"state": "Stopped"}
    decision = sim.step()
    assert sim.status["phase"] == "Failed" and decision.actions == []
    assert sim.cond("Failed")["reason"] == "ClusterStopped"
    assert sim.cond("ClusterRunning") == {
        **sim.cond("ClusterRunning"),
        "status": "False",
        "reason": "Stopped",
    }
    assert sim.kinds("Job") == []


def test_beam_failure_names_why_the_cluster_stopped():
    sim = Sim(beam())
    sim.step()
    why = "java not found (install a Java 11+ runtime)"
    sim.objects[("FlinkCluster", "demo-flinkcluster")]["status"] = {
        "state": "Stopped",
        "conditions": [{"type": "Ready", "status": "False", "reason": "CannotRun", "message": why}],
    }
    sim.step()
    assert sim.status["phase"] == "Failed"
    message = sim.cond("Failed")["message"]
    assert message == f"The Flink cluster stopped before the pipeline was submitted: {why}"


def test_deepspeed_tasks_list_their_replicas_under_replica_status():
    """03-deepspeedjob-api.md, DeepSpeedJobStatus: `tasks[].replicaStatus[]`."""
    spec = {
        "config": {"run": {"python": ["train.py"]}},
        "worker": {"replicas": 2, "template": make_template(make_container("worker"))},
    }
    sim = Sim(job("DeepSpeedJob", spec))
    run_to_running(sim)
    (task,) = sim.status["tasks"]
    assert sorted(task) == ["replicaStatus", "restartCount", "type"]
    assert [r["name"] for r in task["replicaStatus"]] == ["demo-worker-0", "demo-worker-1"]


def test_colossalai_replicas_are_never_restarted():
    """02-colossalaijob.md, 重启机制: `colossalai run` cannot take a restarted pod back into training, so a
    failed replica is not restarted (the template's restartPolicy notwithstanding) and the job fails."""
    spec = {**COLOSSAL_DOCUMENTED, "worker": {**COLOSSAL_DOCUMENTED["worker"], "template": make_template(
        make_container("worker"), restartPolicy="OnFailure")}}  # fmt: skip
    sim = Sim(job("ColossalAIJob", spec))
    run_to_running(sim)
    first = sim.pod("demo-worker-1")["metadata"]["uid"]
    sim.finish("demo-worker-1", exit_code=1)
    decision = sim.step()
    assert not any(isinstance(a, Create) and a.obj["kind"] == "Pod" for a in decision.actions)
    assert sim.status["phase"] == "Failed" and sim.pod("demo-worker-1")["metadata"]["uid"] == first


@pytest.mark.parametrize("kind", ["GenericJob", "PyTorchTrainingJob", "MPIJob"])
def test_a_podgroup_past_its_queues_max_duration_ends_the_job_and_stops_its_replicas(kind):
    """The T9k scheduler marks a PodGroup that ran longer than its Queue's maxDuration (MaxDurationExceeded):
    the job fails with that reason and the queue's words, and every unfinished replica stops, as a deadline
    does (docs/controller.md#t9k-scheduler)."""
    sim = Sim(with_spec(kind, scheduler={"t9kScheduler": {"queue": "gpu", "priority": 7}}))
    run_to_running(sim)
    assert sim.status["phase"] == "Running"
    overran = {"type": "MaxDurationExceeded", "status": "True", "reason": "MaxDurationExceeded",
               "message": "ran longer than queue gpu's maxDuration (7200s)"}  # fmt: skip
    sim.objects[("PodGroup", "demo")]["status"] = {"conditions": [overran]}
    sim.step()
    assert sim.status["phase"] == "Failed"
    failed = sim.cond("Failed")
    assert failed["reason"] == "MaxDurationExceeded"
    assert failed["message"] == "The job ran longer than queue gpu's maxDuration (7200s)."
    sim.step()
    assert sim.kinds("Pod") == []
