"""Job manifests for the simulated kubelet: one per kind, its pods ending by themselves after ``seconds``.

The simulated kubelet ends a pod annotated ``t9k.local/simulate-exit-code`` after
``t9k.local/simulate-after`` seconds; without the annotation pods stay Running (for scale runs).
"""

from __future__ import annotations

import copy
from typing import Any

from t9k_provider.jobs import API_VERSION, KINDS

EXIT_CODE = "t9k.local/simulate-exit-code"
AFTER = "t9k.local/simulate-after"

#: The order kinds are measured and reported in.
KIND_ORDER = (
    "GenericJob",
    "PyTorchTrainingJob",
    "TensorFlowTrainingJob",
    "XGBoostTrainingJob",
    "MPIJob",
    "DeepSpeedJob",
    "ColossalAIJob",
    "BeamJob",
)


def _template(container: str, seconds: float | None) -> dict[str, Any]:
    meta = {"annotations": {EXIT_CODE: "0", AFTER: f"{seconds:g}"}} if seconds is not None else {}
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": container, "image": "bench:1", "command": ["true"]}]},
    }


def _replica(type_: str, replicas: int, container: str, seconds: float | None) -> dict[str, Any]:
    return {"type": type_, "replicas": replicas, "template": _template(container, seconds)}


def spec(kind: str, replicas: int, seconds: float | None) -> dict[str, Any]:
    """A spec of ``kind`` with ``replicas`` workers (plus the master/launcher the kind needs)."""
    if kind == "GenericJob":
        return {
            "successRules": [{"worker": list(range(replicas))}],
            "replicaSpecs": [_replica("worker", replicas, "main", seconds)],
        }
    if kind in ("PyTorchTrainingJob", "TensorFlowTrainingJob"):
        container = "pytorch" if kind.startswith("PyTorch") else "tensorflow"
        return {"replicaSpecs": [_replica("worker", replicas, container, seconds)]}
    if kind == "XGBoostTrainingJob":
        return {
            "replicaSpecs": [
                _replica("master", 1, "xgboost", seconds),
                _replica("worker", replicas - 1, "xgboost", seconds),
            ]
        }
    # SSH kinds: workers run sshd until the controller ends them; only the launcher finishes by itself.
    if kind == "MPIJob":
        return {
            "mpiConfig": {"script": ["python", "train.py"]},
            "replicaSpecs": [
                _replica("worker", replicas, "worker", None),
                {"type": "launcher", "replicas": 1, "template": _template("launcher", seconds)},
            ],
        }
    if kind == "DeepSpeedJob":
        return {
            "config": {"slotsPerWorker": 1, "run": {"python": "train.py"}},
            "worker": {"replicas": replicas, "template": _template("worker", seconds)},
        }
    if kind == "ColossalAIJob":
        return {
            "torchConfig": {"procPerWorker": 1, "script": ["train.py"]},
            "replicaSpecs": [
                {"type": "launcher", "template": _template("launcher", seconds)},
                _replica("worker", replicas, "worker", None),
            ],
        }
    if kind == "BeamJob":
        submit = _template("submit-job", seconds)
        submit["spec"]["restartPolicy"] = "Never"
        return {
            "runPolicy": {"cleanUpCluster": True},
            "flinkClusterTemplate": {"spec": {"flinkVersion": "1.10.1", "taskManager": {"replicas": 1}}},
            "jobTemplate": {"spec": {"template": submit}},
        }
    raise ValueError(f"kind: no benchmark manifest for {kind!r}")


def job(kind: str, name: str, namespace: str, replicas: int = 2, seconds: float | None = None) -> dict:
    manifest = {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec(kind, replicas, seconds),
    }
    KINDS[kind].model_validate(copy.deepcopy(manifest))  # a benchmark of an invalid job measures nothing
    return manifest


def collection(kind: str, namespace: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{KINDS[kind].PLURAL}"
