"""Per-replica decisions: create, keep, restart (with budgets), relaunch (a launcher whose group was
resized, docs/controller.md#elastic-relaunch) or stop (docs/controller.md#restarts); and what a disruption
changes: the whole job restarts, or the one replica is recreated (docs/controller.md#disruptions).

Everything a later reconcile needs to stay restart-safe (docs/controller.md#restart-safety) is in the
replica record written to status: `restartCount` (per replica), and `replacedUid`, the uid of the pod the
controller is replacing, so a failure is counted exactly once however many times the same observation is
reconciled. A whole restart lives in `status.restarts` and each pod's `ANNOTATION_JOB_RESTARTS`: a pod of an
earlier restart is deleted, and no replica is created while one is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from t9k_provider.jobs.constants import RETRYABLE_EXIT_CODES
from t9k_provider.jobs.contract import ANNOTATION_RESTART_COUNT, RECREATE_REPLICA, RESTART_JOB
from t9k_provider.kube.timestamps import parse_time, rfc3339

from .decision import Action, Create, Delete, Event
from .disruptions import (
    ATTRIBUTION_WINDOW_SECONDS,
    Disruption,
    deleted_by_taint_manager,
    job_restart_of,
    kept,
    of_lost_pod,
    of_pod,
)
from .names import pod_name
from .plan import Plan, ReplicaGroup
from .pods import ANNOTATION_LAUNCHED_WORKERS, build_pod
from .podstate import PodState, classify, telling_exit_reason

# A pod still terminating this long after its deletion deadline is force-deleted (node lost,
# docs/controller.md#r8).
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
    restarts: int = 0  # the job's whole restarts (status.restarts)
    disruptions: list[dict[str, Any]] = field(default_factory=list)  # status.disruptions, the latest kept
    restarting: bool = False  # a whole restart is under way: pods of an earlier restart are being deleted
    held: bool = False  # a program failure waits out the attribution window: no outcome yet

    @property
    def all_created(self) -> bool:
        """Every desired replica has an observed pod or a final outcome."""
        return all(r["phase"] not in ("Creating", "Deleted") for r in self.records.values())

    def wake_at(self, moment: datetime) -> None:
        self.requeue_at = moment if self.requeue_at is None else min(self.requeue_at, moment)


def _record(
    name: str,
    uid: str,
    phase: str,
    containers: list[dict[str, Any]],
    restarts: int,
    replaced_uid: str | None,
    node: str | None,
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
    if node:
        rec["nodeName"] = node
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
    """A terminating pod whose node will never confirm the kill blocks its replica's name: the taint
    manager's at once (its node stopped reporting, as the out-of-service taint would), any other 300 s past
    its deletion deadline (docs/controller.md#r8, #disruptions)."""
    meta = pod.get("metadata") or {}
    deleting = parse_time(meta.get("deletionTimestamp"))
    if deleting is None:
        return
    limit = deleting + timedelta(seconds=STUCK_TERMINATING_SECONDS)
    if deleted_by_taint_manager(pod):
        why = (
            "was deleted by the taint manager (its node is unreachable or not ready, so no kubelet will "
            "confirm the kill); force-deleting it, as the node.kubernetes.io/out-of-service taint would"
        )
    elif now >= limit:
        why = "was stuck terminating; force-deleting it"
    else:
        rnd.wake_at(limit)
        return
    rnd.actions.append(Delete("v1", "Pod", meta["name"], uid=meta.get("uid"), grace_period_seconds=0))
    rnd.events.append(Event("Warning", "ForceDelete", f"Pod {meta['name']} {why}"))


@dataclass
class _Pass:
    """What every replica's decision reads, and the round it writes."""

    job: dict[str, Any]
    plan: Plan
    now: datetime
    mode: str
    resumed: bool
    may_create: bool
    running_types: set[str]
    rnd: Round


@dataclass
class _Replica:
    """One desired replica: its pod (if any), what the last status recorded of it, its restarts so far and
    the uid of a pod being replaced."""

    key: tuple[str, int]
    name: str
    group: ReplicaGroup
    index: int
    prior: dict[str, Any]
    pod: dict[str, Any] | None
    state: PodState | None
    restarts: int
    replaced: str | None

    @property
    def uid(self) -> str:
        return (self.pod or {}).get("metadata", {}).get("uid", "")

    @property
    def label(self) -> str:
        """How the job names the replica: `worker-1`, or `launcher` for a single pod."""
        return f"{self.group.type}-{self.index}" if self.group.indexed else self.group.type

    def record(
        self, p: _Pass, uid: str, phase: str, containers: list[dict[str, Any]], replaced: str | None
    ) -> None:
        if uid and self.pod is not None and uid == self.uid:
            node = (self.pod.get("spec") or {}).get("nodeName")
        else:
            node = self.prior.get("nodeName") if uid and uid == self.prior.get("uid") else None
        p.rnd.records[self.key] = _record(self.name, uid, phase, containers, self.restarts, replaced, node)


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
    p = _Pass(job, plan, now, mode, resumed, may_create, running_types, rnd)
    replicas = [
        _replica(job, group, index, pods, states, prior_records)
        for group in plan.groups
        for index in range(group.replicas)
    ]
    if mode == ACTIVE and plan.debug is None:
        if plan.whole_restart:
            if _restart_whole(p, replicas):
                return rnd
        else:
            _note_disruptions(p, replicas)
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
) -> _Replica:
    name = pod_name(job["metadata"]["name"], group.type, index, group.indexed)
    key = (group.type, index)
    prior = prior_records.get(name) or {}
    pod = pods.get(key)
    restarts = int(prior.get("restartCount") or 0)
    if pod is not None:
        annotated = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_RESTART_COUNT) or "0"
        restarts = max(restarts, int(annotated) if annotated.isdigit() else 0)
    return _Replica(
        key, name, group, index, prior, pod, states.get(key), restarts, prior.get("replacedUid") or None
    )


def _decide(p: _Pass, r: _Replica) -> None:
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


def _replacing(p: _Pass, r: _Replica) -> None:
    """The controller already decided to replace this pod (and counted it): finish the job."""
    assert r.pod is not None and r.replaced
    containers = r.prior.get("containers") or []
    if p.mode == STOPPED:
        r.record(p, r.replaced, "Failed", containers, r.replaced)
        return
    if r.pod["metadata"].get("deletionTimestamp") is None:
        p.rnd.actions.append(Delete("v1", "Pod", r.name, uid=r.replaced))
    else:
        _force_delete_if_stuck(p.rnd, r.pod, p.now)
    r.record(p, "", "Deleted" if p.mode == PAUSED else "Creating", containers, r.replaced)
    launched = _launched_with(r)
    relaunch = launched is not None and launched != r.group.replicas
    p.rnd.failures[r.key] = (
        _relaunch_message(r, launched) if relaunch else f"Pod {r.name} is being restarted."
    )


def _missing(p: _Pass, r: _Replica) -> None:
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
        # disruption was reported already (`_note_disruptions`), except in debug mode.
        msg = f"Pod {r.name} was deleted from outside the controller; recreating it."
        p.rnd.failures[r.key] = msg
        if not any(e.get("uid") == r.prior.get("uid") for e in p.rnd.disruptions):
            p.rnd.events.append(Event("Warning", "PodDeleted", msg))
    job_restarts = p.rnd.restarts if p.plan.whole_restart else None
    pod = build_pod(p.job, p.plan, r.group, r.index, r.restarts, p.resumed, job_restarts)
    p.rnd.actions.append(Create(pod))
    r.record(p, "", "Creating", [], r.replaced)


def _paused(p: _Pass, r: _Replica) -> None:
    """Pausing deletes every replica's pod, finished ones too (docs/controller.md#pause). A finished replica
    keeps its outcome in the status, so a success is never re-run (docs/controller.md#r1) and a permanent
    failure stays one; a failure not yet handled is recorded Deleted and retried on resume."""
    assert r.pod is not None and r.state is not None
    state = r.state
    final = state.phase == "Succeeded" or (state.phase == "Failed" and r.prior.get("phase") == "Failed")
    if not state.terminating:
        p.rnd.actions.append(Delete("v1", "Pod", r.name, uid=r.uid))
    else:
        _force_delete_if_stuck(p.rnd, r.pod, p.now)
    r.record(p, r.uid, state.phase if final else "Deleted", state.containers, r.replaced)


def _launched_with(r: _Replica) -> int | None:
    """How many replicas of its group the launcher's pod started the training on (None: not the group's
    launcher, or a pod built without the annotation, which is never relaunched)."""
    if r.group.relaunch_on_resize != r.index or r.pod is None:
        return None
    value = (r.pod["metadata"].get("annotations") or {}).get(ANNOTATION_LAUNCHED_WORKERS) or ""
    return int(value) if value.isdigit() else None


def _resized(p: _Pass, r: _Replica) -> bool:
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


def _relaunch_message(r: _Replica, launched: int | None) -> str:
    return (
        f"Pod {r.name} is relaunching on {r.group.replicas} {r.group.type} replicas: "
        f"the job was resized from {launched}."
    )


def _relaunch(p: _Pass, r: _Replica) -> None:
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


def _observed(p: _Pass, r: _Replica) -> None:
    """A pod of an active or stopped job: running ones (and any of a stopped or debugging job) are
    recorded as they are; finished ones are decided (`_finished`)."""
    assert r.pod is not None and r.state is not None
    state = r.state
    finished = state.phase in ("Succeeded", "Failed")
    if state.terminating and p.mode == ACTIVE and not finished:
        _force_delete_if_stuck(p.rnd, r.pod, p.now)
    if p.mode == STOPPED or not finished or p.plan.debug is not None:
        r.record(p, r.uid, state.phase, state.containers, r.replaced)
        if state.phase == "Failed":
            p.rnd.failures[r.key] = _describe(r.name, state) + "."
        return
    if not _held(p, r):
        _finished(p, r)


def _held(p: _Pass, r: _Replica) -> bool:
    """A replica of a job that restarts as a whole failed for its program's reasons just now: it is judged
    ATTRIBUTION_WINDOW_SECONDS after its container finished, so that a peer's disruption that shows by then
    restarts the job instead, charging nothing (the kubelet may kill a pod before its status says why). Until
    then the replica keeps its recorded phase and the job's outcome waits (docs/controller.md#disruptions)."""
    state = r.state
    assert state is not None
    if (
        not p.plan.whole_restart
        or state.phase != "Failed"
        or state.infra_failure
        or state.terminating
        or state.finished_at is None
    ):
        return False
    until = state.finished_at + timedelta(seconds=ATTRIBUTION_WINDOW_SECONDS)
    if p.now >= until:
        return False
    same = r.prior.get("uid") == r.uid
    r.record(p, r.uid, str(r.prior.get("phase")) if same else "Pending", state.containers, r.replaced)
    p.rnd.failures[r.key] = (
        f"{_describe(r.name, state)}; judging it at {rfc3339(until)} unless a disruption explains it first."
    )
    p.rnd.held = True
    p.rnd.wake_at(until)
    return True


def _finished(p: _Pass, r: _Replica) -> None:
    """A finished pod of an active job: recreated (infrastructure failure), restarted within its budget,
    or its outcome is final."""
    assert r.state is not None
    state, uid, rnd = r.state, r.uid, p.rnd
    what = _describe(r.name, state)
    if state.phase == "Failed" and (state.infra_failure or state.terminating):
        # Evictions, node shutdown, no exit code, a deletion from outside: retryable without charging the
        # budget (docs/controller.md#r9); the disruption was reported when first seen (`_note_disruptions`).
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


# -- disruptions (docs/controller.md#disruptions) ----------------------------------------------------------


def _disruption(p: _Pass, r: _Replica) -> Disruption | None:
    """What the replica's pod says of a disruption, or None: its pod gone while it ran, or disrupted
    (`disruptions.of_pod`). Pods the controller replaces, and outcomes it has judged, say nothing more."""
    if r.pod is None:
        if r.prior.get("phase") in ("Pending", "Running", "Unknown") and not r.replaced:
            return of_lost_pod(r.key, r.label, r.name, r.prior, p.now)
        return None
    assert r.state is not None
    if r.replaced == r.uid:
        return None
    if r.prior.get("uid") == r.uid and r.prior.get("phase") in ("Succeeded", "Failed", "Deleted"):
        return None
    # Any deletion of a pod of an active job that the controller is not replacing is someone else's.
    return of_pod(r.key, r.label, r.pod, r.state, True, p.now)


def _note_disruptions(p: _Pass, replicas: list[_Replica]) -> None:
    """A kind whose replicas recover alone: each disruption is reported once (by pod uid); the replica is
    recreated when its pod is gone or failed (`_missing`, `_finished`), charging no budget."""
    known = {e.get("uid") for e in p.rnd.disruptions}
    for r in replicas:
        found = _disruption(p, r)
        if found is None or found.uid in known:
            continue
        p.rnd.disruptions = kept([*p.rnd.disruptions, found.entry(RECREATE_REPLICA, None)])
        msg = f"{found.sentence()}: recreating this replica, charged to no budget"
        p.rnd.events.append(Event("Warning", "Disrupted", msg))


def _of_earlier_restart(p: _Pass, r: _Replica) -> bool:
    return r.pod is not None and job_restart_of(r.pod) < p.rnd.restarts


def _success_met(p: _Pass, replicas: list[_Replica]) -> bool:
    """A success rule is met already: the training is done, and a disruption now changes nothing."""
    phases = {r.key: r.state.phase if r.state is not None else r.prior.get("phase") for r in replicas}
    return any(
        rule and all(phases.get((t, i)) == "Succeeded" for t, idx in rule.items() for i in idx)
        for rule in p.plan.success_rules
    )


def _restart_whole(p: _Pass, replicas: list[_Replica]) -> bool:
    """A job whose replicas form one collective: a disruption of any replica of the current restart restarts
    every replica, and the failures its peers have then are its own, charged to nothing. The restart is
    counted (`restarts`) in the round that decides it; then every pod of an earlier restart is deleted, and
    no replica is created until all are gone. True while that is under way (this round decides every
    replica)."""
    found = [
        d
        for r in replicas
        if r.pod is None or not _of_earlier_restart(p, r)
        if (d := _disruption(p, r)) is not None
    ]
    causes: dict[tuple[str, int], Disruption] = {}
    if found and not _success_met(p, replicas):
        p.rnd.restarts += 1
        n = p.rnd.restarts
        for d in found:
            causes[(d.replica_type, d.replica_index)] = d
            msg = f"{d.sentence()}: restarting the job as a whole"
            p.rnd.events.append(Event("Warning", "Disrupted", msg))
        p.rnd.disruptions = kept([*p.rnd.disruptions, *(d.entry(RESTART_JOB, n) for d in found)])
        p.rnd.events.append(
            Event(
                "Normal",
                "RestartingJob",
                f"Restarting the job as a whole (restart {n}, charged to no restart budget): every replica's "
                "pod is deleted, and created again once all are gone.",
            )
        )
    elif not any(_of_earlier_restart(p, r) for r in replicas):
        return False
    p.rnd.restarting = True
    for r in replicas:
        _restarting(p, r, causes.get(r.key))
    return True


def _restarting(p: _Pass, r: _Replica, cause: Disruption | None) -> None:
    """One replica while the job restarts as a whole: its pod of an earlier restart is deleted (or
    force-deleted when stuck); it is created again once no such pod is left (`_missing`)."""
    n = p.rnd.restarts
    if r.pod is not None and not _of_earlier_restart(p, r):
        # Created for this restart while older pods of others were still going: leave it be.
        assert r.state is not None
        r.record(p, r.uid, r.state.phase, r.state.containers, None)
        return
    if r.pod is not None:
        assert r.state is not None
        if r.state.terminating:
            _force_delete_if_stuck(p.rnd, r.pod, p.now)
        else:
            p.rnd.actions.append(Delete("v1", "Pod", r.name, uid=r.uid))
        containers = r.state.containers
    else:
        containers = r.prior.get("containers") or []
    r.record(p, "", "Creating", containers, None)
    p.rnd.failures[r.key] = (
        f"{cause.sentence()}; restarting the job as a whole (restart {n})."
        if cause is not None
        else f"Pod {r.name} is restarting with the job (restart {n})."
    )
