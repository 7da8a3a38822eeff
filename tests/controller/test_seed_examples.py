"""Every example of the T9k seed documents (``../shared/seeds``), as written, reconciled on the local cluster
with the controller and checked against what the text beside it says; one test per example, named after its
document and section. The examples are the files of ``seed_examples/`` (its README says what was completed
and why).

Examples that run something (a command whose output or outcome the text describes) run on the process
kubelet; those the text describes by their objects (the ColossalAI and TensorFlow jobs, whose images hold
programs this machine lacks) on the simulated kubelet, where a test ends a replica with the
``t9k.local/simulate-exit-code`` annotation. Both clusters advertise room for every example (8 GPUs among
it). Every test works in a namespace of its own.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from t9k_provider.jobs import KINDS
from t9k_provider.testing import LocalCluster, wait_for
from tests.support.clusters import cluster_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

EXAMPLES = Path(__file__).parent / "seed_examples"
GROUP, VERSION = "batch.tensorstack.dev", "v1beta1"
ROOM = {"cpus": "64", "memory": "512Gi", "gpus": "8"}
EXIT_CODE = "t9k.local/simulate-exit-code"
NONE = dict.fromkeys(("creating", "deleted", "failed", "pending", "running", "succeeded", "unknown"), 0)

processes = cluster_fixture(controller=True, capacity=ROOM)
simulated = cluster_fixture(controller=True, kubelet="simulated", capacity=ROOM)


class Example:
    """One example's job in a namespace of its own, read through the ``kubernetes`` client."""

    def __init__(self, cluster: LocalCluster, file: str) -> None:
        self.api = cluster.api_client()
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.manifest = yaml.safe_load((EXAMPLES / file).read_text())
        self.kind, self.name = self.manifest["kind"], self.manifest["metadata"]["name"]
        self.plural = KINDS[self.kind].PLURAL
        self.ns = f"seed-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": self.ns}})

    def create(self) -> Example:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, self.plural, self.manifest)
        return self

    def job(self) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, self.plural, self.name)

    def status(self) -> dict[str, Any]:
        return self.job().get("status") or {}

    def patch(self, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, self.plural, self.name, {"spec": spec}
        )

    def wait(self, what: str, probe: Any, timeout: float = 60) -> Any:
        try:
            return wait_for(f"{self.kind} {self.name}: {what}", probe, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nstatus: {json.dumps(self.status(), indent=1)}") from None

    def wait_phase(self, *phases: str, timeout: float = 60) -> dict[str, Any]:
        return self.wait(f"phase in {phases}", lambda: self.status().get("phase") in phases and self.status())

    def phase_seen(self, since: str, *phases: str, timeout: int = 60) -> str:
        """The first of ``phases`` the job's watch shows after resourceVersion ``since``: a phase the job only
        passes through can be shorter than a poll (example 1's replicas fail at once where sshd is absent)."""
        stream = watch.Watch().stream(
            self.custom.list_namespaced_custom_object, GROUP, VERSION, self.ns, self.plural,
            resource_version=since, timeout_seconds=timeout,
        )  # fmt: skip
        seen = []
        for event in stream:
            seen.append(phase := (event["object"].get("status") or {}).get("phase"))
            if phase in phases:
                return str(phase)
        raise AssertionError(f"{self.kind} {self.name}: no phase in {phases} within {timeout}s; seen {seen}")

    def condition(self, ctype: str) -> dict[str, Any]:
        found = [c for c in self.status().get("conditions") or [] if c["type"] == ctype]
        assert found, f"no {ctype} condition in {self.status()}"
        return found[0]

    def pods(self) -> dict[str, client.V1Pod]:
        selector = f"tensorstack.dev/owner-name={self.name}"
        return {
            p.metadata.name: p for p in self.core.list_namespaced_pod(self.ns, label_selector=selector).items
        }

    def wait_pods(self, names: list[str], phase: str | None = None, timeout: float = 60) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            pods = self.pods()
            ready = sorted(pods) == sorted(names) and all(
                phase is None or p.status.phase == phase for p in pods.values()
            )
            return pods if ready else None

        return self.wait(f"pods {names} {phase or 'created'}", probe, timeout)

    def podgroup(self) -> dict[str, Any]:
        """The T9k Scheduler's PodGroup of the job (named after it)."""
        return self.custom.get_namespaced_custom_object(
            "scheduler.tensorstack.dev", "v1beta1", self.ns, "podgroups", self.name
        )

    def log(self, pod: str) -> str:
        return self.core.read_namespaced_pod_log(pod, self.ns, _preload_content=False).data.decode()

    def end_replica(self, pod: str, code: int) -> None:
        """On the simulated kubelet: the replica's containers exit with ``code``."""
        self.core.patch_namespaced_pod(pod, self.ns, {"metadata": {"annotations": {EXIT_CODE: str(code)}}})

    def delete(self) -> None:
        with contextlib.suppress(ApiException):
            self.core.delete_namespace(self.ns)


@pytest.fixture
def example(request: pytest.FixtureRequest) -> Iterator[Any]:
    """``example(file, cluster)``: the example's job (not yet created) in a fresh namespace."""
    made: list[Example] = []

    def make(file: str, cluster: LocalCluster) -> Example:
        made.append(Example(cluster, file))
        return made[-1]

    yield make
    for each in made:
        each.delete()


def workers(name: str, count: int, kind: str = "worker") -> list[str]:
    return [f"{name}-{kind}-{i}" for i in range(count)]


def container(pod: client.V1Pod, name: str | None = None) -> client.V1Container:
    return next(c for c in pod.spec.containers if name is None or c.name == name)


def runs(c: client.V1Container, program: str) -> bool:
    """Whether the container runs ``program``, directly or as the command a shell prelude ends with."""
    argv = [*(c.command or []), *(c.args or [])]
    return argv[:1] == [program] or any(program in arg.split() for arg in argv[1:])


# -- 01-genericjob.md ---------------------------------------------------------------------------------------


def test_genericjob_create(processes: LocalCluster, example: Any) -> None:
    """创建 GenericJob: four `worker` replicas, each running `sleep 365`; the rules are the job's."""
    job = example("01-genericjob--create.yaml", processes).create()
    pods = job.wait_pods(workers("generic-example", 4), "Running")
    assert all(container(p).command == ["sleep", "365"] for p in pods.values())
    job.wait_phase("Running")
    assert job.condition("Running")["status"] == "True"


def test_genericjob_resources(processes: LocalCluster, example: Any) -> None:
    """资源配置: every worker requests 2 CPUs and 2Gi and is limited to 4 CPUs and 4Gi."""
    job = example("01-genericjob--resources.yaml", processes).create()
    pods = job.wait_pods(workers("generic-example", 4), "Running")
    for pod in pods.values():
        resources = container(pod).resources
        assert resources.requests == {"cpu": "2", "memory": "2Gi"}
        assert resources.limits == {"cpu": "4", "memory": "4Gi"}


def test_genericjob_shared_memory(processes: LocalCluster, example: Any) -> None:
    """共享内存: the `dshm` volume (memory, at most 1Gi) is mounted at /dev/shm of every worker."""
    job = example("01-genericjob--shared-memory.yaml", processes).create()
    pods = job.wait_pods(workers("generic-example", 4), "Running")
    for name, pod in pods.items():
        volume = next(v for v in pod.spec.volumes if v.name == "dshm")
        assert volume.empty_dir.medium == "Memory" and volume.empty_dir.size_limit == "1Gi"
        assert ("dshm", "/dev/shm") in [(m.name, m.mount_path) for m in container(pod).volume_mounts]
        job.wait(f"{name} wrote and read /dev/shm", lambda n=name: "read: shared" in job.log(n), 30)


def test_genericjob_env(processes: LocalCluster, example: Any) -> None:
    """环境变量: ENV_DIRECT is `env-value`, ENV_REFERENCED the `key-in-secret` of Secret `secret-name`."""
    job = example("01-genericjob--env.yaml", processes)
    secret = {"metadata": {"name": "secret-name"}, "stringData": {"key-in-secret": "from the secret"}}
    job.core.create_namespaced_secret(job.ns, secret)
    job.create()
    expected = "ENV_DIRECT=env-value ENV_REFERENCED=from the secret"
    for name in workers("generic-example", 4):
        job.wait(f"{name} printed its env", lambda n=name: n in job.pods() and expected in job.log(n))


def test_genericjob_variables(processes: LocalCluster, example: Any) -> None:
    """变量替换: the example builds TF_CONFIG from `$(service.worker[i].host)` and `$(service.port[http])`,
    which the section makes available only when the replicas' service is exposed (`spec.service`), and the
    example has none: the job is refused at once with a message that says what to add."""
    job = example("01-genericjob--variables.yaml", processes).create()
    job.wait_phase("Failed")
    failed = job.condition("Failed")
    assert failed["reason"] == "InvalidSpec"
    assert "needs spec.service.ports" in failed["message"]
    assert "service: {ports: [{name: http" in failed["message"]
    assert job.pods() == {}


def test_genericjob_success_and_failure(processes: LocalCluster, example: Any) -> None:
    """成功和失败: any success rule met succeeds the job; here master 0 completes (the first rule)."""
    job = example("01-genericjob--success-and-failure.yaml", processes).create()
    status = job.wait_phase("Succeeded", "Failed")
    assert status["phase"] == "Succeeded", status
    assert job.condition("Completed")["status"] == "True"
    assert '{ "master": [0] }' in job.condition("Completed")["message"]


def test_genericjob_service(processes: LocalCluster, example: Any) -> None:
    """暴露副本的服务: each replica's service on port 2222, named `[job-name]-[type]-[rank]`."""
    job = example("01-genericjob--service.yaml", processes).create()
    job.wait_pods(["generic-example-worker-0"], "Running")
    service = job.core.read_namespaced_service("generic-example-worker-0", job.ns)
    assert [(p.name, p.port) for p in service.spec.ports] == [("http", 2222)]


def test_genericjob_scheduler(processes: LocalCluster, example: Any) -> None:
    """调度器: the replicas wait in the T9k Scheduler's `default` queue with priority 50."""
    job = example("01-genericjob--scheduler.yaml", processes).create()
    pods = job.wait_pods(workers("generic-example", 4), "Running")
    group = job.podgroup()
    assert group["spec"]["queue"] == "default" and group["spec"]["priority"] == 50
    assert all(p.spec.scheduler_name == "t9k-scheduler" for p in pods.values())


@pytest.mark.parametrize(
    ("number", "command", "init"),
    [(1, ["/usr/bin/sshd"], False), (2, ["sleep", "inf"], True)],
    ids=["example-1", "example-2"],
)
def test_genericjob_debug(
    processes: LocalCluster, example: Any, number: int, command: list, init: bool
) -> None:
    """调试模式: the environment is deployed but training does not start: example 1's workers skip their init
    containers and run /usr/bin/sshd, example 2's keep them and run `sleep inf`; the job never ends."""
    job = example(f"01-genericjob--debug--example-{number}.yaml", processes).create()
    pods = job.wait_pods(workers("generic-example", 4))
    for pod in pods.values():
        assert container(pod).command == command and not container(pod).args
        assert bool(pod.spec.init_containers) is init
    if init:
        job.wait_phase("Running")
    assert job.status().get("phase") not in ("Succeeded", "Failed")


@pytest.mark.parametrize(
    ("number", "command", "init"),
    [(1, ["/usr/bin/sshd"], False), (2, ["sleep", "365"], True)],
    ids=["example-1", "example-2"],
)
def test_genericjob_pause(
    processes: LocalCluster, example: Any, number: int, command: list, init: bool
) -> None:
    """暂停模式: a paused job has no replicas; resumed, example 1's workers skip their init containers and run
    /usr/bin/sshd, example 2's run the template's command."""
    job = example(f"01-genericjob--pause--example-{number}.yaml", processes).create()
    job.wait_phase("Paused")
    assert job.condition("Paused")["status"] == "True" and job.pods() == {}
    since = job.job()["metadata"]["resourceVersion"]
    job.patch({"runMode": {"pause": {"enabled": False}}})
    pods = job.wait_pods(workers("generic-example", 4))
    for pod in pods.values():
        assert container(pod).command == command
        assert bool(pod.spec.init_containers) is init
    job.phase_seen(since, "Resuming", "Running")
    assert job.condition("Paused")["status"] == "False"


def test_genericjob_status_conditions(processes: LocalCluster, example: Any) -> None:
    """GenericJob 的状态和阶段: children created (Initialized), then worker 0 fails: Failed with rule
    { "worker": [0] }, phase Failed."""
    job = example("01-genericjob--status-conditions.yaml", processes).create()
    status = job.wait_phase("Failed")
    assert job.condition("Initialized")["status"] == "True"
    failed = job.condition("Failed")
    assert (
        failed["status"] == "True" and failed["message"] == 'The job is failed with rule: { "worker": [0] }'
    )
    assert job.condition("Completed")["status"] == "False" and status["phase"] == "Failed"


def test_genericjob_status_tasks(processes: LocalCluster, example: Any) -> None:
    """副本的状态: `status.tasks[]` per type: its restarts and `status[]`, one entry per replica with its
    phase, pod name and uid."""
    job = example("01-genericjob--status-tasks.yaml", processes).create()
    pods = job.wait_pods(workers("generic-example", 2), "Running")

    def running() -> list[dict[str, Any]] | None:
        tasks = job.status().get("tasks") or []
        entries = tasks[0].get("status") if tasks else None
        return entries if entries and all(e.get("phase") == "Running" for e in entries) else None

    entries = job.wait("tasks[0].status[] Running", running)
    (task,) = job.status()["tasks"]
    assert task["type"] == "worker" and task["restartCount"] == 0
    assert [(e["name"], e["uid"]) for e in entries] == [(n, pods[n].metadata.uid) for n in sorted(pods)]


def test_genericjob_status_aggregate(processes: LocalCluster, example: Any) -> None:
    """副本状态统计: three replicas, one Pending and two Running."""
    job = example("01-genericjob--status-aggregate.yaml", processes).create()
    expected = {
        "creating": 0,
        "deleted": 0,
        "failed": 0,
        "pending": 1,
        "running": 2,
        "succeeded": 0,
        "unknown": 0,
    }
    job.wait("aggregate", lambda: job.status().get("aggregate") == expected)


# -- 02-colossalaijob.md ------------------------------------------------------------------------------------

COLOSSAL = "colossalai-example"


def colossal_running(job: Example, count: int) -> dict[str, client.V1Pod]:
    """The workers run sshd, then the launcher is created and runs."""
    return job.wait_pods([f"{COLOSSAL}-launcher", *workers(COLOSSAL, count)], "Running")


def test_colossalaijob_create(simulated: LocalCluster, example: Any) -> None:
    """创建 ColossalAIJob: one launcher and two workers; the workers run sshd (`spec.ssh.sshdPath`) and wait,
    the launcher starts `train.py arg1` with one process per worker; each worker holds its GPU."""
    job = example("02-colossalaijob--create.yaml", simulated).create()
    pods = colossal_running(job, 2)
    for name in workers(COLOSSAL, 2):
        worker = container(pods[name], "worker")
        assert runs(worker, "/usr/sbin/sshd") and worker.resources.limits["nvidia.com/gpu"] == "1"
    launcher = container(pods[f"{COLOSSAL}-launcher"])
    assert launcher.command[:2] == ["colossalai", "run"] and launcher.command[-2:] == ["train.py", "arg1"]
    assert launcher.command[launcher.command.index("--nproc_per_node") + 1] == "1"
    assert launcher.working_dir == "/workspace"
    assert launcher.resources.limits == {"cpu": "1", "memory": "2Gi"}
    hostfile = job.core.read_namespaced_config_map(f"{COLOSSAL}-hostfile", job.ns).data["hostfile"]
    assert hostfile.split() == workers(COLOSSAL, 2)
    job.wait_phase("Running")


def test_colossalaijob_resources(simulated: LocalCluster, example: Any) -> None:
    """资源配置: every worker requests 2 CPUs and 2Gi and is limited to 4 CPUs and 4Gi."""
    job = example("02-colossalaijob--resources.yaml", simulated).create()
    pods = colossal_running(job, 4)
    for name in workers(COLOSSAL, 4):
        resources = container(pods[name], "worker").resources
        assert resources.requests == {"cpu": "2", "memory": "2Gi"}
        assert resources.limits == {"cpu": "4", "memory": "4Gi"}


def test_colossalaijob_shared_memory(simulated: LocalCluster, example: Any) -> None:
    """共享内存: the `dshm` volume (memory, at most 1Gi) is mounted at /dev/shm of every worker."""
    job = example("02-colossalaijob--shared-memory.yaml", simulated).create()
    pods = colossal_running(job, 4)
    for name in workers(COLOSSAL, 4):
        dshm = next(v for v in pods[name].spec.volumes if v.name == "dshm")
        assert dshm.empty_dir.medium == "Memory" and dshm.empty_dir.size_limit == "1Gi"
        mounts = {m.name: m.mount_path for m in container(pods[name], "worker").volume_mounts}
        assert mounts["dshm"] == "/dev/shm"


def test_colossalaijob_env(simulated: LocalCluster, example: Any) -> None:
    """环境变量: ENV_DIRECT is `env-value`, ENV_REFERENCED the `key-in-secret` of Secret `secret-name`, on
    every worker."""
    job = example("02-colossalaijob--env.yaml", simulated)
    secret = {"metadata": {"name": "secret-name"}, "stringData": {"key-in-secret": "from the secret"}}
    job.core.create_namespaced_secret(job.ns, secret)
    pods = colossal_running(job.create(), 4)
    for name in workers(COLOSSAL, 4):
        env = {e.name: e for e in container(pods[name], "worker").env}
        assert env["ENV_DIRECT"].value == "env-value"
        ref = env["ENV_REFERENCED"].value_from.secret_key_ref
        assert (ref.name, ref.key) == ("secret-name", "key-in-secret")


def test_colossalaijob_cleanup(simulated: LocalCluster, example: Any) -> None:
    """清除策略: with `cleanUpWorkers`, the workers are deleted once training ends; the launcher is kept (its
    log says how training went)."""
    job = example("02-colossalaijob--cleanup.yaml", simulated).create()
    colossal_running(job, 2)
    job.end_replica(f"{COLOSSAL}-launcher", 0)
    job.wait_phase("Succeeded")
    job.wait("workers deleted", lambda: sorted(job.pods()) == [f"{COLOSSAL}-launcher"])


def test_colossalaijob_scheduler(simulated: LocalCluster, example: Any) -> None:
    """调度器: the workers wait in the T9k Scheduler's `default` queue with priority 50."""
    job = example("02-colossalaijob--scheduler.yaml", simulated).create()
    colossal_running(job, 2)
    group = job.podgroup()
    assert group["spec"]["queue"] == "default" and group["spec"]["priority"] == 50


@pytest.mark.parametrize(
    ("number", "worker_command"),
    [(1, ["/usr/bin/sshd"]), (2, ["sleep", "inf"])],
    ids=["example-1", "example-2"],
)
def test_colossalaijob_debug(
    simulated: LocalCluster, example: Any, number: int, worker_command: list
) -> None:
    """调试模式: the environment is deployed but training does not start: the workers run the debug command
    (example 1's /usr/bin/sshd, example 2's default `sleep inf`) and the launcher never runs
    `colossalai run`."""
    job = example(f"02-colossalaijob--debug--example-{number}.yaml", simulated).create()
    pods = colossal_running(job, 2)
    for name in workers(COLOSSAL, 2):
        assert container(pods[name], "worker").command == worker_command
    assert container(pods[f"{COLOSSAL}-launcher"]).command == ["sleep", "inf"]
    job.wait_phase("Running")


@pytest.mark.parametrize(
    ("number", "sshd"), [(1, "/usr/bin/sshd"), (2, "/usr/sbin/sshd")], ids=["example-1", "example-2"]
)
def test_colossalaijob_pause(simulated: LocalCluster, example: Any, number: int, sshd: str) -> None:
    """暂停模式: a paused job has no replicas; resumed, the workers run example 1's resume command
    (/usr/bin/sshd) or, in example 2, their usual sshd."""
    job = example(f"02-colossalaijob--pause--example-{number}.yaml", simulated).create()
    job.wait_phase("Paused")
    assert job.pods() == {}
    job.patch({"runMode": {"pause": {"enabled": False}}})
    pods = colossal_running(job, 2)
    for name in workers(COLOSSAL, 2):
        assert runs(container(pods[name], "worker"), sshd)
    job.wait_phase("Running")


def test_colossalaijob_status_conditions(simulated: LocalCluster, example: Any) -> None:
    """ColossalAIJob 的状态和阶段: the launcher exits with an error code: Failed ("The job exited with an
    error code."), Completed False, phase Failed."""
    job = example("02-colossalaijob--status-conditions.yaml", simulated).create()
    colossal_running(job, 2)
    job.end_replica(f"{COLOSSAL}-launcher", 1)
    job.wait_phase("Failed")
    assert job.condition("Initialized")["status"] == "True"
    failed = job.condition("Failed")
    assert failed["status"] == "True" and failed["message"] == "The job exited with an error code."
    assert job.condition("Completed")["status"] == "False"


def test_colossalaijob_status_tasks(simulated: LocalCluster, example: Any) -> None:
    """副本的状态: `status.tasks[]` for the launcher and the workers, each with `status[]` entries (phase, pod
    name, uid)."""
    job = example("02-colossalaijob--status-tasks.yaml", simulated).create()
    pods = colossal_running(job, 2)

    def all_running() -> dict[str, list[dict[str, Any]]] | None:
        tasks = {t["type"]: t.get("status") or [] for t in job.status().get("tasks") or []}
        entries = [e for each in tasks.values() for e in each]
        return tasks if len(entries) == 3 and all(e.get("phase") == "Running" for e in entries) else None

    tasks = job.wait("every replica Running in tasks[].status[]", all_running)
    assert [e["name"] for e in tasks["launcher"]] == [f"{COLOSSAL}-launcher"]
    assert [(e["name"], e["uid"]) for e in tasks["worker"]] == [
        (n, pods[n].metadata.uid) for n in workers(COLOSSAL, 2)
    ]


def test_colossalaijob_status_aggregate(simulated: LocalCluster, example: Any) -> None:
    """副本状态统计: three replicas, one Pending (the launcher) and two Running."""
    job = example("02-colossalaijob--status-aggregate.yaml", simulated).create()
    expected = {
        "creating": 0,
        "deleted": 0,
        "failed": 0,
        "pending": 1,
        "running": 2,
        "succeeded": 0,
        "unknown": 0,
    }
    job.wait("aggregate", lambda: job.status().get("aggregate") == expected)


# -- 04-tensorflowtrainingjob.md ----------------------------------------------------------------------------

TENSORFLOW = "tensorflow-example"


def test_tensorflowtrainingjob_create(simulated: LocalCluster, example: Any) -> None:
    """创建 TensorFlowTrainingJob: four workers run `python dist_mnist.py` with TF_CONFIG; a failed replica is
    restarted (`restartPolicy: OnFailure`)."""
    job = example("04-tensorflowtrainingjob--create.yaml", simulated).create()
    names = workers(TENSORFLOW, 4)
    pods = job.wait_pods(names, "Running")
    for index, name in enumerate(names):
        main = container(pods[name], "tensorflow")
        assert main.command == ["python", "dist_mnist.py"]
        tf_config = json.loads(next(e.value for e in main.env if e.name == "TF_CONFIG"))
        assert tf_config["task"] == {"type": "worker", "index": index}
        assert [h.split(":")[0] for h in tf_config["cluster"]["worker"]] == names
    job.wait_phase("Running")
    first = pods[names[1]].metadata.uid
    job.end_replica(names[1], 1)

    def restarted() -> bool:
        pod = job.pods().get(names[1])
        return pod is not None and pod.metadata.uid != first and pod.status.phase == "Running"

    job.wait("worker 1 restarted", restarted)
    assert job.status()["phase"] == "Running"


def test_tensorflowtrainingjob_scheduler(simulated: LocalCluster, example: Any) -> None:
    """调度器: the replicas wait in the T9k Scheduler's `default` queue with priority 50."""
    job = example("04-tensorflowtrainingjob--scheduler.yaml", simulated).create()
    job.wait_pods(workers(TENSORFLOW, 4), "Running")
    group = job.podgroup()
    assert group["spec"]["queue"] == "default" and group["spec"]["priority"] == 50


def test_tensorflowtrainingjob_tensorboard(simulated: LocalCluster, example: Any) -> None:
    """TensorBoard 的使用: a TensorBoard with image t9kpublic/tensorboard:2.11.0 shows the PVC's /log."""
    job = example("04-tensorflowtrainingjob--tensorboard.yaml", simulated).create()
    job.wait_pods(workers(TENSORFLOW, 4), "Running")
    board = job.wait(
        "its TensorBoard",
        lambda: _get_or_none(job, "tensorstack.dev", "v1beta1", "tensorboards", TENSORFLOW),
    )
    assert board["spec"]["image"] == "t9kpublic/tensorboard:2.11.0"
    assert board["spec"]["trainingLogFilesets"] == ["t9k://pvc/tensorflow-tensorboard-pvc/log"]


def _get_or_none(job: Example, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
    try:
        return job.custom.get_namespaced_custom_object(group, version, job.ns, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_every_example_has_its_test() -> None:
    """One test per example file: a new example without a test fails here."""
    tested = {
        f"{stem}.yaml"
        for stem in (
            "01-genericjob--create", "01-genericjob--resources", "01-genericjob--shared-memory",
            "01-genericjob--env", "01-genericjob--variables", "01-genericjob--success-and-failure",
            "01-genericjob--service", "01-genericjob--scheduler", "01-genericjob--debug--example-1",
            "01-genericjob--debug--example-2", "01-genericjob--pause--example-1",
            "01-genericjob--pause--example-2", "01-genericjob--status-conditions",
            "01-genericjob--status-tasks", "01-genericjob--status-aggregate",
            "02-colossalaijob--create", "02-colossalaijob--resources", "02-colossalaijob--shared-memory",
            "02-colossalaijob--env", "02-colossalaijob--cleanup", "02-colossalaijob--scheduler",
            "02-colossalaijob--debug--example-1", "02-colossalaijob--debug--example-2",
            "02-colossalaijob--pause--example-1", "02-colossalaijob--pause--example-2",
            "02-colossalaijob--status-conditions", "02-colossalaijob--status-tasks",
            "02-colossalaijob--status-aggregate", "04-tensorflowtrainingjob--create",
            "04-tensorflowtrainingjob--scheduler", "04-tensorflowtrainingjob--tensorboard",
        )
    }  # fmt: skip
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == tested
