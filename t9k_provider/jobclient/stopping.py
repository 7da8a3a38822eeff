"""The one policy for stopping a task's job, used by the worker's kill path and the trigger's alike.

Stop only what is still ours and still running: read the job, keep it when it is gone, holds another object
or already ended (deleting frees nothing then, and a later try reports its result), otherwise delete it with
the uid and resourceVersion just read as preconditions, so a job that ends or is replaced meanwhile is kept
(the delete answers 409 and the policy is applied again to a fresh read).
"""

from __future__ import annotations

from typing import Any, Literal

from t9k_provider.jobclient.identity import is_ours
from t9k_provider.waiting import status as job_status

#: Reads and conditional deletes before giving up on a job that keeps changing under the stop.
STOP_ATTEMPTS = 3

Stopped = Literal["gone", "ended", "deleted", "changing"]


def stop_action(
    job: dict[str, Any] | None, uid: str | None, identity: dict[str, str] | None
) -> Literal["gone", "ended", "delete"]:
    """What to do with ``job`` (None: not found) when stopping the job ``uid``; without a uid (the task was
    killed while creating it) the job is ours only if it carries the task instance's ``identity``."""
    meta = (job or {}).get("metadata") or {}
    mine = meta.get("uid") == uid if uid else bool(job and identity and is_ours(job, identity))
    if not mine:
        return "gone"
    if job_status.outcome(job or {}) in ("succeeded", "failed"):
        return "ended"
    return "delete"


def preconditions(job: dict[str, Any]) -> tuple[str | None, str | None]:
    """The uid and resourceVersion a delete of ``job`` is conditional on."""
    meta = job.get("metadata") or {}
    return meta.get("uid"), meta.get("resourceVersion")
