"""How Kubernetes API failures map to Airflow outcomes: retry the call, retry the task, or fail for good.

The one classifier of the provider's API errors. kube's ``ApiError`` (the hook's and the triggers' client) is
an API server's answer with an HTTP status; anything else is a failure below HTTP (connection refused or
reset, timeout), which is only ever transient.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from typing import TypeVar

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

T = TypeVar("T")

#: HTTP statuses worth retrying: throttling and server-side trouble. 409 is NOT here: a conflict on create
#: is an identity question the operator answers (adopt or fail), never something to blindly repeat.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
CALL_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 15.0


class T9kInfrastructureError(AirflowException):
    """The infrastructure ended the try, not the job's program: a node lost or drained, a preemption, the
    cluster unable to place the job in time, the API unreachable. Retried per the task's ``retries`` (with
    the provider's retry policy on Airflow 3.3, after its delay), resuming from the checkpoint."""


class T9kConfigurationError(AirflowFailException):
    """The job cannot run as written or as allowed (an invalid manifest, the API's 403, 404 or 422, an image
    or a configuration a replica cannot start with): no retry would change that."""


class T9kApiError(T9kInfrastructureError):
    """A Kubernetes API failure that may go away: the task is retried per its ``retries``."""


class T9kFatalApiError(T9kConfigurationError):
    """A Kubernetes API failure that a retry cannot fix (bad spec, missing CRD, RBAC denial)."""


def _is_kube_error(exc: BaseException) -> bool:
    """kube's ``ApiError``. Looked up, not imported: if ``kube.api`` was never loaded nothing raised one,
    and the operators (imported at DAG parse) stay free of the async client."""
    api = sys.modules.get("t9k_provider.kube.api")
    return api is not None and isinstance(exc, api.ApiError)


def api_status(exc: BaseException) -> int | None:
    """HTTP status of an API server's answer, else None (a failure below HTTP)."""
    status = getattr(exc, "status", None) if _is_kube_error(exc) else None
    return status if isinstance(status, int) and status > 0 else None


def is_transient(exc: BaseException) -> bool:
    """Throttling, 5xx and connection-level errors; 4xx answers are definitive."""
    if _is_kube_error(exc):
        status = api_status(exc)
        return status is None or status in TRANSIENT_STATUSES
    return isinstance(exc, (OSError, TimeoutError)) or _is_aiohttp_error(exc)


def _is_aiohttp_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("aiohttp")


def retry_after_seconds(exc: BaseException) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return min(float(value), BACKOFF_CAP_SECONDS) if value is not None else None
    except (TypeError, ValueError):
        return None


def backoff_seconds(attempt: int, exc: BaseException | None = None) -> float:
    """Full-jitter exponential backoff, or the server's Retry-After when it sent one."""
    hinted = retry_after_seconds(exc) if exc is not None else None
    if hinted is not None:
        return hinted
    return random.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt))


def call_with_retry(what: str, fn: Callable[[], T], attempts: int = CALL_ATTEMPTS) -> T:
    """Run one API call, retrying transient failures; a definitive answer is raised unchanged."""
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if not is_transient(exc):
                raise
            if attempt == attempts - 1:
                raise T9kApiError(
                    f"{what}: Kubernetes API unavailable after {attempts} attempts: {exc}"
                ) from exc
            time.sleep(backoff_seconds(attempt, exc))
    raise AssertionError("unreachable")


def describe(exc: BaseException) -> str:
    """The API server's own message when it answered, else the exception text."""
    return str(exc.message) if _is_kube_error(exc) else str(exc) or type(exc).__name__


def classify(exc: BaseException, action: str) -> Exception:
    """Turn an API failure during ``action`` into the Airflow exception that gives the right task outcome."""
    if isinstance(exc, (AirflowException, AirflowFailException)):
        return exc
    status = api_status(exc)
    detail = describe(exc)
    if status in (400, 422):
        return T9kFatalApiError(f"{action}: the API server rejected the job: {detail}")
    if status == 403:
        return T9kFatalApiError(
            f"{action}: permission denied (check the RBAC of the connection's user): {detail}"
        )
    if status == 401:
        return T9kApiError(f"{action}: unauthorized (credentials expired or wrong): {detail}")
    if status == 404:
        return T9kFatalApiError(f"{action}: not found: {detail}")
    return T9kApiError(f"{action}: {detail}")
