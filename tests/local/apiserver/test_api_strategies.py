"""The local API server's resource registry: every built-in resource is one strategy module plus one registry
line, and the generic write pipeline never dispatches on which resource it writes."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

from t9k_provider.local.apiserver import strategies
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.served import BUILTIN, ServedResources

APISERVER = Path(strategies.__file__).parent.parent
# The generic write pipeline: what it does must not depend on which resource it writes.
WRITE_PATH = ("objects.py", "generic/validation.py", "generic/resources.py")
# Attributes and names that say which resource an object is.
_IDENTITY = {"plural", "storage_resource", "storage_group", "group", "group_version", "kind", "singular"}
_RESOURCE_NAMES = {name for r in BUILTIN for name in (r.plural, r.kind, r.group) if name}


def _identity(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in _IDENTITY
    return isinstance(node, ast.Name) and node.id in _IDENTITY | {"resource"}


def _names_a_resource(compare: ast.Compare) -> bool:
    """``res.plural == "pods"``, ``kind in ("Pod", "Job")``: an identity against literals (comparing it
    with another value, such as the kind a request body names, is no dispatch)."""
    operands = [compare.left, *compare.comparators]
    literal = any(isinstance(n, ast.Constant) for o in operands for n in ast.walk(o))
    return literal and any(_identity(o) for o in operands)


def _keyed_lookup(node: ast.AST) -> bool:
    """``table[res.plural]`` or ``table.get(res.plural)``."""
    if isinstance(node, ast.Subscript):
        return _identity(node.slice)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and bool(node.args)
        and _identity(node.args[0])
    )


def resource_dispatch(source: str) -> list[str]:
    """Places in ``source`` that branch on a resource's identity: comparisons with its plural/kind/group,
    lookups keyed by them, literal resource names, or type tests of a particular strategy."""
    found = []
    for node in ast.walk(ast.parse(source)):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Compare) and _names_a_resource(node):
            found.append(f"{where}: comparison of a resource's identity with a literal")
        elif _keyed_lookup(node):
            found.append(f"{where}: lookup keyed by a resource's identity")
        elif isinstance(node, ast.Constant) and node.value in _RESOURCE_NAMES:
            found.append(f"{where}: the resource name {node.value!r}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and "Strategy" in ast.unparse(node.args[1])
        ):
            found.append(f"{where}: a test for one strategy")
    return found


@pytest.mark.parametrize("path", WRITE_PATH)
def test_the_write_path_never_dispatches_on_the_resource(path: str) -> None:
    assert resource_dispatch((APISERVER / path).read_text()) == []


@pytest.mark.parametrize(
    "snippet",
    [
        'if res.plural == "pods":\n    pass',
        'if res.storage_resource in ("pods", "services"):\n    pass',
        "rule = RULES.get(res.plural)",
        "rule = RULES[res.kind]",
        'grace = 30 if kind == "Pod" else 0',
        'key = ("", "namespaces", "", name)',
        "if isinstance(res.strategy, PodStrategy):\n    pass",
    ],
)
def test_the_dispatch_check_catches_each_form(snippet: str) -> None:
    assert resource_dispatch(snippet), snippet


def _module_resources() -> list[Resource]:
    found = []
    for info in pkgutil.iter_modules(strategies.__path__):
        module = importlib.import_module(f"{strategies.__name__}.{info.name}")
        found += [value for value in vars(module).values() if isinstance(value, Resource)]
    return found


def test_every_resource_a_strategy_module_declares_is_registered() -> None:
    declared = _module_resources()
    assert len(declared) == len(BUILTIN)
    assert all(any(r is b for b in BUILTIN) for r in declared)


def test_registered_resources_are_distinct_and_have_strategies() -> None:
    keys = [(r.group, r.version, r.plural) for r in BUILTIN]
    assert len(keys) == len(set(keys))
    for r in BUILTIN:
        assert isinstance(r.strategy, Strategy), r.plural
        assert not r.strategy.custom, r.plural
        if "scale" in r.subresources:
            assert r.strategy.scale, f"{r.plural} serves scale but names no replica paths"
    assert ServedResources().lookup("", "v1", "pods") is next(r for r in BUILTIN if r.plural == "pods")
