"""The Kubernetes mechanics of a task's job in the worker, over the sync ``T9kHook``: submit it or adopt the
one an earlier try left, read it, wait until a deleted one is gone, list its pods and read their logs for
the conclusion, mark it reported, delete it, stop it (the kill path, which runs in a signal handler).

The operator keeps the Airflow lifecycle and asks this client for everything it does to the cluster, as the
cncf provider's operators ask their ``PodManager``; the waits go through ``feed`` (async, in the worker and
the triggerer alike) and the trigger's kill path through ``aio``, with the same stop policy (``stopping``).
Errors are Airflow's: they decide whether the task may retry.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from t9k_provider.hooks.errors import api_status, classify
from t9k_provider.jobclient import identity as ident
from t9k_provider.jobclient import reattach
from t9k_provider.jobclient.identity import JobRef
from t9k_provider.jobclient.stopping import STOP_ATTEMPTS, Stopped, preconditions, stop_action
from t9k_provider.replicalogs.targets import pod_selector
from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.result import WaitResult, deleted, replaced

if TYPE_CHECKING:
    from t9k_provider.hooks.t9k import T9kHook

#: How long a replaced or terminating job may take to disappear before a new one is created.
DELETION_WAIT_SECONDS = 300.0
#: Creates tried while the name keeps holding a job being replaced or deleted.
SUBMIT_ATTEMPTS = 3


class Adoption(NamedTuple):
    """How a try treats the job an earlier try of its task instance left (``reattach.decide``)."""

    policy: reattach.Policy
    starts_run: bool
    retry_on_job_failure: bool


class JobClient:
    def __init__(self, hook: T9kHook, log: logging.Logger | Any) -> None:
        self.hook = hook
        self.log = log

    def submit_or_adopt(
        self, body: dict[str, Any], plural: str, task_identity: dict[str, str], adoption: Adoption
    ) -> dict[str, Any]:
        """Create the job, or adopt (or replace) the one of an earlier try that holds its name; a job of the
        name that is not this task instance's is never touched."""
        name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
        for _ in range(SUBMIT_ATTEMPTS):
            try:
                created = self.hook.create_job(plural, namespace, body)
                self.log.info("created job %s/%s uid=%s", namespace, name, created["metadata"].get("uid"))
                return created
            except Exception as exc:
                if api_status(exc) != 409:
                    raise
            existing = self._get(plural, namespace, name)
            if existing is None:
                continue  # deleted between our create and get: create again
            if not ident.is_ours(existing, task_identity):
                raise AirflowFailException(_not_ours(body["kind"], existing))
            decision = reattach.decide(
                existing,
                adoption.policy,
                starts_run=adoption.starts_run,
                retry_on_job_failure=adoption.retry_on_job_failure,
            )
            if decision == "adopt":
                self._say_adopted(existing, adoption)
                return existing
            if decision == "replace":
                self._say_replaced(existing, adoption)
                self.hook.delete_job(plural, namespace, name, uid=existing["metadata"].get("uid"))
            else:
                self.log.info("job %s/%s of an earlier try is being deleted: waiting for it", namespace, name)
            self.wait_gone(plural, namespace, name)
        raise AirflowException(f"job {namespace}/{name} kept reappearing while being replaced; try again")

    def _say_adopted(self, job: dict[str, Any], adoption: Adoption) -> None:
        reported = adoption.policy == "if_unchecked" and ident.is_checked(job)
        why = "; that try reported it, but Airflow retried the task: reporting it again" if reported else ""
        meta = job["metadata"]
        self.log.info(
            "adopting job %s/%s (phase %s) left by an earlier try%s",
            meta["namespace"], meta["name"], job_status.phase(job) or "unset", why,
        )  # fmt: skip

    def _say_replaced(self, job: dict[str, Any], adoption: Adoption) -> None:
        meta = job["metadata"]
        cleared = ", the task was cleared" if adoption.starts_run and ident.is_checked(job) else ""
        self.log.info(
            "replacing job %s/%s (phase %s) from an earlier try (reattach_policy=%s%s)",
            meta["namespace"], meta["name"], job_status.phase(job) or "unset",
            getattr(adoption.policy, "__name__", adoption.policy), cleared,
        )  # fmt: skip

    def wait_gone(self, plural: str, namespace: str, name: str) -> None:
        deadline = time.monotonic() + DELETION_WAIT_SECONDS
        while time.monotonic() < deadline:
            if self._get(plural, namespace, name) is None:
                return
            time.sleep(1.0)
        raise AirflowException(
            f"job {namespace}/{name} still exists {DELETION_WAIT_SECONDS:g}s after deletion"
        )

    def _get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The job, or None when there is none of that name."""
        try:
            return self.hook.get_job(plural, namespace, name)
        except Exception as exc:
            if api_status(exc) == 404:
                return None
            raise

    def read(self, ref: JobRef) -> dict[str, Any] | WaitResult:
        """The job ``ref`` names, or the verdict when it is gone: deleted, or its name holds another object
        now (``waiting.result``, as a wait decides it); raises what the API raises otherwise."""
        try:
            job = self._get(ref.plural, ref.namespace, ref.name)
        except Exception as exc:
            if api_status(exc) is None:
                raise  # no answer from the API server: the hook's retries are spent
            raise classify(exc, f"read job {ref.name}") from exc
        if job is None:
            return deleted(ref.namespace, ref.name, owned=ref.uid is not None)
        if ref.uid and job["metadata"].get("uid") != ref.uid:
            return replaced(ref.namespace, ref.name, job["metadata"].get("uid"))
        return job

    def pods(self, ref: JobRef) -> list[dict[str, Any]]:
        """The job's pods as they are now (the conclusion's); raises what the API raises."""
        return self.hook.list_pods(ref.namespace, pod_selector(ref.kind, ref.name))

    def replica_log(self, ref: JobRef, pod: str, container: str, *, tail_lines: int, limit_bytes: int) -> str:
        """The last ``tail_lines`` lines (at most ``limit_bytes``) of a container of the job's pod ``pod``,
        timestamped; raises what the API raises."""
        return self.hook.read_pod_log(
            ref.namespace, pod, container, tail_lines=tail_lines, limit_bytes=limit_bytes
        )

    def delete(self, ref: JobRef) -> bool:
        """Delete the job ``ref`` names (its uid guarding against a newer one); False when it was gone."""
        return self.hook.delete_job(ref.plural, ref.namespace, ref.name, uid=ref.uid)

    def mark_checked(self, ref: JobRef) -> None:
        """Record that a try reported the job's outcome (``reattach`` reads it); failing to only warns."""
        try:
            self.hook.patch_job_annotations(ref.plural, ref.namespace, ref.name, {ident.CHECKED: "true"})
        except Exception as exc:  # the outcome stands; a later try would merely re-report it
            self.log.warning("could not mark job %s as checked: %s", ref.name, exc)

    def stop(self, ref: JobRef, identity: dict[str, str] | None) -> Stopped:
        """Stop the job per ``stopping``; raises what the API raises (the kill path reports it)."""
        for _ in range(STOP_ATTEMPTS):
            job = self._get(ref.plural, ref.namespace, ref.name)
            action = stop_action(job, ref.uid, identity)
            if action != "delete":
                return action
            uid, version = preconditions(job or {})
            if self.hook.delete_job(ref.plural, ref.namespace, ref.name, uid=uid, resource_version=version):
                return "deleted"
        return "changing"


def _not_ours(kind: str, job: dict[str, Any]) -> str:
    meta = job.get("metadata") or {}
    marks = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(ident.ANNOTATION_PREFIX)
    }
    return (
        f"a {kind} named {meta.get('namespace')}/{meta.get('name')} already exists and was not created by "
        f"this task instance (its Airflow annotations: {marks or 'none'}); choose another metadata.name or "
        "delete that job"
    )
