"""Per-replica decisions: create, keep, restart (with budgets), relaunch (a launcher whose group was
resized, docs/controller.md#elastic-relaunch) or stop (docs/controller.md#restarts); a disruption of an
active job goes to `disrupted` first (docs/controller.md#disruptions).

Everything a later reconcile needs to stay restart-safe (docs/controller.md#restart-safety) is in the
replica record written to status: `restartCount` (per replica), and `replacedUid`, the uid of the pod the
controller is replacing, so a failure is counted exactly once however many times the same observation is
reconciled.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from t9k_provider.jobs.constants import RETRYABLE_EXIT_CODES
from t9k_provider.jobs.contract import ANNOTATION_RESTART_COUNT

from .decision import Create, Delete, Event
from .disrupted import held, note_disruptions, restart_whole
from .disruptions import job_restart_of
from .names import pod_name
from .plan import Plan, ReplicaGroup
from .pods import ANNOTATION_LAUNCHED_WORKERS, build_pod
from .podstate import PodState, classify, telling_exit_reason
from .rounds import ACTIVE, PAUSED, STOPPED, Pass, Replica, Round, describe, force_delete_if_stuck


def _restart_wanted(group: ReplicaGroup, state: PodState) -> bool:
    policy = group.restart_policy
    if state.phase == "Succeeded":
        return policy == "Always"
    if policy in ("OnFailure", "Always"):
        return True
    return policy == "ExitCode" and state.exit_code in RETRYABLE_EXIT_CODES


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
    prior_restarts: int = 0,
    prior_disruptions: list[dict[str, Any]] | None = None,
) -> Round:
    """Decide every replica. `mode` is ACTIVE (create and restart), PAUSED (delete, keep outcomes) or
    STOPPED (terminal: observe only; cleanup is separate). A disruption of an active job restarts it as a
    whole or recreates the one replica (docs/controller.md#disruptions)."""
    rnd = Round(
        backoff_count=prior_backoff,
        # A pod never belongs to a later restart than the job's; a lost status write cannot undo one.
        restarts=max([prior_restarts, *(job_restart_of(pod) for pod in pods.values())]),
        disruptions=list(prior_disruptions or []),
    )
    states = {
        (g.type, i): classify(pods[(g.type, i)], g.training_container)
        for g in plan.groups
        for i in range(g.replicas)
        if (g.type, i) in pods
    }
    for key, state in states.items():
        if state.phase == "Failed" and telling_exit_reason(state.exit_reason):
            rnd.terminations[pods[key]["metadata"]["name"]] = (
                f"{state.exit_reason} (exit code {state.exit_code})"
            )
    running_types = {
        g.type
        for g in plan.groups
        if all((s := states.get((g.type, i))) is not None and s.ready for i in range(g.replicas))
    }
    p = Pass(job, plan, now, mode, resumed, may_create, running_types, rnd)
    replicas = [
        _replica(job, group, index, pods, states, prior_records)
        for group in plan.groups
        for index in range(group.replicas)
    ]
    if mode == ACTIVE and plan.debug is None:
        if plan.whole_restart:
            if restart_whole(p, replicas):
                return rnd
        else:
            note_disruptions(p, replicas)
    for r in replicas:
        _decide(p, r)
    return rnd


def _replica(
    job: dict[str, Any],
    group: ReplicaGroup,
    index: int,
    pods: dict[tuple[str, int], dict[str, Any]],
    states: dict[tuple[str, int], PodState],
    prior_records: dict[str, dict[str, Any]],
) -> Replica:
    name = pod_name(job["metadata"]["name"], group.type, index, group.indexed)
    key = (group.type, index)
    prior = prior_records.get(name) or {}
    pod = pods.get(key)
    restarts = int(prior.get("restartCount") or 0)
    if pod is not None:
        annotated = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_RESTART_COUNT) or "0"
        restarts = max(restarts, int(annotated) if annotated.isdigit() else 0)
    return Replica(
        key, name, group, index, prior, pod, states.get(key), restarts, prior.get("replacedUid") or None
    )


def _decide(p: Pass, r: Replica) -> None:
    """One replica's decision, by the case it is in."""
    if r.pod is not None and r.replaced and r.uid == r.replaced:
        _replacing(p, r)
    elif r.pod is None:
        _missing(p, r)
    else:
        if r.replaced and r.uid != r.replaced:
            r.replaced = None  # the replacement exists, so the old pod is gone for good
        if p.mode == PAUSED:
            _paused(p, r)
        elif _resized(p, r):
            _relaunch(p, r)
        else:
            _observed(p, r)


def _replacing(p: Pass, r: Replica) -> None:
    """The controller already decided to replace this pod (and counted it): finish the job."""
    assert r.pod is not None and r.replaced
    containers = r.prior.get("containers") or []
    if p.mode == STOPPED:
        r.record(p, r.replaced, "Failed", containers, r.replaced)
        return
    if r.pod["metadata"].get("deletionTimestamp") is None:
        p.rnd.actions.append(Delete("v1", "Pod", r.name, uid=r.replaced))
    else:
        force_delete_if_stuck(p.rnd, r.pod, p.now)
    r.record(p, "", "Deleted" if p.mode == PAUSED else "Creating", containers, r.replaced)
    launched = _launched_with(r)
    relaunch = launched is not None and launched != r.group.replicas
    p.rnd.failures[r.key] = (
        _relaunch_message(r, launched) if relaunch else f"Pod {r.name} is being restarted."
    )


def _missing(p: Pass, r: Replica) -> None:
    """No pod: a finished replica stays finished, an active job creates it (unless it waits its turn)."""
    prior_phase = r.prior.get("phase")
    if prior_phase in ("Succeeded", "Failed"):
        # A finished replica is never run again, even if its pod is gone (docs/controller.md#r1).
        r.record(p, r.prior.get("uid", ""), prior_phase, r.prior.get("containers") or [], r.replaced)
        return
    if p.mode != ACTIVE:
        r.record(p, r.prior.get("uid", ""), "Deleted", [], r.replaced)
        return
    after = r.group.after_running
    gated = after is not None and p.plan.debug is None and after not in p.running_types
    if not p.may_create or gated:
        r.record(p, "", "Creating", [], r.replaced)
        return
    if prior_phase in ("Pending", "Running", "Unknown") and not r.replaced:
        # Deleted from outside (preemption, manual delete): recreate, never charge the budget. Its
        # disruption was reported already (`note_disruptions`), except in debug mode.
        msg = f"Pod {r.name} was deleted from outside the controller; recreating it."
        p.rnd.failures[r.key] = msg
        if not any(e.get("uid") == r.prior.get("uid") for e in p.rnd.disruptions):
            p.rnd.events.append(Event("Warning", "PodDeleted", msg))
    job_restarts = p.rnd.restarts if p.plan.whole_restart else None
    pod = build_pod(p.job, p.plan, r.group, r.index, r.restarts, p.resumed, job_restarts)
    p.rnd.actions.append(Create(pod))
    r.record(p, "", "Creating", [], r.replaced)


def _paused(p: Pass, r: Replica) -> None:
    """Pausing deletes every replica's pod, finished ones too (docs/controller.md#pause). A finished replica
    keeps its outcome in the status, so a success is never re-run (docs/controller.md#r1) and a permanent
    failure stays one; a failure not yet handled is recorded Deleted and retried on resume."""
    assert r.pod is not None and r.state is not None
    state = r.state
    final = state.phase == "Succeeded" or (state.phase == "Failed" and r.prior.get("phase") == "Failed")
    if not state.terminating:
        p.rnd.actions.append(Delete("v1", "Pod", r.name, uid=r.uid))
    else:
        force_delete_if_stuck(p.rnd, r.pod, p.now)
    r.record(p, r.uid, state.phase if final else "Deleted", state.containers, r.replaced)


def _launched_with(r: Replica) -> int | None:
    """How many replicas of its group the launcher's pod started the training on (None: not the group's
    launcher, or a pod built without the annotation, which is never relaunched)."""
    if r.group.relaunch_on_resize != r.index or r.pod is None:
        return None
    value = (r.pod["metadata"].get("annotations") or {}).get(ANNOTATION_LAUNCHED_WORKERS) or ""
    return int(value) if value.isdigit() else None


def _resized(p: Pass, r: Replica) -> bool:
    """The group's launcher runs on another size than the group's, and may be relaunched now: the job is
    active and not debugging, the launcher's pod is neither finished nor terminating, and every replica of
    the group runs (a new one's sshd is up; removed ones are being deleted, docs/controller.md#r12)."""
    launched = _launched_with(r)
    if launched is None or launched == r.group.replicas:
        return False
    assert r.state is not None
    return (
        p.mode == ACTIVE
        and p.plan.debug is None
        and r.state.phase not in ("Succeeded", "Failed")
        and not r.state.terminating
        and r.group.type in p.running_types
    )


def _relaunch_message(r: Replica, launched: int | None) -> str:
    return (
        f"Pod {r.name} is relaunching on {r.group.replicas} {r.group.type} replicas: "
        f"the job was resized from {launched}."
    )


def _relaunch(p: Pass, r: Replica) -> None:
    """Replace the launcher so that the new one starts the training on the group's current size (it reads
    the hostfile at start; the training resumes from its own checkpoint): a delete with the uid
    precondition, recorded as a replacement (`replacedUid`), so `_replacing` and `_missing` finish it. It
    charges no restart budget: nothing failed (docs/controller.md#elastic-relaunch)."""
    assert r.state is not None
    msg = _relaunch_message(r, _launched_with(r))
    p.rnd.actions.append(Delete("v1", "Pod", r.name, uid=r.uid))
    r.record(p, "", "Creating", r.state.containers, r.uid)
    p.rnd.failures[r.key] = msg
    p.rnd.events.append(Event("Normal", "Relaunching", msg))


def _observed(p: Pass, r: Replica) -> None:
    """A pod of an active or stopped job: running ones (and any of a stopped or debugging job) are
    recorded as they are; finished ones are decided (`_finished`)."""
    assert r.pod is not None and r.state is not None
    state = r.state
    finished = state.phase in ("Succeeded", "Failed")
    if state.terminating and p.mode == ACTIVE and not finished:
        force_delete_if_stuck(p.rnd, r.pod, p.now)
    if p.mode == STOPPED or not finished or p.plan.debug is not None:
        r.record(p, r.uid, state.phase, state.containers, r.replaced)
        if state.phase == "Failed":
            p.rnd.failures[r.key] = describe(r.name, state) + "."
        return
    if not held(p, r):
        _finished(p, r)


def _finished(p: Pass, r: Replica) -> None:
    """A finished pod of an active job: recreated (infrastructure failure), restarted within its budget,
    or its outcome is final."""
    assert r.state is not None
    state, uid, rnd = r.state, r.uid, p.rnd
    what = describe(r.name, state)
    if state.phase == "Failed" and (state.infra_failure or state.terminating):
        # Evictions, node shutdown, no exit code, a deletion from outside: retryable without charging the
        # budget (docs/controller.md#r9); the disruption was reported when first seen (`note_disruptions`).
        rnd.actions.append(Delete("v1", "Pod", r.name, uid=uid))
        r.record(p, "", "Creating", state.containers, uid)
        rnd.failures[r.key] = f"{what}; recreating it without charging the restart budget."
        return
    if _restart_wanted(r.group, state):
        budget = _budget_left(r.group, p.plan, r.restarts, rnd.backoff_count)
        if budget:
            r.restarts += 1
            if p.plan.backoff_limit is not None:
                rnd.backoff_count += 1
            rnd.actions.append(Delete("v1", "Pod", r.name, uid=uid))
            r.record(p, "", "Creating", state.containers, uid)
            msg = f"{what}; restarting it ({budget})."
            rnd.failures[r.key] = msg
            rnd.events.append(Event("Warning", "Restarting", msg))
            return
        if state.phase == "Failed":
            msg = f"{what} and its restart budget is exhausted."
            rnd.failures[r.key] = msg
            if (r.prior.get("phase"), r.prior.get("uid")) != ("Failed", uid):  # report it once
                rnd.events.append(Event("Warning", "BackoffLimitExceeded", msg))
    elif state.phase == "Failed":
        rnd.failures[r.key] = f"{what}."
    r.record(p, uid, state.phase, state.containers, None)


def _budget_left(group: ReplicaGroup, plan: Plan, restarts: int, backoff_count: int) -> str:
    """A short description of the budget this restart uses, or "" when none is left."""
    if group.restart_limit is not None:
        return f"restart {restarts + 1} of {group.restart_limit}" if restarts < group.restart_limit else ""
    if plan.backoff_limit is not None:
        if backoff_count < plan.backoff_limit:
            return f"backoff {backoff_count + 1} of {plan.backoff_limit}"
        return ""
    return f"restart {restarts + 1}"
