"""Which job is the task instance's (``jobclient.identity``): a name stable across tries and unique per task
instance."""

from __future__ import annotations

import pytest

from t9k_provider.jobclient import identity as ident

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent


def test_job_name_is_stable_and_unique_per_task_instance() -> None:
    base = {ident.DAG_ID: "d", ident.TASK_ID: "Train_Model", ident.RUN_ID: "r1", ident.MAP_INDEX: "-1"}
    name = ident.job_name(base)
    assert name == ident.job_name(dict(base))
    assert name.startswith("train-model-") and len(name) <= ident.MAX_GENERATED_NAME
    assert name != ident.job_name({**base, ident.MAP_INDEX: "0"})
    assert name != ident.job_name({**base, ident.RUN_ID: "r2"})
    assert ident.job_name({**base, ident.TASK_ID: "9" * 80})[0].isalpha()
    assert len(ident.job_name({**base, ident.TASK_ID: "x" * 80})) <= ident.MAX_GENERATED_NAME
