"""The package's shape, read from its source with ``ast`` (every import, also those inside functions and under
``TYPE_CHECKING``): no import cycle between modules or between folders, the local cluster's boundaries
(docs/architecture.md), and the size limits that keep modules and functions readable. Each check is also run
on a small tree made to break it, so a check that cannot fail is caught."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "t9k_provider"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_OPERATOR_LINES = 350  # operators/job.py: the Airflow lifecycle only

Graph = dict[str, set[str]]


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``root`` (a package is its ``__init__``)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def import_graph(root: Path) -> Graph:
    """Module -> the package's modules it imports (``from package import module`` names the module)."""
    mods = modules(root)
    graph: Graph = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    for name in mods:
        graph.setdefault(name, set())
    return dict(graph)


def folder_graph(root: Path) -> Graph:
    """Folder (package directory, dotted) -> the other folders its modules import."""
    mods = modules(root)
    folder = {name: ".".join(path.relative_to(root.parent).parent.parts) for name, path in mods.items()}
    graph: Graph = defaultdict(set)
    for name, targets in import_graph(root).items():
        graph[folder[name]].update(folder[t] for t in targets if folder[t] != folder[name])
        graph.setdefault(folder[name], set())
    return dict(graph)


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def arrows(graph: Graph, source: str, target: str) -> list[str]:
    """``module -> module`` for every import from under ``source`` into ``target`` (dotted prefixes)."""
    under = lambda name, prefix: name == prefix or name.startswith(prefix + ".")  # noqa: E731
    return sorted(
        f"{name} -> {t}" for name, ts in graph.items() if under(name, source) for t in ts if under(t, target)
    )


def oversized(root: Path) -> list[str]:
    """Modules over ``MAX_MODULE_LINES`` lines and functions over ``MAX_FUNCTION_LINES``."""
    found = []
    for name, path in sorted(modules(root).items()):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.append(f"module {name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"function {name}.{node.name}: {length} lines")
    return found


# -- the package ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(PACKAGE)


def test_no_module_imports_a_module_that_imports_it_back(graph: Graph) -> None:
    assert len(graph) > 200, "the graph must hold the package's modules"
    assert cycles(graph) == []


def test_no_folder_imports_a_folder_that_imports_it_back() -> None:
    folders = folder_graph(PACKAGE)
    assert "t9k_provider.local.apiserver.strategies" in folders
    assert cycles(folders) == []


@pytest.mark.parametrize(
    ("source", "target"),
    [
        # The API server asks the node (NodeStreams) and never touches node state.
        ("t9k_provider.local.apiserver", "t9k_provider.local.kubelet"),
        ("t9k_provider.local.kubelet", "t9k_provider.local.apiserver"),
        # The shared machinery is a leaf of the local cluster.
        ("t9k_provider.local.machinery", "t9k_provider.local.apiserver"),
        ("t9k_provider.local.machinery", "t9k_provider.local.kubelet"),
        ("t9k_provider.local.machinery", "t9k_provider.local.controllers"),
        ("t9k_provider.local.machinery", "t9k_provider.local.scheduler"),
        # The generic registry knows neither the server nor the strategies built on it.
        ("t9k_provider.local.apiserver.generic", "t9k_provider.local.apiserver.strategies"),
        ("t9k_provider.local.apiserver.generic", "t9k_provider.local.apiserver.handlers"),
        # Only the wiring (cli, agents) knows every part.
        ("t9k_provider.local.controllers", "t9k_provider.local.kubelet"),
        ("t9k_provider.local.scheduler", "t9k_provider.local.kubelet"),
        # The provider in layers: the clients (hooks) know nothing above them, the job client and the
        # replica logs no operator, sensor or trigger, and the trigger none of the tasks that defer to it.
        ("t9k_provider.hooks", "t9k_provider.triggers"),
        ("t9k_provider.hooks", "t9k_provider.operators"),
        ("t9k_provider.hooks", "t9k_provider.replicalogs"),
        ("t9k_provider.hooks", "t9k_provider.jobclient"),
        ("t9k_provider.jobclient", "t9k_provider.operators"),
        ("t9k_provider.jobclient", "t9k_provider.triggers"),
        ("t9k_provider.jobclient", "t9k_provider.sensors"),
        ("t9k_provider.replicalogs", "t9k_provider.operators"),
        ("t9k_provider.replicalogs", "t9k_provider.triggers"),
        ("t9k_provider.triggers", "t9k_provider.operators"),
        ("t9k_provider.triggers", "t9k_provider.sensors"),
    ],
)
def test_a_boundary_is_not_crossed(graph: Graph, source: str, target: str) -> None:
    assert arrows(graph, source, target) == []


#: What the wait decision may use: it runs in the worker and in the triggerer alike, and is unit-tested pure
#: (the job's phase names and the RFC 3339 timestamps are plain data and functions).
WAITING_MAY_IMPORT = {
    *("__future__", "collections", "dataclasses", "datetime", "decimal", "random", "re", "time", "typing"),
    *("t9k_provider.waiting", "t9k_provider.jobs.contract", "t9k_provider.kube.timestamps"),
    "t9k_provider.kube.resources",  # the GPU resource name, how a quantity and an extended resource count
    "t9k_provider.progress",  # the report line's parser: the standard library only
}


def outside_imports(folder: Path) -> set[str]:
    """Every module name that the modules of ``folder`` import, top-level names of outside packages."""
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found.add(node.module or "")
    return {name if name.startswith("t9k_provider.") else name.split(".")[0] for name in found}


def test_the_wait_decision_is_pure() -> None:
    """No Airflow, no Kubernetes client, nothing of the provider beyond waiting/ itself."""
    used = outside_imports(PACKAGE / "waiting")
    assert "t9k_provider.waiting.limits" in used  # the probe reads the folder's imports
    allowed = lambda name: any(name == a or name.startswith(a + ".") for a in WAITING_MAY_IMPORT)  # noqa: E731
    assert [name for name in sorted(used) if not allowed(name)] == []


def test_modules_and_functions_stay_within_their_limits() -> None:
    assert oversized(PACKAGE) == []
    operator = PACKAGE / "operators" / "job.py"
    assert len(operator.read_text().splitlines()) <= MAX_OPERATOR_LINES


def importers(root: Path, module: str, name: str) -> list[str]:
    """The files under ``root`` that import ``name`` from ``module`` (absolute imports)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            imported = isinstance(node, ast.ImportFrom) and node.module == module and not node.level
            if imported and any(alias.name == name for alias in node.names):  # type: ignore[union-attr]
                found.append(str(path.relative_to(root)))
    return found


def test_one_loop_drives_the_wait_decision() -> None:
    """The worker, the trigger and the sensor wait through ``waiting.loop``: no other module drives ``step``
    (docs/architecture.md, the wait in one picture)."""
    assert importers(PACKAGE, "t9k_provider.waiting.step", "step") == ["waiting/loop.py"]


def hook_calls(path: Path) -> list[str]:
    """Calls through an operator's own hook (``self.hook.<method>(...)``) in ``path``, as ``line: method``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            hook = isinstance(owner, ast.Attribute) and owner.attr == "hook"
            if hook and isinstance(owner.value, ast.Name) and owner.value.id == "self":  # type: ignore[union-attr]
                found.append(f"{node.lineno}: {node.func.attr}")
    return found


def test_the_decorated_operator_reaches_the_cluster_only_through_its_base() -> None:
    """It overrides the base operator's hook points and reads through its job client: no raw hook call."""
    assert hook_calls(PACKAGE / "decorators" / "operator.py") == []


def lossy_timed_waits(root: Path) -> list[str]:
    """Calls of ``asyncio.wait_for``, which loses a cancellation that arrives as the awaited thing completes
    (Python < 3.12): ``kube.timeouts.within`` is the package's timed wait."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            is_attribute = isinstance(node, ast.Attribute) and node.attr == "wait_for"
            if is_attribute and isinstance(node.value, ast.Name) and node.value.id == "asyncio":
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_timed_waits_never_lose_a_cancellation() -> None:
    assert lossy_timed_waits(PACKAGE) == []


# -- the probes can fail -----------------------------------------------------------------------------------


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    """A package whose modules and folders import each other in circles, and one module too long."""
    root = tmp_path / "pkg"
    for folder in ("a", "b"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "a" / "one.py").write_text("from pkg.b import two\n")
    (root / "a" / "three.py").write_text("def f():\n    from . import four\n")  # inside a function
    (root / "a" / "four.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .three import f\n"
    )
    (root / "b" / "two.py").write_text("import pkg.a.four\n" + "x = 1\n" * MAX_MODULE_LINES)
    (root / "b" / "waits.py").write_text("import asyncio\nasync def h(e):\n    await asyncio.wait_for(e, 9)")
    (root / "b" / "raw.py").write_text(
        "class Op:\n    def run(self):\n        return self.hook.delete_job('j')\n"
    )
    body = "".join(f"    y{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (root / "b" / "long.py").write_text(f"def g():\n{body}")
    return root


def test_the_probes_find_cycles_arrows_and_sizes(broken: Path) -> None:
    graph = import_graph(broken)
    assert cycles(graph) == [["pkg.a.four", "pkg.a.three"]]
    assert cycles(folder_graph(broken)) == [["pkg.a", "pkg.b"]]
    assert arrows(graph, "pkg.b", "pkg.a") == ["pkg.b.two -> pkg.a.four"]
    assert oversized(broken) == [
        f"function pkg.b.long.g: {MAX_FUNCTION_LINES + 1} lines",
        f"module pkg.b.two: {MAX_MODULE_LINES + 1} lines",
    ]
    assert lossy_timed_waits(broken) == ["b/waits.py:3"]
    assert importers(broken, "pkg.b", "two") == ["a/one.py"]
    assert hook_calls(broken / "b" / "raw.py") == ["3: delete_job"]
