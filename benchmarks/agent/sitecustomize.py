"""Imported by every interpreter started with this folder on ``PYTHONPATH`` (Python's ``site`` does it):
when ``T9K_BENCH_USER_AGENT`` is set, every Kubernetes client the process creates (the provider's
``KubeApi``, the cncf operators' ``ApiClient``, sync or async) sends that User-Agent, so the API server's
request counters tell the Airflow side apart from the cluster's own components (which use the same
clients).

It works from interpreter start, before any DAG file is parsed, so the triggerer of a real deployment (which
parses none) and the task processes are tagged alike. The client modules are patched as they are imported:
importing them here would slow down every process started, the measured ones included.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any

CLIENT_MODULES = (
    "kubernetes.client.api_client",
    "kubernetes_asyncio.client.api_client",
    "t9k_provider.kube.api",
)


def tag(module: Any, agent: str) -> None:
    if hasattr(module, "USER_AGENT"):  # the provider's KubeApi sends the module's USER_AGENT
        module.USER_AGENT = agent
        return
    cls = module.ApiClient
    original = cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.user_agent = agent

    cls.__init__ = init


class ClientTagger(importlib.abc.MetaPathFinder):
    """Finds the client modules through the other finders and tags each once it has run."""

    def __init__(self, agent: str) -> None:
        self.agent = agent

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in CLIENT_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        run_module = loader.exec_module
        agent = self.agent

        def exec_module(module: Any) -> None:
            run_module(module)
            tag(module, agent)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("T9K_BENCH_USER_AGENT"):
    sys.meta_path.insert(0, ClientTagger(os.environ["T9K_BENCH_USER_AGENT"]))
