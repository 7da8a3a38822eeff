"""What a disruption changes for a job (docs/controller.md#disruptions): a collective restarts as a whole
(`restart_whole`), charging no budget, and a program failure of one waits out the attribution window
(`held`); a kind whose replicas recover alone only reports it (`note_disruptions`), and the replica is
recreated as any failed or missing one.

A whole restart lives in `status.restarts` and each pod's `ANNOTATION_JOB_RESTARTS`: a pod of an earlier
restart is deleted, and no replica is created while one is left, so a crash anywhere leaves the next
reconcile to go on from what it observes.
"""

from __future__ import annotations

from datetime import timedelta

from t9k_provider.jobs.contract import RECREATE_REPLICA, RESTART_JOB
from t9k_provider.kube.timestamps import rfc3339

from .decision import Delete, Event
from .disruptions import (
    ATTRIBUTION_WINDOW_SECONDS,
    Disruption,
    job_restart_of,
    kept,
    of_lost_pod,
    of_pod,
)
from .rounds import Pass, Replica, describe, force_delete_if_stuck


def held(p: Pass, r: Replica) -> bool:
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
        f"{describe(r.name, state)}; judging it at {rfc3339(until)} unless a disruption explains it first."
    )
    p.rnd.held = True
    p.rnd.wake_at(until)
    return True


def _disruption(p: Pass, r: Replica) -> Disruption | None:
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


def note_disruptions(p: Pass, replicas: list[Replica]) -> None:
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


def _of_earlier_restart(p: Pass, r: Replica) -> bool:
    return r.pod is not None and job_restart_of(r.pod) < p.rnd.restarts


def _success_met(p: Pass, replicas: list[Replica]) -> bool:
    """A success rule is met already: the training is done, and a disruption now changes nothing."""
    phases = {r.key: r.state.phase if r.state is not None else r.prior.get("phase") for r in replicas}
    return any(
        rule and all(phases.get((t, i)) == "Succeeded" for t, idx in rule.items() for i in idx)
        for rule in p.plan.success_rules
    )


def restart_whole(p: Pass, replicas: list[Replica]) -> bool:
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


def _restarting(p: Pass, r: Replica, cause: Disruption | None) -> None:
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
            force_delete_if_stuck(p.rnd, r.pod, p.now)
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
