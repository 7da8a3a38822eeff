"""The kind registry covers every job kind, and the engine stays below the kinds and the entry point."""

from __future__ import annotations

import ast
from pathlib import Path

import t9k_provider.controller.engine as engine_pkg
from t9k_provider.controller.kinds.registry import REGISTRY, WATCHED_CHILD_TYPES
from t9k_provider.jobs import KINDS

ENGINE = "t9k_provider.controller.engine"
CONTROLLER = "t9k_provider.controller"


def imported_modules(source: str, package: str) -> set[str]:
    """Every module an import statement of a module of `package` may load (relative imports resolved)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}  # `from pkg import submodule`
    return found


def upward_imports(source: str, package: str = ENGINE) -> set[str]:
    """Controller modules outside the engine that an engine module imports."""
    return {
        m
        for m in imported_modules(source, package)
        if m.startswith(CONTROLLER + ".") and not (m == ENGINE or m.startswith(ENGINE + "."))
    }


def test_every_job_kind_has_a_registry_entry() -> None:
    missing = {kind for kind, cls in KINDS.items() if cls not in REGISTRY}
    assert not missing, f"no compiler registered in controller/kinds/registry.py for {sorted(missing)}"
    assert set(REGISTRY) == set(KINDS.values())


def test_the_runtime_watches_what_the_kinds_create() -> None:
    assert sorted((t.api_version, t.kind, t.plural) for t in WATCHED_CHILD_TYPES) == [
        ("batch/v1", "Job", "jobs"),
        ("flinkoperator.k8s.io/v1beta1", "FlinkCluster", "flinkclusters"),
        ("scheduler.tensorstack.dev/v1beta1", "PodGroup", "podgroups"),
        ("tensorstack.dev/v1beta1", "TensorBoard", "tensorboards"),
        ("v1", "ConfigMap", "configmaps"),
        ("v1", "Pod", "pods"),
        ("v1", "Secret", "secrets"),
        ("v1", "Service", "services"),
    ]
    assert len(set(WATCHED_CHILD_TYPES)) == len(WATCHED_CHILD_TYPES)


def test_no_engine_module_imports_the_kinds_or_the_entry_point() -> None:
    modules = sorted(Path(engine_pkg.__file__).parent.glob("*.py"))
    assert len(modules) > 5
    offending = {
        path.name: found for path in modules if (found := upward_imports(path.read_text(encoding="utf-8")))
    }
    assert offending == {}


def test_the_import_check_sees_every_spelling() -> None:
    for source in (
        "from ..kinds import registry",
        "from .. import kinds",
        "from ..kinds.ssh import SSH_PORT",
        "import t9k_provider.controller.kinds.beam",
        "from t9k_provider.controller.reconcile import reconcile",
        "def late():\n    from t9k_provider.controller import runtime\n",
    ):
        assert upward_imports(source), source
    assert not upward_imports("from .plan import Plan\nfrom t9k_provider.jobs import load\nimport copy")
