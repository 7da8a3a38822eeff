"""The one way tests wait for what a cluster does asynchronously: every wait names what it waits for and,
when it times out, shows what it last saw."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes.client.rest import ApiException

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T], timeout: float = 30, interval: float = 0.1) -> T:
    """``probe``'s first truthy result within ``timeout`` seconds. An API error counts as "not yet" (the logs
    of a container still waiting to start, an object not yet created)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except ApiException as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
