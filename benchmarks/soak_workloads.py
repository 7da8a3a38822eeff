"""What the soak creates and changes: every workload kind the local cluster runs, T9k Jobs included, each with
a desired state the cluster must reach; and the one container all their pods run, which records when it ran.

The recording container is ``sh`` (cheap to start: the load is the control plane's): it writes
``RECORDS/<pod uid>.<start ns>`` whole (a temporary file, then ``mv``) when it starts and again, with its end,
when it ends or gets SIGTERM; ``soak_checks`` reads these intervals back and tells whether a replica ran
twice at once.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t9k_provider.jobs import API_VERSION, KINDS

#: Its start and end as Unix seconds, the pod's uid and the container's name, on one line.
RECORD_SCRIPT = """\
f="$SOAK_RECORDS/$POD_UID.$(date +%s%N)"
s=$(date +%s.%N)
rec() { printf '%s %s %s %s\\n' "$POD_UID" "$CONTAINER" "$s" "$1" > "$f.tmp" && mv "$f.tmp" "$f"; }
rec -
fin() { rec "$(date +%s.%N)"; exit 0; }
trap fin TERM INT
sleep "$SOAK_SECONDS" & wait $!
fin
"""
#: Long enough to outlast the soak: these run until their pod is deleted.
LONG_RUNNING = 3600.0
#: Labels every soak object and pod carries: ``app`` selects a workload's pods.
RUN_LABEL = "soak.t9k/run"


@dataclass(frozen=True)
class Recorder:
    """Where containers record (``records``), and the run they belong to (``run``: also in each container's
    environment, so a process left behind can be found by it)."""

    records: Path
    run: str

    def container(self, name: str, seconds: float) -> dict[str, Any]:
        env = [
            {"name": "SOAK_RECORDS", "value": str(self.records)},
            {"name": "SOAK_SECONDS", "value": f"{seconds:g}"},
            {"name": "SOAK_RUN", "value": self.run},
            {"name": "CONTAINER", "value": name},
            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        ]
        return {
            "name": name,
            "image": "busybox:1.36",
            "command": ["sh", "-c", RECORD_SCRIPT],
            "env": env,
            # a request, however small, lets the scheduler's least-allocated choice spread pods over the nodes
            "resources": {"requests": {"cpu": "5m"}},
        }

    def template(
        self, app: str, seconds: float, restart: str | None = None, container: str = "main"
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "containers": [self.container(container, seconds)],
            "terminationGracePeriodSeconds": 5,
        }
        if restart:
            spec["restartPolicy"] = restart
        return {"metadata": {"labels": {"app": app, RUN_LABEL: self.run}}, "spec": spec}


@dataclass(frozen=True)
class Kind:
    """A kind the soak creates: where it lives, how to build one, what changes it takes, when it is done.

    ``build(recorder, name, rng)`` gives the manifest's ``spec`` (and for a Pod, its whole body);
    ``settled(obj, nodes)`` says why the object is not yet in its desired state, or None when it is."""

    name: str
    prefix: str  # "/api/v1", "/apis/apps/v1", ...
    plural: str
    build: Callable[[Recorder, str, random.Random], dict[str, Any]]
    updates: tuple[str, ...]
    settled: Callable[[dict[str, Any], int], str | None]
    api_version: str = ""

    def collection(self, namespace: str | None = None) -> str:
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{self.prefix}{where}/{self.plural}"


def _short(rng: random.Random) -> float:
    return round(rng.uniform(0.5, 3.0), 2)


def _pod(rec: Recorder, name: str, rng: random.Random) -> dict[str, Any]:
    return rec.template(name, _short(rng), restart="Never")["spec"]


def _job(rec: Recorder, name: str, rng: random.Random) -> dict[str, Any]:
    completions = rng.choice((1, 2))
    template = rec.template(name, _short(rng), restart="Never")
    # backoffLimit 0: no fault the soak injects fails a pod, so a failed pod fails the Job and shows
    return {"completions": completions, "parallelism": completions, "backoffLimit": 0, "template": template}


def _replicated(rec: Recorder, name: str, rng: random.Random) -> dict[str, Any]:
    return {
        "replicas": rng.choice((1, 2)),
        "selector": {"matchLabels": {"app": name}},
        "template": rec.template(name, LONG_RUNNING),
    }


def _statefulset(rec: Recorder, name: str, rng: random.Random) -> dict[str, Any]:
    spec = _replicated(rec, name, rng)
    return {**spec, "serviceName": name, "podManagementPolicy": rng.choice(("OrderedReady", "Parallel"))}


def _daemonset(rec: Recorder, name: str, rng: random.Random) -> dict[str, Any]:
    return {"selector": {"matchLabels": {"app": name}}, "template": rec.template(name, LONG_RUNNING)}


def _replicas(
    rec: Recorder, name: str, rng: random.Random, type_: str, count: int, container: str = "main"
) -> dict[str, Any]:
    return {
        "type": type_,
        "replicas": count,
        "template": rec.template(name, _short(rng) + 1.0, None, container),
    }


def _generic(rec: Recorder, name: str, rng: random.Random) -> dict[str, Any]:
    return {"replicaSpecs": [_replicas(rec, name, rng, "worker", rng.choice((1, 2)))]}


def _training(container: str) -> Callable[[Recorder, str, random.Random], dict[str, Any]]:
    """PyTorch and TensorFlow: workers only (worker 0 is the master), in the container the kind names."""

    def build(rec: Recorder, name: str, rng: random.Random) -> dict[str, Any]:
        return {"replicaSpecs": [_replicas(rec, name, rng, "worker", rng.choice((1, 2)), container)]}

    return build


def _xgboost(rec: Recorder, name: str, rng: random.Random) -> dict[str, Any]:
    return {
        "replicaSpecs": [
            _replicas(rec, name, rng, "master", 1, "xgboost"),
            _replicas(rec, name, rng, "worker", 1, "xgboost"),
        ]
    }


# -- desired states ----------------------------------------------------------------------------------------


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def _observed(obj: dict[str, Any]) -> str | None:
    generation = obj["metadata"].get("generation", 0)
    seen = _status(obj).get("observedGeneration", 0)
    return None if seen >= generation else f"observedGeneration {seen} < generation {generation}"


def _counts_match(obj: dict[str, Any], want: int, fields: tuple[str, ...]) -> str | None:
    status = _status(obj)
    off = {f: status.get(f) or 0 for f in fields if (status.get(f) or 0) != want}
    return f"want {want}: {off}" if off else None


def _deployment_settled(obj: dict[str, Any], nodes: int) -> str | None:
    fields = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    return _observed(obj) or _counts_match(obj, obj["spec"]["replicas"], fields)


def _replicaset_settled(obj: dict[str, Any], nodes: int) -> str | None:
    fields = ("replicas", "readyReplicas", "availableReplicas")
    return _observed(obj) or _counts_match(obj, obj["spec"]["replicas"], fields)


def _statefulset_settled(obj: dict[str, Any], nodes: int) -> str | None:
    fields = ("replicas", "readyReplicas", "updatedReplicas", "currentReplicas")
    problem = _observed(obj) or _counts_match(obj, obj["spec"]["replicas"], fields)
    status = _status(obj)
    if problem is None and status.get("currentRevision") != status.get("updateRevision"):
        problem = f"currentRevision {status.get('currentRevision')} != {status.get('updateRevision')}"
    return problem


def _daemonset_settled(obj: dict[str, Any], nodes: int) -> str | None:
    fields = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled")
    return _observed(obj) or _counts_match(obj, nodes, (*fields, "numberAvailable"))


def _job_settled(obj: dict[str, Any], nodes: int) -> str | None:
    status = _status(obj)
    complete = any(
        c.get("type") == "Complete" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    want = obj["spec"].get("completions", 1)
    if complete and status.get("succeeded") == want:
        return None
    return f"not Complete: succeeded {status.get('succeeded')}/{want}, failed {status.get('failed')}"


def _phase(want: str) -> Callable[[dict[str, Any], int], str | None]:
    def settled(obj: dict[str, Any], nodes: int) -> str | None:
        phase = _status(obj).get("phase")
        return None if phase == want else f"phase {phase}, not {want}"

    return settled


APPS, BATCH, CORE = "/apis/apps/v1", "/apis/batch/v1", "/api/v1"
#: The changes of a kind whose pods a controller replaces (a deleted Pod, or a Job's pod with no restart
#: budget, would fail instead), and of one that also scales.
CONTROLLED = ("annotate", "delete-pod", "recreate")
REPLICATED = (*CONTROLLED, "scale")
T9K = f"/apis/{API_VERSION}"
WORKLOADS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("Pod", CORE, "pods", _pod, ("annotate", "recreate"), _phase("Succeeded"), "v1"),
        Kind("Job", BATCH, "jobs", _job, ("annotate", "recreate"), _job_settled, "batch/v1"),
        Kind("Deployment", APPS, "deployments", _replicated, (*REPLICATED, "roll"), _deployment_settled,
             "apps/v1"),
        Kind("ReplicaSet", APPS, "replicasets", _replicated, REPLICATED, _replicaset_settled, "apps/v1"),
        Kind("StatefulSet", APPS, "statefulsets", _statefulset, (*REPLICATED, "roll"), _statefulset_settled,
             "apps/v1"),
        Kind("DaemonSet", APPS, "daemonsets", _daemonset, (*CONTROLLED, "roll"), _daemonset_settled,
             "apps/v1"),
        Kind("GenericJob", T9K, KINDS["GenericJob"].PLURAL, _generic, CONTROLLED, _phase("Succeeded"),
             API_VERSION),
        Kind("PyTorchTrainingJob", T9K, KINDS["PyTorchTrainingJob"].PLURAL, _training("pytorch"),
             CONTROLLED, _phase("Succeeded"), API_VERSION),
        Kind("TensorFlowTrainingJob", T9K, KINDS["TensorFlowTrainingJob"].PLURAL, _training("tensorflow"),
             CONTROLLED, _phase("Succeeded"), API_VERSION),
        Kind("XGBoostTrainingJob", T9K, KINDS["XGBoostTrainingJob"].PLURAL, _xgboost, CONTROLLED,
             _phase("Succeeded"), API_VERSION),
    )
}  # fmt: skip
T9K_KINDS = tuple(name for name, kind in WORKLOADS.items() if kind.prefix == T9K)


@dataclass
class Workload:
    """One object the soak created (``uid`` once the create was acknowledged)."""

    kind: Kind
    namespace: str
    name: str
    manifest: dict[str, Any]
    uid: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind.name, self.namespace, self.name)

    @property
    def path(self) -> str:
        return f"{self.kind.collection(self.namespace)}/{self.name}"

    def __str__(self) -> str:
        return f"{self.kind.name} {self.namespace}/{self.name}"


def new_workload(kind: Kind, namespace: str, name: str, rec: Recorder, rng: random.Random) -> Workload:
    built = kind.build(rec, name, rng)
    metadata = {"name": name, "namespace": namespace, "labels": {RUN_LABEL: rec.run}}
    if kind.name == "Pod":
        manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": built}
    else:
        manifest = {"apiVersion": kind.api_version, "kind": kind.name, "metadata": metadata, "spec": built}
    if kind.name in KINDS:
        KINDS[kind.name].model_validate(copy.deepcopy(manifest))  # an invalid job would soak nothing
    return Workload(kind, namespace, name, manifest)


def update_patch(workload: Workload, update: str, step: int, rng: random.Random) -> dict[str, Any]:
    """The merge patch of a change made by one: ``scale`` (another replica count, 1-3), ``roll`` (a template
    change: a rollout) or ``annotate`` (metadata only)."""
    if update == "scale":
        current = workload.manifest["spec"].get("replicas", 1)
        replicas = rng.choice([n for n in (1, 2, 3) if n != current])
        workload.manifest["spec"]["replicas"] = replicas
        return {"spec": {"replicas": replicas}}
    if update == "roll":
        return {"spec": {"template": {"metadata": {"annotations": {"soak.t9k/rollout": str(step)}}}}}
    if update == "annotate":
        return {"metadata": {"annotations": {"soak.t9k/update": str(step)}}}
    raise ValueError(f"update: {update!r}")
