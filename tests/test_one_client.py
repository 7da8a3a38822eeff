"""One Kubernetes client: every part of the provider talks to a cluster through ``t9k_provider.kube`` (its
``KubeApi`` and kubeconfig loader), never through the generated ``kubernetes`` or ``kubernetes_asyncio``
clients or the cncf provider's hooks, whose import cost a task process 0.3 s
(docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators).

Checked on the source (AST), so an import inside a function is seen as well as a module-level one. Left out:
``t9k_provider.testing``, whose helpers hand users the real clients, and the local API server's OpenAPI
document, built from ``kubernetes_asyncio``'s models.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import t9k_provider

#: Pure source checks: Airflow's version changes nothing here, so make test-airflow2 leaves it out.
pytestmark = pytest.mark.airflow_independent

PACKAGE = Path(t9k_provider.__file__).parent
FORBIDDEN = ("kubernetes", "kubernetes_asyncio", "airflow.providers.cncf")
EXEMPT = ("testing/", "local/apiserver/openapi.py")


def forbidden_imports(source: str) -> list[str]:
    """The modules of ``FORBIDDEN`` that ``source`` imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)]
    return found


def checked() -> list[Path]:
    modules = sorted(PACKAGE.rglob("*.py"))
    return [m for m in modules if not str(m.relative_to(PACKAGE)).startswith(EXEMPT)]


@pytest.mark.parametrize("module", checked(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_other_kubernetes_client(module: Path) -> None:
    assert forbidden_imports(module.read_text()) == [], "use t9k_provider.kube (KubeApi, kubeconfig)"


def test_the_task_path_is_checked() -> None:
    names = {str(m.relative_to(PACKAGE)) for m in checked()}
    task_path = {"hooks/t9k.py", "kube/api.py", "operators/job.py", "triggers/job.py", "controller/cli.py"}
    assert task_path <= names


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import kubernetes", ["kubernetes"]),
        ("from kubernetes import client, config", ["kubernetes"]),
        ("def f():\n    from kubernetes_asyncio.client import ApiClient", ["kubernetes_asyncio.client"]),
        ("import kubernetes_asyncio.client as k", ["kubernetes_asyncio.client"]),
        (
            "from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook",
            ["airflow.providers.cncf.kubernetes.hooks.kubernetes"],
        ),
        ("from t9k_provider.kube.api import KubeApi\nimport kubernetes_like", []),
        ("from . import kubernetes", []),
    ],
)
def test_the_check_finds_every_form(source: str, expected: list[str]) -> None:
    assert forbidden_imports(source) == expected
