"""One Kubernetes client stack: ``t9k_provider.hooks`` keeps the Airflow connection, the triggers' client pool
and re-authentication, while async requests, watches and their errors are ``t9k_provider.kube``'s.

Checked on the source (AST), so an import inside a function or an attribute such as ``client.CoreV1Api`` is
seen as well as a module-level ``from kubernetes_asyncio.client import CustomObjectsApi``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import t9k_provider.hooks

#: Pure provider logic: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent

HOOKS = Path(t9k_provider.hooks.__file__).parent
ROOT = "kubernetes_asyncio"
#: generated API classes (CoreV1Api, CustomObjectsApi, ...), not ApiClient or ApiException
API_CLASS = re.compile(r"^[A-Z]\w*Api$")


def is_api(qualified: str) -> bool:
    """A kubernetes_asyncio API class, its generated ``client.api`` modules, its watch or dynamic client."""
    parts = qualified.split(".")
    if parts[0] != ROOT or len(parts) < 2:
        return False
    return (
        parts[1] in ("watch", "dynamic")
        or parts[1:3] == ["client", "api"]
        or bool(API_CLASS.match(parts[-1]))
    )


def dotted(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return [*base, node.attr] if base is not None else None
    return None


def api_uses(source: str) -> list[str]:
    """What ``source`` imports or reaches of kubernetes_asyncio's API classes and watch, fully qualified."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> the kubernetes_asyncio module or object it stands for
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == ROOT:
                    if is_api(alias.name):
                        found.append(alias.name)
                    local = alias.asname or alias.name.split(".")[0]
                    bound[local] = alias.name if alias.asname else ROOT
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == ROOT
        ):
            for alias in node.names:
                qualified = f"{node.module}.{alias.name}"
                if is_api(qualified):
                    found.append(qualified)
                bound[alias.asname or alias.name] = qualified
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts = dotted(node)
            if parts and parts[0] in bound:
                qualified = ".".join([bound[parts[0]], *parts[1:]])
                if is_api(qualified):
                    found.append(qualified)
    return sorted(set(found))


@pytest.mark.parametrize("module", sorted(HOOKS.rglob("*.py")), ids=lambda p: str(p.relative_to(HOOKS)))
def test_hooks_use_no_kubernetes_asyncio_api_class(module: Path) -> None:
    assert api_uses(module.read_text()) == [], f"{module.name}: use t9k_provider.kube.api.KubeApi instead"


def test_the_hooks_are_all_checked() -> None:
    assert {"async_t9k.py", "errors.py", "t9k.py"} <= {p.name for p in HOOKS.glob("*.py")}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "from kubernetes_asyncio.client import CustomObjectsApi",
            ["kubernetes_asyncio.client.CustomObjectsApi"],
        ),
        ("from kubernetes_asyncio.client import CoreV1Api as Core", ["kubernetes_asyncio.client.CoreV1Api"]),
        ("from kubernetes_asyncio import watch", ["kubernetes_asyncio.watch"]),
        ("import kubernetes_asyncio.watch", ["kubernetes_asyncio.watch"]),
        ("from kubernetes_asyncio.watch import Watch", ["kubernetes_asyncio.watch.Watch"]),
        (
            "from kubernetes_asyncio.client.api import core_v1_api",
            ["kubernetes_asyncio.client.api.core_v1_api"],
        ),
        (
            "from kubernetes_asyncio import client\ndef f(c):\n    return client.CustomObjectsApi(c)",
            ["kubernetes_asyncio.client.CustomObjectsApi"],
        ),
        (
            "def f(c):\n    import kubernetes_asyncio\n    return kubernetes_asyncio.client.BatchV1Api(c)",
            ["kubernetes_asyncio.client.BatchV1Api"],
        ),
        ("import kubernetes_asyncio.client as k\nk.CoreV1Api", ["kubernetes_asyncio.client.CoreV1Api"]),
        # not API classes: the client object, its errors and configuration, other packages' Api classes
        ("from kubernetes_asyncio.client import ApiClient, ApiException, Configuration", []),
        ("from kubernetes_asyncio import config\nconfig.load_kube_config", []),
        ("from kubernetes.client import CoreV1Api\nfrom t9k_provider.kube.api import KubeApi", []),
    ],
)
def test_the_check_finds_every_form(source: str, expected: list[str]) -> None:
    assert api_uses(source) == expected
