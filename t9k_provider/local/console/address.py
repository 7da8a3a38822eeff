"""Where the console answers (docs/local-cluster.md#console).

The cluster's server opens the console's listening socket (``listen``) before it starts any component and
hands it to each console process it starts, as socket activation does: where the console answers is known,
and published in ``STATE/console.json``, before ``t9k-local up`` returns, and a restarted console serves the
same socket, so links already handed out keep working. ``console.json`` holds ``url`` (the base URL),
``jobUrlTemplate`` (``<url>/jobs/{namespace}/{kind}/{name}``, the format of ``[t9k] job_url_template``),
``tensorboardUrlTemplate`` (``<url>/tensorboards/{namespace}/{name}``, which redirects to where the
TensorBoard serves once it is Ready, and says why not before) and ``serverPid`` (the server that opened it).
A restarted cluster takes the previous port again when it is free. Sockets and files only, no HTTP client or
server, so the CLI and ``make demo`` read it cheaply.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

CONSOLE_FILE = "console.json"
HOST = "127.0.0.1"
JOB_PATH_TEMPLATE = "/jobs/{namespace}/{kind}/{name}"
TENSORBOARD_PATH_TEMPLATE = "/tensorboards/{namespace}/{name}"


def read_console(state_dir: Path) -> dict[str, Any]:
    """Where the console answers (``url``, ``jobUrlTemplate``, ``tensorboardUrlTemplate``, ``serverPid``), as
    its server last published it; empty if nothing."""
    try:
        data = json.loads((Path(state_dir) / CONSOLE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _publish(state_dir: Path, info: dict[str, Any]) -> None:
    """Replace ``console.json`` in one step: a reader sees the old file or the new one."""
    path = Path(state_dir) / CONSOLE_FILE
    tmp = path.with_name(f".{CONSOLE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(info, indent=1))
    os.replace(tmp, path)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def pick_port(state_dir: Path) -> int:
    """The previous console's port if it is free, else any (0)."""
    previous = read_console(state_dir).get("url", "").rpartition(":")[2]
    return int(previous) if previous.isdigit() and _free(int(previous)) else 0


def listen(state_dir: Path) -> socket.socket:
    """The console's listening socket (the previous port when free), published in ``console.json``; the
    cluster's server holds it for as long as it runs and passes it to each console process it starts."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, pick_port(state_dir)))
    sock.listen(128)
    url = f"http://{HOST}:{sock.getsockname()[1]}"
    _publish(state_dir, {
        "url": url,
        "jobUrlTemplate": url + JOB_PATH_TEMPLATE,
        "tensorboardUrlTemplate": url + TENSORBOARD_PATH_TEMPLATE,
        "serverPid": os.getpid(),
    })  # fmt: skip
    return sock
