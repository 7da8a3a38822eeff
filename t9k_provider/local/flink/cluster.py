"""What the local flink-operator makes of a FlinkCluster, as pure functions: its objects and its status.

Names, labels, ports and status fields follow GoogleCloudPlatform/flink-on-k8s-operator (v1beta1): a ConfigMap
``<cluster>-configmap``, a JobManager Service ``<cluster>-jobmanager`` (ports rpc 6123, blob 6124, query 6125,
ui 8081), pods labelled ``app=flink, cluster=<cluster>, component=jobmanager|taskmanager``, and
``status.state`` Creating -> Running (-> Reconciling while a component is not ready) with
``status.components`` per component. The operator creates the pods itself rather than StatefulSets, named
as StatefulSets name them: ``<cluster>-jobmanager-0``, ``<cluster>-taskmanager-<i>``.

Local differences (there is no image to run): containers run ``python -m t9k_provider.local.flink.entrypoint``
with this machine's Java and Flink jars, whatever ``flinkVersion`` and ``image`` say; the pods do not restart
(``restartPolicy: Never``), so a JobManager or TaskManager that exits stops the cluster (``Stopped``) instead
of crash-looping. ``status.conditions`` (one ``Ready`` condition) says why a cluster is not running.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import yaml

from t9k_provider.kube.resources import ResourceType
from t9k_provider.local.flink.entrypoint import DEFAULT_LOG4J

FLINKCLUSTERS = ResourceType("flinkoperator.k8s.io/v1beta1", "FlinkCluster", "flinkclusters")
ENTRYPOINT = "t9k_provider.local.flink.entrypoint"
JOBMANAGER_PORTS = {"rpc": 6123, "blob": 6124, "query": 6125, "ui": 8081}
TASKMANAGER_PORTS = {"data": 6121, "rpc": 6122, "query": 6125}
# Small by default: every local cluster shares one machine. flinkProperties override any of these.
DEFAULT_PROPERTIES = {
    "jobmanager.memory.process.size": "768m",
    "taskmanager.memory.process.size": "1024m",
    "taskmanager.numberOfTaskSlots": "1",
    # Short-lived local JVMs: C1 only and the serial collector start faster on few cores.
    "env.java.opts.all": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    # A TaskManager that starts before the JobManager answers retries after this (Flink's default: 10 s).
    "cluster.registration.error-delay": "1 s",
}
CONFIG_KEY = "config.yaml"
LOG4J_KEY = "log4j-console.properties"

# Cluster and component states, as the flink-operator spells them.
CREATING, RUNNING, RECONCILING, STOPPED = "Creating", "Running", "Reconciling", "Stopped"
READY, NOT_READY = "Ready", "NotReady"


class InvalidSpec(ValueError):
    """A FlinkCluster spec the operator cannot run; the message starts with the field path."""


def configmap_name(cluster: str) -> str:
    return f"{cluster}-configmap"


def jobmanager_name(cluster: str) -> str:
    """The JobManager Service (and the StatefulSet name the real operator reports)."""
    return f"{cluster}-jobmanager"


def taskmanager_name(cluster: str) -> str:
    return f"{cluster}-taskmanager"


def pod_name_of(cluster: str, component: str, index: int) -> str:
    if component == "jobmanager":
        return f"{jobmanager_name(cluster)}-0"
    return f"{taskmanager_name(cluster)}-{index}"


def labels(cluster: str, component: str | None = None) -> dict[str, str]:
    out = {"app": "flink", "cluster": cluster}
    if component:
        out["component"] = component
    return out


def _owner(fc: dict[str, Any]) -> list[dict[str, Any]]:
    meta = fc["metadata"]
    ref = {"apiVersion": FLINKCLUSTERS.api_version, "kind": FLINKCLUSTERS.kind, "name": meta["name"]}
    return [{**ref, "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]


def _meta(fc: dict[str, Any], name: str, component: str | None, extra: dict[str, str] | None = None) -> dict:
    cluster = fc["metadata"]["name"]
    return {
        "name": name,
        "namespace": fc["metadata"].get("namespace", "default"),
        "labels": {**(extra or {}), **labels(cluster, component)},
        "ownerReferences": _owner(fc),
    }


def _part(spec: dict[str, Any], component: str) -> dict[str, Any]:
    """``spec.jobManager`` or ``spec.taskManager``."""
    return spec.get("jobManager" if component == "jobmanager" else "taskManager") or {}


def _ports(spec: dict[str, Any], component: str) -> dict[str, int]:
    defaults = JOBMANAGER_PORTS if component == "jobmanager" else TASKMANAGER_PORTS
    written = _part(spec, component).get("ports") or {}
    field = "jobManager" if component == "jobmanager" else "taskManager"
    ports = {}
    for name, default in defaults.items():
        value = written.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
            raise InvalidSpec(f"spec.{field}.ports.{name}: must be a port number (got {value!r})")
        ports[name] = value
    return ports


def taskmanager_replicas(fc: dict[str, Any]) -> int:
    value = ((fc.get("spec") or {}).get("taskManager") or {}).get("replicas")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidSpec(f"spec.taskManager.replicas: must be an integer >= 1 (got {value!r})")
    return value


def validate(fc: dict[str, Any]) -> None:
    spec = fc.get("spec") or {}
    if spec.get("job"):
        raise InvalidSpec("spec.job: the local flink-operator runs session clusters only (no job clusters)")
    taskmanager_replicas(fc)
    _ports(spec, "jobmanager")
    _ports(spec, "taskmanager")
    props = spec.get("flinkProperties") or {}
    if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
        raise InvalidSpec("spec.flinkProperties: must map property names to strings")
    if not str(props.get("rest.port", "8081")).isdigit():
        raise InvalidSpec('spec.flinkProperties["rest.port"]: must be one port number')


def flink_properties(fc: dict[str, Any]) -> dict[str, str]:
    """The JobManager's address, ports, small memory defaults, then ``flinkProperties`` (which win)."""
    spec = fc.get("spec") or {}
    jm, tm = _ports(spec, "jobmanager"), _ports(spec, "taskmanager")
    return {
        "jobmanager.rpc.address": jobmanager_name(fc["metadata"]["name"]),
        "jobmanager.rpc.port": str(jm["rpc"]),
        "blob.server.port": str(jm["blob"]),
        "query.server.port": str(jm["query"]),
        "rest.port": str(jm["ui"]),
        "taskmanager.rpc.port": str(tm["rpc"]),
        "taskmanager.data.port": str(tm["data"]),
        **DEFAULT_PROPERTIES,
        **(spec.get("flinkProperties") or {}),
    }


def rest_port(fc: dict[str, Any]) -> int:
    """Where the JobManager's REST API listens: ``spec.jobManager.ports.ui``, unless ``rest.port`` is set."""
    return int(flink_properties(fc)["rest.port"])


def flink_config(fc: dict[str, Any]) -> str:
    """``config.yaml`` of the cluster's processes."""
    props = flink_properties(fc)
    return yaml.safe_dump(props, default_flow_style=False, sort_keys=False, width=10_000)


def configmap(fc: dict[str, Any]) -> dict[str, Any]:
    log_config = (fc.get("spec") or {}).get("logConfig") or {}
    name = configmap_name(fc["metadata"]["name"])
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(fc, name, None),
        "data": {CONFIG_KEY: flink_config(fc), LOG4J_KEY: log_config.get(LOG4J_KEY) or DEFAULT_LOG4J},
    }


def jobmanager_service(fc: dict[str, Any]) -> dict[str, Any]:
    cluster = fc["metadata"]["name"]
    ports = _ports(fc.get("spec") or {}, "jobmanager")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(fc, jobmanager_name(cluster), "jobmanager"),
        "spec": {
            "type": "ClusterIP",
            "selector": labels(cluster, "jobmanager"),
            "ports": [{"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in ports.items()],
        },
    }


def _config_ref(cluster: str, key: str) -> dict[str, Any]:
    return {"configMapKeyRef": {"name": configmap_name(cluster), "key": key}}


def pod(fc: dict[str, Any], component: str, index: int, host_env: dict[str, str]) -> dict[str, Any]:
    """The JobManager (index 0) or TaskManager ``index`` pod; ``host_env`` says where this machine's Flink
    (``FLINK_HOME``) and Java (``JAVA_HOME``, when set) are."""
    cluster = fc["metadata"]["name"]
    spec = fc.get("spec") or {}
    part = _part(spec, component)
    env = [
        *({"name": k, "value": v} for k, v in sorted(host_env.items())),
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "FLINK_PROPERTIES", "valueFrom": _config_ref(cluster, CONFIG_KEY)},
        {"name": "FLINK_LOG4J_CONSOLE", "valueFrom": _config_ref(cluster, LOG4J_KEY)},
        *(spec.get("envVars") or []),
    ]
    container: dict[str, Any] = {
        "name": component,
        "image": (spec.get("image") or {}).get("name") or "flink",
        "command": [sys.executable, "-m", ENTRYPOINT],
        "args": [component],
        "env": env,
        "ports": [{"name": n, "containerPort": p} for n, p in _ports(spec, component).items()],
    }
    container |= {field: part[field] for field in ("resources", "volumeMounts") if part.get(field)}
    if spec.get("envFrom"):
        container["envFrom"] = spec["envFrom"]
    meta = _meta(fc, pod_name_of(cluster, component, index), component, part.get("podLabels"))
    if part.get("podAnnotations"):
        meta["annotations"] = dict(part["podAnnotations"])
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container, *(part.get("sidecars") or [])],
    }
    optional = ("initContainers", "volumes", "nodeSelector", "tolerations", "securityContext")
    pod_spec |= {field: part[field] for field in optional if part.get(field)}
    if spec.get("serviceAccountName"):
        pod_spec["serviceAccountName"] = spec["serviceAccountName"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


@dataclass
class Observed:
    """What the operator saw of one FlinkCluster's world."""

    cluster: dict[str, Any]
    pods: dict[str, dict[str, Any]]  # by name
    service: bool
    configmap: bool
    # from the JobManager's REST API (/taskmanagers): None while it does not answer
    registered_taskmanagers: int | None = None
    problem: str | None = None  # a reason the cluster cannot run here (missing prerequisites, invalid spec)


def _phase(p: dict[str, Any] | None) -> str | None:
    return ((p or {}).get("status") or {}).get("phase")


def failed_pod(obs: Observed) -> tuple[str, str] | None:
    """The first JobManager/TaskManager pod that ended, with how (exit code, reason)."""
    for name, p in sorted(obs.pods.items()):
        if _phase(p) not in ("Failed", "Succeeded"):
            continue
        how = []
        for cs in (p.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term:
                how.append(f"container {cs.get('name')} exited with code {term.get('exitCode')}")
        return name, ", ".join(how) or f"pod {_phase(p)}"
    return None


def derive_status(obs: Observed, now: str) -> dict[str, Any]:
    """The FlinkCluster status the operator writes; Stopped is final."""
    fc = obs.cluster
    name = fc["metadata"]["name"]
    recorded = fc.get("status") or {}
    jm_pod = obs.pods.get(pod_name_of(name, "jobmanager", 0))
    jm_ready = _phase(jm_pod) == "Running" and obs.registered_taskmanagers is not None
    try:
        replicas = taskmanager_replicas(fc)
    except InvalidSpec:
        replicas = 0
    tm_pods = [obs.pods.get(pod_name_of(name, "taskmanager", i)) for i in range(replicas)]
    tm_ready = (
        replicas > 0
        and all(_phase(p) == "Running" for p in tm_pods)
        and (obs.registered_taskmanagers or 0) >= replicas
    )
    components = {
        "configMap": {"name": configmap_name(name), "state": READY if obs.configmap else NOT_READY},
        "jobManagerStatefulSet": {"name": jobmanager_name(name), "state": READY if jm_ready else NOT_READY},
        "jobManagerService": {"name": jobmanager_name(name), "state": READY if obs.service else NOT_READY},
        "taskManagerStatefulSet": {"name": taskmanager_name(name), "state": READY if tm_ready else NOT_READY},
    }
    ended = failed_pod(obs)
    previous = recorded.get("state") or ""
    if previous == STOPPED:
        return {**recorded, "components": components}
    if obs.problem is not None:
        state, reason, message = STOPPED, "CannotRun", obs.problem
    elif ended is not None:
        state, reason, message = STOPPED, "ComponentExited", f"{ended[0]}: {ended[1]}"
    elif jm_ready and tm_ready and obs.service and obs.configmap:
        state, reason, message = RUNNING, "Running", f"JobManager up, {replicas} TaskManager(s) registered"
    else:
        state = CREATING if previous in ("", CREATING) else RECONCILING
        waiting = "the JobManager REST API" if not jm_ready else "TaskManagers to register"
        seen = obs.registered_taskmanagers
        count = f" ({seen}/{replicas} registered)" if seen is not None else ""
        reason, message = state, f"waiting for {waiting}{count}"
    ready = "True" if state == RUNNING else "False"
    old = next((c for c in recorded.get("conditions") or [] if c.get("type") == "Ready"), {})
    since = old.get("lastTransitionTime") if old.get("status") == ready else now
    condition = {"type": "Ready", "status": ready, "reason": reason, "message": message}
    status = {
        "state": state,
        "components": components,
        "conditions": [{**condition, "lastTransitionTime": since or now}],
    }
    if state != previous:
        status["lastUpdateTime"] = now
    elif recorded.get("lastUpdateTime"):
        status["lastUpdateTime"] = recorded["lastUpdateTime"]
    return status
