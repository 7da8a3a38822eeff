"""Per-replica decisions: create, keep, restart (with budgets) or stop (spec sections 5, 7.3, R1-R3, R8, R9).

Everything a later reconcile needs to stay restart-safe is in the replica record written to status:
`restartCount` (per replica), and `replacedUid`, the uid of the pod the controller is replacing, so a failure
is counted exactly once however many times the same observation is reconciled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from t9k_provider.jobs.constants import RETRYABLE_EXIT_CODES
from t9k_provider.jobs.contract import ANNOTATION_RESTART_COUNT
from t9k_provider.kube.timestamps import parse_time

from .model import Plan, ReplicaGroup
from .names import pod_name
from .pods import build_pod
from .podstate import PodState, classify, telling_exit_reason
from .types import Action, Create, Delete, Event

# A pod still terminating this long after its deletion deadline is force-deleted (node lost, R8).
STUCK_TERMINATING_SECONDS = 300

ACTIVE, PAUSED, STOPPED = "active", "paused", "stopped"


@dataclass
class Round:
    """The result of one pass over every desired replica."""

    records: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    failures: dict[tuple[str, int], str] = field(default_factory=dict)  # ReplicaFailure message per replica
    # Failed pods whose container ended for a reason of its own (e.g. OOMKilled): pod name -> the words
    terminations: dict[str, str] = field(default_factory=dict)
    backoff_count: int = 0
    requeue_at: datetime | None = None

    @property
    def all_created(self) -> bool:
        """Every desired replica has an observed pod or a final outcome."""
        return all(r["phase"] not in ("Creating", "Deleted") for r in self.records.values())

    def wake_at(self, moment: datetime) -> None:
        self.requeue_at = moment if self.requeue_at is None else min(self.requeue_at, moment)


def _record(
    name: str, uid: str, phase: str, containers: list[dict[str, Any]], restarts: int, replaced_uid: str | None
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "phase": phase,
        "containers": containers,
        "restartCount": restarts,
    }
    if replaced_uid:
        rec["replacedUid"] = replaced_uid
    return rec


def _restart_wanted(group: ReplicaGroup, state: PodState) -> bool:
    policy = group.restart_policy
    if state.phase == "Succeeded":
        return policy == "Always"
    if policy in ("OnFailure", "Always"):
        return True
    return policy == "ExitCode" and state.exit_code in RETRYABLE_EXIT_CODES


def _describe(name: str, state: PodState) -> str:
    """How the replica's pod ended, as a sentence's start ("Pod x failed with exit code 137 (OOMKilled)")."""
    if state.phase == "Succeeded":
        return f"Pod {name} succeeded"
    if state.exit_code is not None:
        said = f" ({state.exit_reason})" if telling_exit_reason(state.exit_reason) else ""
        return f"Pod {name} failed with exit code {state.exit_code}{said}"
    return f"Pod {name} failed ({state.reason or 'no exit code'})"


def _force_delete_if_stuck(rnd: Round, pod: dict[str, Any], now: datetime) -> None:
    deleting = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting is None:
        return
    limit = deleting + timedelta(seconds=STUCK_TERMINATING_SECONDS)
    if now >= limit:
        meta = pod["metadata"]
        rnd.actions.append(Delete("v1", "Pod", meta["name"], uid=meta.get("uid"), grace_period_seconds=0))
        rnd.events.append(
            Event("Warning", "ForceDelete", f"Pod {meta['name']} was stuck terminating; force-deleting it")
        )
    else:
        rnd.wake_at(limit)


def evaluate(
    job: dict[str, Any],
    plan: Plan,
    pods: dict[tuple[str, int], dict[str, Any]],
    prior_records: dict[str, dict[str, Any]],
    prior_backoff: int,
    now: datetime,
    mode: str,
    resumed: bool,
    may_create: bool,
) -> Round:
    """Decide every replica. `mode` is ACTIVE (create and restart), PAUSED (delete, keep outcomes) or
    STOPPED (terminal: observe only; cleanup is separate)."""
    rnd = Round(backoff_count=prior_backoff)
    job_name = job["metadata"]["name"]
    debug = plan.debug is not None
    states = {
        (g.type, i): classify(pods[(g.type, i)], g.training_container)
        for g in plan.groups
        for i in range(g.replicas)
        if (g.type, i) in pods
    }
    for key, state in states.items():
        if state.phase == "Failed" and telling_exit_reason(state.exit_reason):
            name = pods[key]["metadata"]["name"]
            rnd.terminations[name] = f"{state.exit_reason} (exit code {state.exit_code})"
    running_types = {
        g.type
        for g in plan.groups
        if all((s := states.get((g.type, i))) is not None and s.ready for i in range(g.replicas))
    }
    for group in plan.groups:
        for index in range(group.replicas):
            name = pod_name(job_name, group.type, index, group.indexed)
            key = (group.type, index)
            prior = prior_records.get(name) or {}
            pod = pods.get(key)
            restarts = int(prior.get("restartCount") or 0)
            replaced = prior.get("replacedUid") or None
            if pod is not None:
                annotated = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_RESTART_COUNT) or "0"
                restarts = max(restarts, int(annotated) if annotated.isdigit() else 0)
            prior_phase = prior.get("phase")

            if pod is not None and replaced and pod["metadata"].get("uid") == replaced:
                # The controller already decided to replace this pod (and counted it): finish the job.
                if mode == STOPPED:
                    rnd.records[key] = _record(
                        name, replaced, "Failed", prior.get("containers") or [], restarts, replaced
                    )
                    continue
                if (pod["metadata"].get("deletionTimestamp")) is None:
                    rnd.actions.append(Delete("v1", "Pod", name, uid=replaced))
                else:
                    _force_delete_if_stuck(rnd, pod, now)
                phase = "Deleted" if mode == PAUSED else "Creating"
                rnd.records[key] = _record(name, "", phase, prior.get("containers") or [], restarts, replaced)
                rnd.failures[key] = f"Pod {name} is being restarted."
                continue

            if pod is None:
                if prior_phase in ("Succeeded", "Failed"):
                    # A finished replica is never run again, even if its pod is gone (R1).
                    rnd.records[key] = _record(
                        name,
                        prior.get("uid", ""),
                        prior_phase,
                        prior.get("containers") or [],
                        restarts,
                        replaced,
                    )
                    continue
                if mode != ACTIVE:
                    rnd.records[key] = _record(name, prior.get("uid", ""), "Deleted", [], restarts, replaced)
                    continue
                gated = (
                    group.after_running is not None and not debug and group.after_running not in running_types
                )
                if not may_create or gated:
                    rnd.records[key] = _record(name, "", "Creating", [], restarts, replaced)
                    continue
                if prior_phase in ("Pending", "Running", "Unknown") and not replaced:
                    # Deleted from outside (preemption, manual delete): recreate, never charge the budget.
                    msg = f"Pod {name} was deleted from outside the controller; recreating it."
                    rnd.failures[key] = msg
                    rnd.events.append(Event("Warning", "PodDeleted", msg))
                rnd.actions.append(Create(build_pod(job, plan, group, index, restarts, resumed)))
                rnd.records[key] = _record(name, "", "Creating", [], restarts, replaced)
                continue

            uid = pod["metadata"].get("uid", "")
            state = states[key]
            if replaced and uid != replaced:
                replaced = None  # the replacement exists, so the old pod is gone for good
            if mode == PAUSED:
                # Finished pods hold no resources and keep their logs: a success is never re-run (R1), a
                # permanent failure stays one. A failure not yet handled is deleted and retried on resume.
                if state.phase == "Succeeded" or (state.phase == "Failed" and prior_phase == "Failed"):
                    rnd.records[key] = _record(name, uid, state.phase, state.containers, restarts, replaced)
                    continue
                if not state.terminating:
                    rnd.actions.append(Delete("v1", "Pod", name, uid=uid))
                else:
                    _force_delete_if_stuck(rnd, pod, now)
                rnd.records[key] = _record(name, uid, "Deleted", state.containers, restarts, replaced)
                continue
            if state.terminating and mode == ACTIVE and state.phase not in ("Succeeded", "Failed"):
                _force_delete_if_stuck(rnd, pod, now)
            finished = state.phase in ("Succeeded", "Failed")
            if mode == STOPPED or not finished or debug:
                rnd.records[key] = _record(name, uid, state.phase, state.containers, restarts, replaced)
                if state.phase == "Failed":
                    rnd.failures[key] = _describe(name, state) + "."
                continue

            what = _describe(name, state)
            if state.phase == "Failed" and state.infra_failure and group.recreatable:
                # Evictions, node shutdown, no exit code: retryable without charging the budget (R9).
                rnd.actions.append(Delete("v1", "Pod", name, uid=uid))
                rnd.records[key] = _record(name, "", "Creating", state.containers, restarts, uid)
                msg = f"{what}; recreating it without charging the restart budget."
                rnd.failures[key] = msg
                rnd.events.append(Event("Warning", "ReplicaRecreated", msg))
                continue
            if _restart_wanted(group, state):
                budget = _budget_left(group, plan, restarts, rnd.backoff_count)
                if budget:
                    restarts += 1
                    if plan.backoff_limit is not None:
                        rnd.backoff_count += 1
                    rnd.actions.append(Delete("v1", "Pod", name, uid=uid))
                    rnd.records[key] = _record(name, "", "Creating", state.containers, restarts, uid)
                    msg = f"{what}; restarting it ({budget})."
                    rnd.failures[key] = msg
                    rnd.events.append(Event("Warning", "Restarting", msg))
                    continue
                if state.phase == "Failed":
                    msg = f"{what} and its restart budget is exhausted."
                    rnd.failures[key] = msg
                    if (prior_phase, prior.get("uid")) != ("Failed", uid):  # report it once
                        rnd.events.append(Event("Warning", "BackoffLimitExceeded", msg))
            elif state.phase == "Failed":
                rnd.failures[key] = f"{what}."
            rnd.records[key] = _record(name, uid, state.phase, state.containers, restarts, None)
    return rnd


def _budget_left(group: ReplicaGroup, plan: Plan, restarts: int, backoff_count: int) -> str:
    """A short description of the budget this restart uses, or "" when none is left."""
    if group.restart_limit is not None:
        return f"restart {restarts + 1} of {group.restart_limit}" if restarts < group.restart_limit else ""
    if plan.backoff_limit is not None:
        if backoff_count < plan.backoff_limit:
            return f"backoff {backoff_count + 1} of {plan.backoff_limit}"
        return ""
    return f"restart {restarts + 1}"
