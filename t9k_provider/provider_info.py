"""Provider metadata that Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "t9k-airflow-provider",
        "name": "TensorStack T9k",
        "description": "Submit, watch and manage TensorStack T9k Jobs from Airflow.",
        "versions": ["0.1.0"],
    }
