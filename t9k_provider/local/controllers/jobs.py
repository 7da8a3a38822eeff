"""A minimal batch/v1 Job controller (BeamJob submits through one): pods from the template, parallelism and
completions, backoffLimit, activeDeadlineSeconds, suspend, and the Complete / Failed conditions."""

from __future__ import annotations

import time
from typing import Any

from t9k_provider.kube.informer import OWNER_INDEX
from t9k_provider.kube.resources import JOBS
from t9k_provider.kube.timestamps import now_rfc3339, parse_timestamp
from t9k_provider.local.controllers.owned import PodOwnerController, pod_from_template
from t9k_provider.local.controllers.podstate import pod_phase, pod_ready
from t9k_provider.local.machinery import events

COMPONENT = "job-controller"
DEFAULT_BACKOFF_LIMIT = 6


def _condition(ctype: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": "True",
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def finished_condition(job: dict[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return cond["type"]
    return None


class JobController(PodOwnerController):
    """Owners: Jobs; children: pods."""

    resource = JOBS
    component = COMPONENT

    def _owned_pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        return self.children.by_index(OWNER_INDEX, job["metadata"]["uid"])

    async def sync(self, job: dict[str, Any]) -> None:
        meta, spec = job["metadata"], job.get("spec") or {}
        ns, name = meta.get("namespace", "default"), meta["name"]
        status = dict(job.get("status") or {})
        pods = self._owned_pods(job)
        if meta.get("deletionTimestamp"):
            return
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        live = [p for p in active if not p["metadata"].get("deletionTimestamp")]
        succeeded = max(int(status.get("succeeded") or 0), sum(pod_phase(p) == "Succeeded" for p in pods))
        failed = max(int(status.get("failed") or 0), sum(pod_phase(p) == "Failed" for p in pods))
        restarts = sum(_restarts(p) for p in active)
        ready = sum(pod_ready(p) for p in active)
        now = now_rfc3339()
        finished = finished_condition(job)
        suspended = bool(spec.get("suspend"))
        new_status: dict[str, Any] = {"active": len(live), "succeeded": succeeded, "failed": failed}
        new_status["ready"] = ready
        conditions = list(status.get("conditions") or [])
        if not suspended and not status.get("startTime"):
            new_status["startTime"] = now
        start = status.get("startTime") or new_status.get("startTime")

        if finished is None:
            completions = spec.get("completions")
            parallelism = int(spec.get("parallelism", 1))
            backoff_limit = int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT))
            deadline = spec.get("activeDeadlineSeconds")
            failure: tuple[str, str] | None = None
            if failed + restarts > backoff_limit:
                failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
            elif deadline is not None and start and _age(start) >= float(deadline):
                failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
            if failure is not None:
                await self._delete_pods(job, live)
                conditions.append(_condition("Failed", failure[0], failure[1], now))
                new_status["active"] = 0
                await events.record(
                    self.kube, job, failure[0], failure[1], component=COMPONENT, event_type="Warning"
                )
            elif (completions is not None and succeeded >= int(completions)) or (
                completions is None and succeeded > 0 and not live
            ):
                reached = "Reached expected number of succeeded pods"
                await self._delete_pods(job, live)  # as upstream: a finished Job keeps nothing running
                conditions.append(_condition("Complete", "CompletionsReached", reached, now))
                new_status["completionTime"] = now
                new_status["active"] = 0
                await events.record(self.kube, job, "Completed", "Job completed", component=COMPONENT)
            elif suspended:
                await self._delete_pods(job, live)
                new_status["active"] = 0
            else:
                if completions is not None:
                    want = min(parallelism, int(completions) - succeeded)
                else:
                    want = parallelism if succeeded == 0 else 0
                missing = max(0, want - len(live))
                for _ in range(missing):
                    await self._create_pod(job)
                new_status["active"] = len(live) + missing
                if deadline is not None and start:
                    self.queue.add_after((ns, name), max(0.0, float(deadline) - _age(start)) + 0.05)
        else:
            new_status["active"] = 0 if finished == "Failed" else new_status["active"]
        new_status["conditions"] = conditions
        # written through: the next sync sees the end of a Job whose pods it just deleted, not a Job to rerun
        await self.write_status(job, {**status, **new_status})

    async def _create_pod(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        uid, name = meta["uid"], meta["name"]
        labels = {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
        await self.pod_writer.create(job, pod_from_template(job, labels=labels))

    async def _delete_pods(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            await self.pod_writer.delete(job, pod)


def _restarts(pod: dict[str, Any]) -> int:
    if (pod.get("spec") or {}).get("restartPolicy") != "OnFailure":
        return 0
    status = pod.get("status") or {}
    statuses = list(status.get("containerStatuses") or []) + list(status.get("initContainerStatuses") or [])
    return sum(int(s.get("restartCount") or 0) for s in statuses)


def _age(timestamp: str) -> float:
    return time.time() - parse_timestamp(timestamp).timestamp()
