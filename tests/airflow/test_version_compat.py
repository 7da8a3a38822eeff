"""The Airflow version gates: the release of the installed Airflow, pre-release and local tags ignored."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from t9k_provider import version_compat


@pytest.mark.parametrize(
    ("given", "release"),
    [
        ("2.11.2", (2, 11, 2)),
        ("3.0", (3, 0, 0)),
        ("3.3.0rc1", (3, 3, 0)),
        ("3.3.0.dev0", (3, 3, 0)),
        ("3.2.1+astro.1", (3, 2, 1)),
    ],
)
def test_release_ignores_pre_release_and_local_tags(given: str, release: tuple[int, int, int]) -> None:
    assert version_compat.airflow_version_tuple(given) == release


def test_flags_follow_the_installed_airflow() -> None:
    installed = version_compat.airflow_version_tuple(version("apache-airflow"))
    assert version_compat.airflow_version_tuple() == installed
    assert version_compat.AIRFLOW_V_3_0_PLUS is (installed >= (3, 0, 0))
    assert version_compat.AIRFLOW_V_3_3_PLUS is (installed >= (3, 3, 0))
