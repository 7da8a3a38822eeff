"""The operators' options checked at DAG parse (``operators.options``)."""

from __future__ import annotations

import pytest

from t9k_provider.operators.options import seconds

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent


def test_seconds_rejects_negative() -> None:
    with pytest.raises(ValueError, match="startup_timeout"):
        seconds(-1, "startup_timeout")
