"""Which replicas' logs a task follows (``replicalogs.targets``): ``log_replicas``, each kind's leader, the
pods' selector."""

from __future__ import annotations

import pytest

from t9k_provider.replicalogs.targets import ReplicaTarget, default_targets, parse_targets, pod_selector
from tests.support.builders import generic_manifest

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent


def test_parse_targets_and_defaults() -> None:
    assert parse_targets("all") == [ReplicaTarget(None, None)]
    assert parse_targets(["worker/1", "ps"]) == [ReplicaTarget("worker", 1), ReplicaTarget("ps", None)]
    with pytest.raises(ValueError, match="log_replicas"):
        parse_targets("worker/x")
    pytorch = {"spec": {"replicaSpecs": [{"type": "worker"}, {"type": "master"}]}}
    assert default_targets("PyTorchTrainingJob", pytorch) == [ReplicaTarget("master", 0)]
    assert default_targets("TensorFlowTrainingJob", {"spec": {"replicaSpecs": [{"type": "worker"}]}}) == [
        ReplicaTarget("worker", 0)
    ]
    assert default_targets("MPIJob", {}) == [ReplicaTarget("launcher", None)]
    assert default_targets("GenericJob", generic_manifest()) == [ReplicaTarget("worker", 0)]


def test_pod_selector_per_kind() -> None:
    assert pod_selector("PyTorchTrainingJob", "j") == "tensorstack.dev/owner-name=j"
    assert pod_selector("BeamJob", "j") == "batch.kubernetes.io/job-name=j-batchjob"
