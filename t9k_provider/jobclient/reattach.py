"""What a try does with the job an earlier try of its task instance left behind (the job has the same name).

The table in docs/airflow.md ("Retries and reattach") is ``decide``. The hard case is a job that Succeeded
and that an earlier try already reported (``identity.CHECKED``): after a user cleared the task it must run
again, but when Airflow lost that try's result (apache/airflow#72716: a stale executor event fails a try
that was resumed from deferral; a lost worker; a killed scheduler) and retried on its own, running it again
would only repeat finished work. ``starts_a_run`` tells the two apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from t9k_provider.jobclient import identity as ident
from t9k_provider.waiting import status as job_status

#: A ``ReattachPolicy`` of ``operators.options`` (or its string), or a callable: whether to adopt the job.
Policy = str | Callable[[dict[str, Any]], bool]
Decision = Literal["adopt", "replace", "await_deletion"]


def starts_a_run(ti: Any, retries: int) -> bool:
    """Whether this try is the task instance's first, or the first after a user cleared it, rather than an
    automatic retry.

    Airflow sets ``max_tries`` to the task's retries when it creates a task instance and to
    ``try_number + retries`` when a user clears it; retries leave it alone. So the first try of the current
    run is ``max_tries - retries + 1``, as Airflow's own sensors compute it
    (``RuntimeTaskInstance.get_first_reschedule_date``). Without these numbers, a try counts as a new run.
    """
    try_number, max_tries = getattr(ti, "try_number", None), getattr(ti, "max_tries", None)
    if not isinstance(try_number, int) or not isinstance(max_tries, int):
        return True
    return try_number <= max_tries - retries + 1


def decide(job: dict[str, Any], policy: Policy, *, starts_run: bool, retry_on_job_failure: bool) -> Decision:
    """Adopt the earlier try's job, replace it (delete, then create anew) or wait until its deletion ends."""
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "await_deletion"
    if callable(policy):
        return "adopt" if policy(job) else "replace"
    if policy == "never":
        return "replace"
    outcome = job_status.outcome(job)
    if policy == "if_running":
        return "replace" if outcome in ("succeeded", "failed") else "adopt"
    if not ident.is_checked(job):
        return "adopt"  # nobody reported it: this try does
    if starts_run:
        return "replace"  # a user cleared the task: run it again
    if outcome == "failed" and retry_on_job_failure:
        return "replace"  # the retry a reported job failure asked for
    return "adopt"  # Airflow lost the reported result and retried on its own: report it again
