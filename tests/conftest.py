"""Fixtures every test folder may use: kubectl, and clusters of a test's own (``cluster_factory``, from
`tests.support.clusters`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.testing import LocalCluster, polling
from tests.support import schedule
from tests.support.clusters import cluster_factory

__all__ = ["cluster_factory"]  # a fixture every test may take

ROOT = Path(__file__).resolve().parents[1]
# The processes tests start (clusters, controllers, container shims, Airflow components) cache their bytecode,
# as installed packages have it, also where the environment turns caching off (PYTHONDONTWRITEBYTECODE, as
# on this project's CI machines): otherwise each one compiles everything it imports again (about a second
# per Airflow process). The cache is kept out of the source tree.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(ROOT / ".cache" / "pycache"))


@pytest.fixture(scope="session")
def kubectl_binary() -> str:
    """kubectl's path, for every test that runs it (``pytest.mark.usefixtures("kubectl_binary")``).

    A developer machine without kubectl skips those tests; under ``CI=true`` they fail instead, since the
    project's CI image always carries kubectl 1.32 and a silent skip there would hide a broken image. Session
    scope makes the verdict come before any module fixture starts a cluster for nothing.
    """
    path = shutil.which("kubectl")
    if path is not None:
        return path
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(
            "kubectl is not on PATH but CI=true: the CI image must provide kubectl 1.32", pytrace=False
        )
    pytest.skip("kubectl is not installed (under CI=true this fails)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (`tests.support.schedule`): no worker is left alone with one at the end."""
    schedule.longest_first(items, schedule.load())


#: Markers of tests that may start clusters (and other real processes); the unit layer
#: (``make test-fast``: ``-m "not cluster and not deployment and not slow"``) runs the rest.
CLUSTER_MARKERS = ("cluster", "deployment", "slow")
_unit_test_running = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _unit_test_running
    _unit_test_running = not any(next(item.iter_markers(name), None) for name in CLUSTER_MARKERS)


@pytest.fixture(scope="session", autouse=True)
def _clusters_only_in_cluster_tests() -> Iterator[None]:
    """A test that starts a cluster without a cluster marker fails, so that the unit layer stays free of
    clusters (checked at the start itself: a module fixture starts before the test's own fixtures)."""
    start = LocalCluster.start

    def checked(self: LocalCluster, *args: Any, **kwargs: Any) -> LocalCluster:
        if _unit_test_running:
            pytest.fail(
                "this test starts a local cluster but is not marked: add pytestmark = pytest.mark.cluster",
                pytrace=False,
            )
        return start(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalCluster, "start", checked)
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test's report carries what its running clusters looked like (`LocalCluster.report`),
    unless its failure is a wait that gave up and said so already."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.excinfo is None or call.excinfo.errisinstance(TimeoutError):
        return
    if said := polling.reports():
        report.sections.append(("clusters when the test failed", said))
