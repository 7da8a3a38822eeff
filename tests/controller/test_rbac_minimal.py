"""The shipped RBAC (deploy/rbac, docs/install.md#rbac-what-each-rule-is-for) is sufficient and minimal for
the controller.

The controller runs as a host process authenticated as the ServiceAccount ``t9k-system/t9k-controller`` (a
TokenRequest token in a kubeconfig), under the roles of ``deploy/rbac`` applied through the real client; the
YAML is the only source of the rules. The local API server enforces RBAC for ServiceAccounts and reads the
roles on every request, so swapping a role takes effect at once.

Granularity: a granule is one (role, apiGroup, resource, verb) the shipped roles grant, the unit the
authorizer decides on. A whole rule would be too coarse: the rule for pods, services, configmaps and secrets
stays needed as long as one of its grants is, so an unneeded verb on one resource would hide in it.

- ``test_shipped_roles_run_every_scenario``: with the roles as shipped, every scenario passes (every kind to
  success, cleanup, companions kept in sync, names taken by others, status conflicts), no request is refused
  (sufficiency), and the requests made cover every granule: one no scenario uses fails here (minimality).
- ``test_removing_*_granule_surfaces_a_403``: for each granule, the roles without it and the scenario that
  needs it (``needs``; a granule without one fails); the 403 must show in the controller's log (the server's
  ``cannot <verb> resource ...`` message) and in ``t9k_controller_api_requests_total{code="403"}``.

Informer (list, watch) and Lease granules need a fresh controller; the others share one controller and a
namespace per case, so the whole module takes a few minutes. Only the status-conflict scenario runs the
controller's JobSync in this process (a conflict in a running controller is a race).
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from t9k_provider.controller.kinds.beam import batch_job_name
from t9k_provider.controller.runtime.metrics import Metrics
from t9k_provider.jobs import API_VERSION, GROUP, KINDS, VERSION
from t9k_provider.kube.api import ApiError, KubeApi, api_client
from t9k_provider.testing import ControllerProcess, LocalCluster, none_left, wait_for
from tests.controller.e2e_support import fake_tools, offline_caches, offline_reconciler
from tests.support.builders import make_container, make_template

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ACCOUNT_NS, ACCOUNT = "t9k-system", "t9k-controller"
LEASE = "t9k-controller"
SCHED = ("scheduler.tensorstack.dev", "v1beta1", "podgroups")
TENSORBOARD = ("tensorstack.dev", "v1beta1", "tensorboards")
FLINK = ("flinkoperator.k8s.io", "v1beta1", "flinkclusters")
CASE_TIMEOUT = 60.0

Granule = tuple[str, str, str, str]  # (role kind, apiGroup, resource, verb)


def shipped() -> list[dict[str, Any]]:
    docs = [d for p in sorted((DEPLOY / "rbac").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    return [d for d in docs if d]


def roles() -> list[dict[str, Any]]:
    return [d for d in shipped() if d["kind"] in ("ClusterRole", "Role")]


def granules() -> list[Granule]:
    return [
        (role["kind"], group, resource, verb)
        for role in roles()
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    ]


def without(role: dict[str, Any], granule: Granule) -> dict[str, Any]:
    """``role`` with ``granule`` taken out (rules split per group and resource, verbs otherwise kept)."""
    rules = []
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs = [v for v in rule["verbs"] if (role["kind"], group, resource, v) != granule]
                if verbs:
                    rules.append({"apiGroups": [group], "resources": [resource], "verbs": verbs})
    return {**copy.deepcopy(role), "rules": rules}


def forbidden_phrase(granule: Granule) -> str:
    """What the server's 403 message says about the request (kube-apiserver's ``forbiddenMessage``)."""
    _role, group, resource, verb = granule
    return f'cannot {verb} resource "{resource}" in API group "{group}"'


def metric_resource(resource: str) -> str:
    """The controller's metrics label a request by the resource's plural, without its subresource."""
    return resource.partition("/")[0]


# -- the cluster, the roles, the ServiceAccount's kubeconfig ---------------------------------------------


@dataclass
class Env:
    cluster: LocalCluster
    admin: client.ApiClient
    kubeconfig: Path
    state: Path
    tools: Path
    cases: int = 0

    @property
    def rbac(self) -> client.RbacAuthorizationV1Api:
        return client.RbacAuthorizationV1Api(self.admin)

    def apply_roles(self, removed: Granule | None = None) -> None:
        """Replace the shipped roles by themselves, or by themselves without ``removed``."""
        for role in roles():
            body = without(role, removed) if removed else role
            name = role["metadata"]["name"]
            if role["kind"] == "ClusterRole":
                self.rbac.replace_cluster_role(name, body)
            else:
                self.rbac.replace_namespaced_role(name, role["metadata"]["namespace"], body)

    def drop_lease(self) -> None:
        try:
            client.CoordinationV1Api(self.admin).delete_namespaced_lease(LEASE, ACCOUNT_NS)
        except client.ApiException as exc:
            if exc.status != 404:
                raise

    def controller(self, name: str) -> ControllerProcess:
        # Kubernetes' lease duration and renew deadline (15 s, 10 s): these tests hold leadership while they
        # check RBAC, and a 3 s deadline lost it to a loaded API server (the controller stopped mid-scenario).
        # A 1 s retry period shows a Lease 403 within a second.
        timing = ["--lease-duration", "15", "--renew-deadline", "10", "--retry-period", "1"]
        return ControllerProcess(
            self.kubeconfig, self.state / f"{name}.log", "--leader-elect", "--lease-namespace", ACCOUNT_NS,
            "--lease-name", LEASE, "--identity", name, *timing,
        )  # fmt: skip

    def scene(self) -> Scene:
        self.cases += 1
        ns = f"rbac-{self.cases}"
        client.CoreV1Api(self.admin).create_namespace({"metadata": {"name": ns}})
        return Scene(self, ns)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    state = tmp_path_factory.mktemp("rbac")
    cluster = LocalCluster(state / "cluster", kubelet="process", flink_operator=False)
    cluster.start()
    try:
        admin = cluster.api_client()
        core, rbac = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin)
        core.create_namespace(yaml.safe_load((DEPLOY / "namespace.yaml").read_text()))
        create = {
            "ServiceAccount": lambda d: core.create_namespaced_service_account(ACCOUNT_NS, d),
            "ClusterRole": rbac.create_cluster_role,
            "ClusterRoleBinding": rbac.create_cluster_role_binding,
            "Role": lambda d: rbac.create_namespaced_role(ACCOUNT_NS, d),
            "RoleBinding": lambda d: rbac.create_namespaced_role_binding(ACCOUNT_NS, d),
        }
        for doc in shipped():
            create[doc["kind"]](doc)
        request = {"spec": {"expirationSeconds": 7200}}
        token = core.create_namespaced_service_account_token(ACCOUNT, ACCOUNT_NS, request).status.token
        config = yaml.safe_load(cluster.kubeconfig.read_text())
        for user in config["users"]:
            user["user"] = {"token": token}
        kubeconfig = state / "controller.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        yield Env(cluster, admin, kubeconfig, state, fake_tools(tmp_path_factory.mktemp("tools")))
    finally:
        cluster.stop()


# -- scenes: one namespace, what the scenarios created there, and what they saw ------------------------


@dataclass
class Scene:
    env: Env
    ns: str
    evidence: list[str] = field(default_factory=list)  # errors seen by in-process reconciles
    metrics: list[Metrics] = field(default_factory=list)  # of in-process reconciles
    done: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.env.admin)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.env.admin)

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.env.admin)

    def job(self, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, KINDS[kind].PLURAL, body)

    def get_job(self, kind: str, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, KINDS[kind].PLURAL, name)

    def wait_phase(self, kind: str, name: str, phase: str = "Succeeded", timeout: float = 90) -> None:
        def check() -> bool:
            status = self.get_job(kind, name).get("status") or {}
            assert status.get("phase") not in ({"Succeeded", "Failed"} - {phase}), status
            return status.get("phase") == phase

        wait_for(f"{kind} {name} {phase}", check, timeout)

    def obj(self, ref: tuple[str, str, str], name: str) -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(*ref[:2], self.ns, ref[2], name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def owned(self, job_name: str) -> list[str]:
        selector = f"tensorstack.dev/owner-name={job_name}"
        pods = self.core.list_namespaced_pod(self.ns, label_selector=selector).items
        services = self.core.list_namespaced_service(self.ns, label_selector=selector).items
        return sorted(o.metadata.name for o in [*pods, *services])

    def once(self, find: Callable[[], Any], act: Callable[[Any], None]) -> threading.Event:
        """In the background: once ``find()`` returns something, ``act`` on it (given up with the case); the
        event tells that it acted."""
        acted = threading.Event()

        def run() -> None:
            deadline = time.monotonic() + CASE_TIMEOUT
            while not self.done.is_set() and time.monotonic() < deadline:
                found = find()
                if found:
                    act(found)
                    acted.set()
                    return
                time.sleep(0.2)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)
        return acted

    def play_flink_operator(self, job_name: str) -> threading.Event:
        """Stand in for the flink-operator: the job's FlinkCluster reports Running once it exists."""
        name = f"{job_name}-flinkcluster"
        status = {"status": {"state": "Running"}}
        return self.once(
            lambda: self.obj(FLINK, name),
            lambda _c: self.custom.patch_namespaced_custom_object_status(
                *FLINK[:2], self.ns, FLINK[2], name, status
            ),
        )

    def resource_exists_events(self, job_name: str) -> list[client.CoreV1Event]:
        selector = f"involvedObject.name={job_name},reason=ResourceExists"
        return self.core.list_namespaced_event(self.ns, field_selector=selector).items

    def close(self) -> None:
        """Stop the background helpers and delete the jobs (their children go with them)."""
        self.done.set()
        for thread in self.threads:
            thread.join(5)
        for cls in KINDS.values():
            self.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, self.ns, cls.PLURAL)


Check = Callable[[], None]


# -- scenarios: each starts its part in a scene and returns the check of its outcome ----------------------


def path_env(tools: Path, hostfile: str) -> list[dict[str, str]]:
    return [{"name": "PATH", "value": f"{tools}:/usr/bin:/bin"}, {"name": "HOSTFILE", "value": hostfile}]


def kind_spec(kind: str, tools: Path) -> dict[str, Any]:
    """A small spec of ``kind`` that succeeds fast and creates every child type the kind has."""
    if kind == "GenericJob":
        return {
            "cleanUpPolicy": "All",
            "scheduler": {"t9kScheduler": {"queue": "default"}},
            "replicaSpecs": [
                {"type": "worker", "template": make_template(make_container("main", sh="true"))}
            ],
        }
    if kind == "PyTorchTrainingJob":
        return {
            "runPolicy": {"cleanUpPolicy": "All"},
            "tensorboardSpec": {"image": "tb:1", "trainingLogFilesets": ["t9k://pvc/p/log"]},
            "replicaSpecs": [
                {"type": "master", "template": make_template(make_container("pytorch", sh="true"))}
            ],
        }
    if kind == "TensorFlowTrainingJob":
        return {
            "replicaSpecs": [
                {"type": "chief", "template": make_template(make_container("tensorflow", sh="true"))}
            ]
        }
    if kind == "XGBoostTrainingJob":
        return {
            "replicaSpecs": [
                {"type": "master", "template": make_template(make_container("xgboost", sh="true"))}
            ]
        }
    if kind == "MPIJob":
        worker = {"name": "mpi-worker", "image": "mpi:x", "env": path_env(tools, "/etc/mpi/hostfile")}
        return {
            "worker": {"replicas": 1, "cmd": ["./hello"], "template": {"spec": {"containers": [worker]}}},
            "mpiHome": "/opt/openmpi",
            "ssh": {"sshAuthMountPath": "/root/.ssh", "sshdPath": str(tools / "sshd")},
        }
    if kind == "ColossalAIJob":
        return {
            "ssh": {"authMountPath": "/root/.ssh", "sshdPath": str(tools / "sshd")},
            "launcher": {"image": "colossalai:x", "env": path_env(tools, "/etc/colossalai/hostfile")},
            "worker": {"replicas": 1, "command": ["train.py"],
                       "template": {"spec": {"containers": [{"name": "worker", "image": "colossalai:x"}]}}},
        }  # fmt: skip
    if kind == "DeepSpeedJob":
        worker = {"name": "worker", "image": "deepspeed:x"}
        return {
            "worker": {
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {"spec": {"containers": [worker]}},
            },
            "config": {"customCommand": "true"},
        }
    assert kind == "BeamJob", kind
    submit = {"name": "submit", "image": "beam:x", "command": ["sh", "-c", "true"]}
    return {
        "flinkClusterTemplate": {"spec": {"flinkVersion": "1.17", "image": {"name": "flink:1.17"}}},
        "jobTemplate": {"spec": {"template": {"spec": {"containers": [submit]}}}},
        "runPolicy": {"cleanUpCluster": True},
    }


def run_kind(kind: str) -> Callable[[Scene], Check]:
    """One job of ``kind`` to success; GenericJob and PyTorch also clean up (pods, services, PodGroup)."""

    def scenario(s: Scene) -> Check:
        name = kind.lower()
        s.job(kind, name, kind_spec(kind, s.env.tools))
        if kind == "BeamJob":
            s.play_flink_operator(name)

        def check() -> None:
            s.wait_phase(kind, name)
            if kind in ("GenericJob", "PyTorchTrainingJob"):
                wait_for(f"{name}'s pods and services cleaned up", none_left(lambda: s.owned(name)), 30)
            if kind == "GenericJob":
                wait_for("the PodGroup deleted at the end", lambda: s.obj(SCHED, name) is None, 30)
            if kind == "PyTorchTrainingJob":
                assert s.obj(TENSORBOARD, name) is not None
            if kind == "BeamJob":
                wait_for("cleanUpCluster", lambda: s.obj(FLINK, f"{name}-flinkcluster") is None, 30)

        return check

    return scenario


def _container(command: str) -> dict[str, Any]:
    return {"name": "c", "image": "x", "command": ["sh", "-c", command]}


def squat(resource: str) -> Callable[[Scene], Check]:
    """An object not owned by the job already holds the name the controller wants for a ``resource`` child:
    the create answers AlreadyExists, the controller reads the object (``get``), finds it is not its own and
    reports ResourceExists, again on every retry (the repeats fold into one Event by ``patch``)."""

    def scenario(s: Scene) -> Check:
        name = f"sq-{resource}"
        meta = {"name": name}
        worker = {
            "replicaSpecs": [{"type": "worker", "template": make_template(make_container("m", sh="true"))}]
        }
        # the squatter first: the controller must not win the name
        if resource == "pods":
            kind, spec = "GenericJob", worker
            pod = {"metadata": {"name": f"{name}-worker-0"},
                   "spec": {"restartPolicy": "Never", "containers": [_container("true")]}}  # fmt: skip
            s.core.create_namespaced_pod(s.ns, pod)
        elif resource == "services":
            kind, spec = "GenericJob", {**worker, "service": {"ports": [{"name": "http", "port": 8080}]}}
            service = {"metadata": {"name": f"{name}-worker-0"}, "spec": {"ports": [{"port": 80}]}}
            s.core.create_namespaced_service(s.ns, service)
        elif resource in ("secrets", "configmaps"):
            kind, spec = "MPIJob", kind_spec("MPIJob", s.env.tools)
            body = {
                "metadata": {"name": f"{name}-{'ssh' if resource == 'secrets' else 'hostfile'}"},
                "data": {},
            }
            if resource == "secrets":
                s.core.create_namespaced_secret(s.ns, body)
            else:
                s.core.create_namespaced_config_map(s.ns, body)
        elif resource == "podgroups":
            kind, spec = "GenericJob", {**worker, "scheduler": {"t9kScheduler": {"queue": "default"}}}
            group = {"apiVersion": "/".join(SCHED[:2]), "kind": "PodGroup", "metadata": meta,
                     "spec": {"minMember": 1, "queue": "default"}}  # fmt: skip
            s.custom.create_namespaced_custom_object(*SCHED[:2], s.ns, SCHED[2], group)
        elif resource == "tensorboards":
            kind, spec = "PyTorchTrainingJob", kind_spec("PyTorchTrainingJob", s.env.tools)
            board = {"apiVersion": "/".join(TENSORBOARD[:2]), "kind": "TensorBoard", "metadata": meta,
                     "spec": {}}  # fmt: skip
            s.custom.create_namespaced_custom_object(*TENSORBOARD[:2], s.ns, TENSORBOARD[2], board)
        elif resource == "flinkclusters":
            kind, spec = "BeamJob", kind_spec("BeamJob", s.env.tools)
            cluster = {"apiVersion": "/".join(FLINK[:2]), "kind": "FlinkCluster",
                       "metadata": {"name": f"{name}-flinkcluster"},
                       "spec": {"flinkVersion": "1.17", "image": {"name": "flink:1.17"}}}  # fmt: skip
            s.custom.create_namespaced_custom_object(*FLINK[:2], s.ns, FLINK[2], cluster)
        else:
            assert resource == "jobs", resource
            kind, spec = "BeamJob", kind_spec("BeamJob", s.env.tools)
            batch = {"metadata": {"name": batch_job_name(name)}, "spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [_container("true")]}}}}  # fmt: skip
            s.batch.create_namespaced_job(s.ns, batch)
            s.play_flink_operator(name)
        s.job(kind, name, spec)

        def check() -> None:
            events = wait_for(
                f"a repeated ResourceExists Event on {name}",
                lambda: [e for e in s.resource_exists_events(name) if (e.count or 0) >= 2],
                CASE_TIMEOUT,
            )
            assert "not owned by this job" in events[0].message

        return check

    return scenario


def drift(s: Scene) -> Check:
    """Children the controller keeps in sync, changed behind its back: it patches them back."""
    s.job("GenericJob", "drift-pg", {
        "scheduler": {"t9kScheduler": {"queue": "default", "priority": 5}},
        "replicaSpecs": [{"type": "worker", "template": make_template(make_container("m", sh="sleep 30"))}],
    })  # fmt: skip
    spec = kind_spec("MPIJob", s.env.tools)
    spec["runMode"] = {
        "debug": {
            "enabled": True,
            "replicaSpecs": [
                {"type": "launcher", "command": ["sleep", "30"]},
                {"type": "worker", "command": ["sleep", "30"]},
            ],
        }
    }
    s.job("MPIJob", "drift-cm", spec)

    def configmap() -> client.V1ConfigMap | None:
        try:
            return s.core.read_namespaced_config_map("drift-cm-hostfile", s.ns)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    pg = s.once(
        lambda: s.obj(SCHED, "drift-pg"),
        lambda _g: s.custom.patch_namespaced_custom_object(
            *SCHED[:2], s.ns, SCHED[2], "drift-pg", {"spec": {"priority": 99}}
        ),
    )
    cm = s.once(
        configmap,
        lambda _c: s.core.patch_namespaced_config_map("drift-cm-hostfile", s.ns, {"data": {"hostfile": "x"}}),
    )

    def check() -> None:
        assert pg.wait(CASE_TIMEOUT) and cm.wait(CASE_TIMEOUT), "the PodGroup and the ConfigMap were changed"
        wait_for(
            "PodGroup patched back",
            lambda: ((s.obj(SCHED, "drift-pg") or {}).get("spec") or {}).get("priority") == 5,
            30,
        )
        wait_for("hostfile ConfigMap patched back", lambda: configmap().data["hostfile"] != "x", 30)

    return check


def conflict(s: Scene) -> Check:
    """A status computed from a stale copy of each kind's job hits 409 and the job is re-read (``get``).

    Only a race makes this happen in a running controller, so the controller's JobSync runs in this
    process, authenticated as the ServiceAccount, over caches that hold the stale copies."""
    stale = []
    for kind in KINDS:
        spec = kind_spec(kind, s.env.tools)
        if kind != "BeamJob":  # the only kind without pause
            spec["runMode"] = {"pause": {"enabled": True}}
        name = f"cf-{kind.lower()}"
        stale.append(s.job(kind, name, spec))
        touch = {"metadata": {"labels": {"touched": "yes"}}}
        s.custom.patch_namespaced_custom_object(GROUP, VERSION, s.ns, KINDS[kind].PLURAL, name, touch)
    metrics = Metrics()
    s.metrics.append(metrics)

    async def reconcile_all() -> None:
        async with await api_client(s.env.kubeconfig) as api_client_:
            api = KubeApi(api_client_, metrics)
            reconciler = offline_reconciler(api, metrics, offline_caches(api, s.ns, stale))
            for job in stale:
                try:
                    await reconciler.reconcile((job["kind"], s.ns, job["metadata"]["name"]))
                except ApiError as exc:
                    s.evidence.append(str(exc))

    asyncio.run(reconcile_all())

    def check() -> None:
        assert not s.evidence
        conflicts = metrics.registry.get_sample_value(
            "t9k_controller_status_writes_total", {"outcome": "conflict"}
        )
        assert conflicts is not None and conflicts >= len(KINDS)  # one each at least

    return check


SQUATTED = ("pods", "services", "secrets", "configmaps", "podgroups", "tensorboards", "flinkclusters", "jobs")
SCENARIOS: dict[str, Callable[[Scene], Check]] = {
    **{f"kind:{kind}": run_kind(kind) for kind in KINDS},
    **{f"squat:{r}": squat(r) for r in SQUATTED},
    "drift": drift,
    "conflict": conflict,
}
WRITES = {
    ("pods", "create"): "kind:GenericJob",
    ("pods", "delete"): "kind:GenericJob",  # cleanUpPolicy All
    ("podgroups", "create"): "kind:GenericJob",
    ("podgroups", "delete"): "kind:GenericJob",  # at the end
    ("events", "create"): "kind:GenericJob",
    ("services", "create"): "kind:PyTorchTrainingJob",
    ("services", "delete"): "kind:PyTorchTrainingJob",
    ("tensorboards", "create"): "kind:PyTorchTrainingJob",
    ("secrets", "create"): "kind:MPIJob",
    ("configmaps", "create"): "kind:MPIJob",
    ("flinkclusters", "create"): "kind:BeamJob",
    ("flinkclusters", "delete"): "kind:BeamJob",  # cleanUpCluster
    ("jobs", "create"): "kind:BeamJob",
    ("podgroups", "patch"): "drift",
    ("configmaps", "patch"): "drift",
    ("events", "patch"): "squat:pods",  # a repeated Event
}
KIND_BY_PLURAL = {cls.PLURAL: kind for kind, cls in KINDS.items()}


def needs(granule: Granule) -> str | None:
    """The scenario whose run needs ``granule``; None: any controller start needs it (informers, Lease);
    "": none does."""
    _role, group, resource, verb = granule
    if resource == "leases" or verb in ("list", "watch"):
        return None
    if group == GROUP:
        return "conflict" if verb == "get" else f"kind:{KIND_BY_PLURAL[metric_resource(resource)]}"
    if verb == "get":
        return f"squat:{resource}"
    return WRITES.get((resource, verb), "")


# -- the tests ---------------------------------------------------------------------------------------------


def granule_id(granule: Granule) -> str:
    return "-".join(part or "core" for part in granule)


def requests_made(proc: ControllerProcess, metrics: list[Metrics]) -> set[tuple[str, str, str]]:
    """(verb, resource, code) of every request the controller process and in-process reconciles sent."""
    samples = [
        (dict(labels), value)
        for (name, labels), value in proc.metrics().items()
        if name == "t9k_controller_api_requests_total"
    ]
    for m in metrics:
        for family in m.registry.collect():
            samples += [
                (s.labels, s.value) for s in family.samples if s.name == "t9k_controller_api_requests_total"
            ]
    return {(labels["verb"], labels["resource"], labels["code"]) for labels, value in samples if value > 0}


def assert_forbidden(
    proc: ControllerProcess, granule: Granule, scene: Scene | None = None, since: int = 0
) -> None:
    """The 403 shows in the controller's log (or the in-process reconcile's error) and in its metrics."""
    phrase = forbidden_phrase(granule)
    _role, _group, resource, verb = granule
    shown: set[str] = set()  # a controller that lost its Lease exits: what it showed before still counts

    def seen() -> bool:
        text = proc.log_file.read_bytes()[since:].decode(errors="replace")
        if phrase in text or (scene is not None and any(phrase in e for e in scene.evidence)):
            shown.add("log")
        made = requests_made(proc, scene.metrics if scene else [])
        if (verb, metric_resource(resource), "403") in made:
            shown.add("metric")
        return shown == {"log", "metric"}

    try:
        wait_for(f"a 403 ({phrase}) in the controller's log and metrics", seen, CASE_TIMEOUT)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{proc.log_tail(20)}") from None


def test_shipped_roles_run_every_scenario(env: Env) -> None:
    env.drop_lease()
    proc = env.controller("shipped").start()
    scene = env.scene()
    try:
        proc.wait_ready(60)
        wait_for("leadership", lambda: proc.metric_sum("t9k_controller_leader") == 1, 30)
        checks = {name: scenario(scene) for name, scenario in SCENARIOS.items()}
        for check in checks.values():
            check()
        made = requests_made(proc, scene.metrics)
    finally:
        scene.close()
        proc.stop()
    assert not {r for r in made if r[2] == "403"}, proc.log_tail()
    granted = {(g[3], metric_resource(g[2])): g for g in granules()}  # (verb, plural) as the metrics say
    assert len(granted) == len(granules()), "two granules share a plural: requests would not name one"
    used = {(verb, resource) for verb, resource, _code in made}
    unused = [g for key, g in granted.items() if key not in used]
    assert not unused, (
        f"granted, but no scenario needs it (drop it from deploy/rbac or add a scenario): {unused}"
    )


@pytest.mark.parametrize("granule", [g for g in granules() if needs(g) is None], ids=granule_id)
def test_removing_an_informer_or_lease_granule_surfaces_a_403(env: Env, granule: Granule) -> None:
    """Informers list and watch once at start, the Lease is taken at start: a fresh controller each."""
    env.apply_roles(removed=granule)
    env.drop_lease()
    proc = env.controller(f"without-{granule_id(granule)}").start()
    try:
        assert_forbidden(proc, granule)
    finally:
        proc.stop()
        env.apply_roles()


@pytest.fixture(scope="module")
def shared(env: Env) -> Iterator[ControllerProcess]:
    env.apply_roles()
    env.drop_lease()
    proc = env.controller("shared").start()
    try:
        yield proc.wait_ready(60)
    finally:
        proc.stop()


@pytest.mark.parametrize("granule", [g for g in granules() if needs(g) is not None], ids=granule_id)
def test_removing_a_request_granule_surfaces_a_403(
    env: Env, shared: ControllerProcess, granule: Granule
) -> None:
    """The role changes under the running controller; the scenario that needs the granule runs in a fresh
    namespace and the 403 must surface."""
    scenario = SCENARIOS.get(needs(granule) or "")
    if scenario is None:
        pytest.fail(f"no scenario needs {granule}: drop it from deploy/rbac or map it to a scenario (WRITES)")
    since = len(shared.log_file.read_bytes())
    env.apply_roles(removed=granule)
    scene = env.scene()
    try:
        scenario(scene)
        assert_forbidden(shared, granule, scene, since)
    finally:
        env.apply_roles()
        scene.close()
    assert shared.running(), shared.log_tail()
