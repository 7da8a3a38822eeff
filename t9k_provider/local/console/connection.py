"""Where the console answers (``STATE/console.json``, which it publishes) and what an Airflow connection to
a running local cluster holds (``t9k-local connection`` prints it): the kubeconfig, and the templates of the
task's extra links, the console's job pages and TensorBoard redirects (docs/local-cluster.md#console). Plain
data, no HTTP client or server: the CLI and ``make demo`` read it cheaply; nothing here imports Airflow.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from t9k_provider.local.components import read_status
from t9k_provider.local.state import StateDir

CONSOLE_FILE = "console.json"

#: The component's name in the server's status (``serving._components``).
COMPONENT = "console"


def read_console(state_dir: Path) -> dict[str, Any]:
    """What the console last wrote of itself (``url``, ``jobUrlTemplate``, ``tensorboardUrlTemplate``,
    ``pid``); empty if nothing."""
    try:
        data = json.loads((Path(state_dir) / CONSOLE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def publish(state_dir: Path, info: dict[str, Any]) -> None:
    """Replace ``console.json`` in one step: a reader sees the old file or the new one."""
    path = Path(state_dir) / CONSOLE_FILE
    tmp = path.with_name(f".{CONSOLE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(info, indent=1))
    os.replace(tmp, path)


def running_console(state: StateDir, timeout: float) -> dict[str, Any] | None:
    """``console.json`` of the console the running server started, once it has written it (a file left by an
    earlier server is not taken: it may name another port); None when the server runs no console
    (``--no-controller``) or it has not written the file within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        component = read_status(state).get(COMPONENT)
        if component is None:
            return None
        info = read_console(state.path)
        if info.get("pid") == component.get("pid") and info.get("jobUrlTemplate"):
            return info
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def airflow_connection(state: StateDir, timeout: float = 30.0) -> dict[str, Any]:
    """A ``kubernetes`` connection (``AIRFLOW_CONN_<ID>``'s JSON form) to the cluster of ``state``, with the
    console's link templates when it runs one."""
    extra: dict[str, Any] = {"kube_config_path": str(state.kubeconfig)}
    console = running_console(state, timeout)
    if console is not None:
        extra["job_url_template"] = console["jobUrlTemplate"]
        extra["tensorboard_url_template"] = console["tensorboardUrlTemplate"]
    return {"conn_type": "kubernetes", "extra": extra}
