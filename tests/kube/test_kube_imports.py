"""t9k_provider.kube is neutral ground: it imports neither Airflow, the controller nor the local cluster, and
the controller does not reach into the local cluster through it."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys, pkgutil, importlib
import t9k_provider.{package} as pkg
found = pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
names = [m.name for m in found if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
{extra}
forbidden = ("airflow", {forbidden})
leaked = sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in forbidden))
print(len(names), leaked)
"""


def probe(package: str, forbidden: list[str], extra: str = "") -> tuple[int, str]:
    code = PROBE.format(package=package, forbidden=", ".join(map(repr, forbidden)), extra=extra)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    count, leaked = result.stdout.strip().split(" ", 1)
    return int(count), leaked


def test_kube_imports_only_itself() -> None:
    count, leaked = probe("kube", ["t9k_provider.controller", "t9k_provider.local"])
    assert count >= 4, "the probe must actually import the kube modules"
    assert leaked == "[]"


def test_controller_does_not_import_the_local_cluster() -> None:
    count, leaked = probe("controller", ["t9k_provider.local"])
    assert count >= 10
    assert leaked == "[]"


def test_probe_detects_a_forbidden_import() -> None:
    _, leaked = probe("kube", ["t9k_provider.local"], extra="import t9k_provider.local.agents")
    assert "t9k_provider.local.agents" in leaked
