"""What an Airflow connection to a running local cluster holds (``t9k-local connection`` prints it): the
kubeconfig, and the templates of the tasks' extra links, the console's job pages and TensorBoard redirects
(docs/local-cluster.md#console). Plain data: nothing here imports Airflow.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.local.console.address import read_console
from t9k_provider.local.state import StateDir


def running_console(state: StateDir) -> dict[str, Any] | None:
    """``console.json`` of the console the running server serves (one an earlier server left is not taken:
    it may name another port); None when no server runs here or it runs no console (``--no-controller``)."""
    server = state.running()
    info = read_console(state.path)
    if server is None or info.get("serverPid") != server.pid:
        return None
    return info


def airflow_connection(state: StateDir) -> dict[str, Any]:
    """A ``kubernetes`` connection (``AIRFLOW_CONN_<ID>``'s JSON form) to the cluster of ``state``, with the
    console's link templates when it runs one."""
    extra: dict[str, Any] = {"kube_config_path": str(state.kubeconfig)}
    console = running_console(state)
    if console is not None:
        extra["job_url_template"] = console["jobUrlTemplate"]
        extra["tensorboard_url_template"] = console["tensorboardUrlTemplate"]
    return {"conn_type": "kubernetes", "extra": extra}
