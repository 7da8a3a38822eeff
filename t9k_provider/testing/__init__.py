"""What tests of T9k Jobs need and this project's tests and benchmarks share: the local cluster and the
controller as child processes, and one way to wait for what they do.

Nothing here imports Airflow (as for ``jobs``, ``controller`` and ``local``).
"""

from t9k_provider.testing.cluster import (
    LocalCluster,
    ci_must_exercise_everything,
    lease_pod_subnet,
    release_pod_subnet,
    require_limits,
    unavailable,
)
from t9k_provider.testing.controller import ControllerProcess, metric_sum
from t9k_provider.testing.polling import none_left, wait_for, wait_for_async
from t9k_provider.testing.ports import free_port

__all__ = [
    "ControllerProcess",
    "LocalCluster",
    "ci_must_exercise_everything",
    "free_port",
    "lease_pod_subnet",
    "metric_sum",
    "none_left",
    "release_pod_subnet",
    "require_limits",
    "unavailable",
    "wait_for",
    "wait_for_async",
]
