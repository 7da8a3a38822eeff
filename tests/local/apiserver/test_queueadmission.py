"""The T9k Scheduler's admission of a new T9k Job into its Queue, on what it is given before validation."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_provider.local.apiserver.strategies.queueadmission import queue_of


@pytest.mark.parametrize(
    "spec",
    [1, "x", [], None, {"scheduler": 1}, {"scheduler": {"t9kScheduler": "q"}}, {"scheduler": [{}]}],
)
def test_a_spec_of_another_shape_names_no_queue(spec: Any) -> None:
    """Admission runs before the schema's validation (which answers 422 for these): never a 500."""
    assert queue_of({"spec": spec}) is None


@pytest.mark.parametrize("key", ["queue", "Queue"])
def test_the_queue_a_job_names(key: str) -> None:
    assert queue_of({"spec": {"scheduler": {"t9kScheduler": {key: "gpu"}}}}) == "gpu"
