"""The controller installs and runs without Airflow: nothing under t9k_provider.controller imports it."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys, pkgutil, importlib
import t9k_provider.controller as pkg
found = pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
names = [m.name for m in found if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
from t9k_provider.controller import cli
cli.build_parser().parse_args(["--kubeconfig", "x", "--namespace", "a", "--namespace", "b"])
leaked = sorted(m for m in sys.modules if m == "airflow" or m.startswith("airflow."))
print(len(names), leaked)
assert not leaked, leaked
"""


def test_controller_imports_nothing_from_airflow() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    count, leaked = result.stdout.split(" ", 1)
    assert int(count) >= 10, "the probe must actually import the runtime modules"
    assert leaked.strip() == "[]"


def test_console_entry_point_help_runs_without_airflow() -> None:
    code = (
        "import runpy, sys; sys.argv=['t9k-controller','--help']\n"
        "try:\n    runpy.run_module('t9k_provider.controller', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0\n"
        "assert not [m for m in sys.modules if m.startswith('airflow')]\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--leader-elect" in result.stdout and "--metrics-port" in result.stdout
