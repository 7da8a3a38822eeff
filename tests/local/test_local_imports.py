"""The local cluster and its test utilities run without Airflow: nothing under t9k_provider.local or
t9k_provider.testing imports it."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys, pkgutil, importlib
import t9k_provider.local as local, t9k_provider.testing as testing
names = [m.name for pkg in (local, testing) for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
for name in names:
    importlib.import_module(name)
from t9k_provider.local import cli
leaked = sorted(m for m in sys.modules if m == "airflow" or m.startswith("airflow."))
print(len(names), leaked)
"""


def test_local_cluster_imports_nothing_from_airflow() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    count, leaked = result.stdout.strip().split(" ", 1)
    assert int(count) >= 20, "the probe must actually import the local cluster's modules"
    assert leaked == "[]", f"t9k_provider.local or .testing pulled in Airflow modules: {leaked}"


def test_probe_detects_an_airflow_import() -> None:
    """The probe can fail: importing Airflow next to the local cluster is reported."""
    result = subprocess.run(
        [sys.executable, "-c", "import airflow.sdk\n" + PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().split(" ", 1)[1] != "[]"
