"""The one way tests and benchmarks wait for what a cluster does asynchronously: every wait names what it
waits for and, when it times out, says what it last saw, and what each running cluster of this process
looked like then (the reporters `LocalCluster` registers while it runs: its components, pods, their
containers' states and last log lines)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _not_yet() -> tuple[type[BaseException], ...]:
    """API errors: the object is not created yet, the logs of a container still waiting to start... Each
    client's own exception, for the clients installed here."""
    from t9k_provider.kube.api import ApiError

    errors: list[type[BaseException]] = [ApiError]
    try:
        from kubernetes.client.rest import ApiException
    except ImportError:
        pass
    else:
        errors.append(ApiException)
    try:
        from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException
    except ImportError:
        pass
    else:
        errors.append(AsyncApiException)
    return tuple(errors)


#: What each running cluster says of itself when a wait gives up, by a key of its owner's.
_reporters: dict[object, Callable[[], str]] = {}


def add_reporter(key: object, report: Callable[[], str]) -> None:
    """Have ``report()`` said in the message of every wait that gives up, until ``remove_reporter(key)``."""
    _reporters[key] = report


def remove_reporter(key: object) -> None:
    _reporters.pop(key, None)


def reports() -> str:
    """What the running clusters say of themselves (a report that fails says why instead)."""
    said = []
    for report in list(_reporters.values()):
        try:
            said.append(report())
        except Exception as exc:  # the report of a failure must never hide the failure itself
            said.append(f"(the cluster's report failed: {exc!r})")
    return "\n".join(said)


def _timed_out(what: str, timeout: float, last: Any) -> TimeoutError:
    message = f"timed out after {timeout:g}s waiting for {what}; last: {last!r}"
    if state := reports():
        message += f"\n{state}"
    return TimeoutError(message)


class Remaining:
    """What a ``none_left`` probe still found: false, so the wait goes on; said as the wait's last sight."""

    def __init__(self, items: Any) -> None:
        self.items = items

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"still there: {self.items!r}"


def none_left(probe: Callable[[], Any]) -> Callable[[], bool | Remaining]:
    """A ``wait_for`` probe that holds once ``probe()`` finds nothing (an empty list, None); until then its
    last sight says what ``probe()`` still found, where ``lambda: not probe()`` said only ``False``."""

    def check() -> bool | Remaining:
        found = probe()
        return True if not found else Remaining(found)

    return check


def wait_for(what: str, probe: Callable[[], T], timeout: float = 30, interval: float = 0.1) -> T:
    """``probe``'s first truthy result within ``timeout`` seconds; an API error counts as "not yet"."""
    not_yet = _not_yet()
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except not_yet as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last)
        time.sleep(interval)


async def wait_for_async(
    what: str, probe: Callable[[], Awaitable[T] | T], timeout: float = 30, interval: float = 0.1
) -> T:
    """``wait_for`` in a coroutine, without blocking its event loop; ``probe`` may be a coroutine function."""
    not_yet = _not_yet()
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
            if inspect.isawaitable(last):
                last = await last
        except not_yet as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last)
        await asyncio.sleep(interval)
