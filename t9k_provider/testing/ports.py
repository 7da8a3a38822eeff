"""Loopback ports for the processes tests start.

A port is handed to a process that binds it later (an API server, a controller's probes, ``torchrun``'s
master), so it must stay free until then. A port from ``bind(0)`` comes from the ephemeral range, which every
outgoing connection on the machine draws from as well (a suite makes thousands to its API servers): one of
them can take it first, and two calls can return the same port. These ports come from below that range, where
only an explicit bind can take them, and one process never hands out the same port twice.
"""

from __future__ import annotations

import random
import socket
import threading

#: Below Linux's default ephemeral range (``net.ipv4.ip_local_port_range``, 32768-60999).
PORT_RANGE = (20000, 32767)
_given: set[int] = set()
_random = random.Random()  # seeded from the OS: not the global one a test may have seeded
_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and outside the ephemeral range (see the module's doc)."""
    low, high = PORT_RANGE
    with _lock:
        for _ in range(1000):
            port = _random.randint(low, high)
            if port not in _given and _bindable(port):
                _given.add(port)
                return port
    raise RuntimeError(f"no free port in {low}-{high} after 1000 tries")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
