"""The bounded wait init container for replicas that need a peer first (docs/controller.md#r4).

A target `host` waits until the name resolves (frameworks retry connections but not unknown hosts);
`host:port` also waits until the port accepts connections (sshd on SSH workers).

The command is `sh -c` running an inline Python program, so it works in any Python-based training image
and on the local cluster's process kubelet (which ignores the image). Without Python it does not wait.
After the timeout it exits 0: the framework then reports the real connection error itself.
"""

from __future__ import annotations

from typing import Any

WAIT_CONTAINER_NAME = "t9k-wait-peers"
DEFAULT_TIMEOUT_SECONDS = 300

_PROGRAM = """\
import socket, sys, time
deadline = time.monotonic() + float(sys.argv[1])
for target in sys.argv[2:]:
    host, _, port = target.partition(":")
    while True:
        try:
            if port:
                socket.create_connection((host, int(port)), timeout=2).close()
            else:
                socket.getaddrinfo(host, None)
            print("t9k-wait: " + target + " is reachable", flush=True)
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                print("t9k-wait: giving up on " + target + ": " + str(exc), file=sys.stderr, flush=True)
                sys.exit(0)
            time.sleep(1)
"""

_SHELL = (
    "for py in python3 python; do "
    'command -v "$py" >/dev/null 2>&1 && exec "$py" -c "$T9K_WAIT_PROGRAM" "$@"; '
    'done; echo "t9k-wait: no python in the image; not waiting" >&2'
)


def wait_container(
    image: str, targets: list[tuple[str, int]], timeout: int = DEFAULT_TIMEOUT_SECONDS
) -> dict[str, Any]:
    return {
        "name": WAIT_CONTAINER_NAME,
        "image": image,
        "command": ["sh", "-c", _SHELL, "t9k-wait", str(timeout), *targets],
        "env": [{"name": "T9K_WAIT_PROGRAM", "value": _PROGRAM}],
    }
