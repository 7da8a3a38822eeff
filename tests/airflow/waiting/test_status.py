"""Reading a T9k Job's status (``waiting.status``): what a phase and its conditions mean, the failed replicas,
the replica counts."""

from __future__ import annotations

import pytest

from t9k_provider.waiting import status as job_status
from tests.support.builders import generic_manifest, with_status

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent


@pytest.mark.parametrize(
    ("phase", "conditions", "expected"),
    [
        ("Pending", (), "pending"),
        ("", (), "pending"),
        ("Initializing", (), "pending"),
        ("Running", (), "running"),
        ("Resuming", (), "running"),
        ("Paused", (), "paused"),
        ("Unknown", (), "unknown"),
        ("Succeeded", (), "succeeded"),
        ("Failed", (), "failed"),
        ("Running", (("Completed", "Succeeded", "done"),), "succeeded"),
        ("Running", (("Failed", "Failed", "boom"),), "failed"),
        ("Succeeded", (("Failed", "Failed", "boom"),), "failed"),
    ],
)
def test_outcome_from_phase_and_conditions(phase: str, conditions: tuple, expected: str) -> None:
    assert job_status.outcome(with_status(generic_manifest("j"), phase, *conditions)) == expected


@pytest.mark.parametrize("key", ["status", "replicaStatus", "replicas"])
def test_failure_reason_and_failed_replicas(key: str) -> None:
    """The replicas of a task are read under the key each kind's document gives (``status``; DeepSpeedJob
    ``replicaStatus``) and under ``replicas``, which controllers before 0.2 wrote."""
    job = with_status(
        generic_manifest("j"),
        "Failed",
        ("Failed", "Failed", "The job is failed with rule: worker 0"),
        tasks=[
            {
                "type": "worker",
                key: [
                    {
                        "name": "j-worker-0",
                        "phase": "Succeeded",
                        "containers": [{"name": "c", "exitCode": 0}],
                    },
                    {"name": "j-worker-1", "phase": "Failed", "containers": [{"name": "c", "exitCode": 3}]},
                ],
            }
        ],
    )
    assert job_status.failure_reason(job) == "Failed: The job is failed with rule: worker 0"
    assert job_status.failed_replicas(job) == ["j-worker-1"]
    summary = job_status.summary(job)
    assert summary["replicas"] == {"worker": 2}
    assert summary["phase"] == "Failed"
    assert summary["conditions"][0]["type"] == "Failed"


def test_replica_counts_fall_back_to_spec() -> None:
    assert job_status.replica_counts(generic_manifest("j")) == {"worker": 2}
