"""One reconcile of a replica-based job (every kind but BeamJob): docs/controller.md#the-reconcile-loop.

Order of a decision's actions: removal of stray pods, PodGroup, companions (Secrets, ConfigMaps, TensorBoard),
Services, then replica pod deletes/creates. Cleanup runs only once the terminal phase is already in the
observed status (docs/controller.md#r5), so a crash between writing the status and deleting never loses
`cleanUpPolicy: None`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from t9k_provider.jobs.contract import TERMINAL_PHASES, task_replicas_key
from t9k_provider.kube.timestamps import parse_time, rfc3339

from .decision import Action, ChildType, Create, Decision, Delete, Event, Patch
from .names import pod_name, replica_key
from .outcome import ALL_RUNNING, decide_outcome, running_message
from .plan import Plan
from .podgroups import (
    MAX_DURATION_EXCEEDED,
    PODGROUP_API_VERSION,
    PODGROUP_KIND,
    build_podgroup,
    overran,
    podgroup_drift,
)
from .pods import build_service
from .podstate import classify
from .replicas import evaluate
from .rounds import ACTIVE, PAUSED, STOPPED, Round
from .status import NO_REASON, aggregate, condition, condition_true, merge_conditions, sanitized

# What a JobRun creates for every Plan; a kind declares its companions' types on top.
CHILD_TYPES = (
    ChildType("v1", "Pod", "pods"),
    ChildType("v1", "Service", "services"),
    ChildType(PODGROUP_API_VERSION, PODGROUP_KIND, "podgroups"),
)
NO_FAILURE = "No replica is failing or restarting."
# The Running condition's reason while the job restarts as a whole (docs/controller.md#disruptions).
RESTARTING = "Restarting"
# Endings that stop every unfinished replica whatever cleanUpPolicy says: the job's time is up.
STOPS_EVERY_REPLICA = ("DeadlineExceeded", MAX_DURATION_EXCEEDED)
# After a terminal decision, come back soon to run cleanup once the status is written.
CLEANUP_REQUEUE_SECONDS = 1.0


def _children_by_kind(children: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for child in children:
        out.setdefault(str(child.get("kind")), []).append(child)
    return out


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class JobRun:
    """The state of one reconcile; `decide()` returns the Decision."""

    def __init__(
        self, job: dict[str, Any], plan: Plan, children: list[dict[str, Any]], now: datetime
    ) -> None:
        self.job, self.plan, self.now = job, plan, now
        self.name = job["metadata"]["name"]
        self.prior: dict[str, Any] = sanitized(job.get("status"))
        self.prior_phase = self.prior.get("phase")
        by_kind = _children_by_kind(children)
        self.podgroups = by_kind.get(PODGROUP_KIND, [])
        self.services = {_name(s): s for s in by_kind.get("Service", [])}
        self.others = {(str(c.get("kind")), _name(c)): c for c in children}
        self.prior_records = {
            r.get("name"): r
            for task in self.prior.get("tasks") or []
            for r in (task.get("replicas") or [])
            if isinstance(r, dict) and r.get("name")
        }
        self.actions: list[Action] = []
        self.events: list[Event] = []
        self.pods: dict[tuple[str, int], dict[str, Any]] = {}
        self._sort_pods(by_kind.get("Pod", []))

    # -- observed pods ---------------------------------------------------------------------------

    def _sort_pods(self, pods: list[dict[str, Any]]) -> None:
        """Keep one pod per desired (type, index); delete strays and duplicates
        (docs/controller.md#r2, #r12)."""
        for pod in sorted(pods, key=_name):
            key = replica_key(pod)
            if key is None:
                continue
            group = self.plan.group(key[0])
            wanted = group is not None and key[1] < group.replicas
            expected = pod_name(self.name, key[0], key[1], group.indexed) if group else None
            if wanted and _name(pod) == expected and key not in self.pods:
                self.pods[key] = pod
                continue
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            self.actions.append(Delete("v1", "Pod", _name(pod), uid=pod["metadata"].get("uid")))
            if not wanted and _name(pod) in self.services:
                self.actions.append(Delete("v1", "Service", _name(pod)))
        for svc_name, svc in self.services.items():
            key = replica_key(svc)
            group = self.plan.group(key[0]) if key else None
            if (
                key is not None
                and (group is None or key[1] >= group.replicas)
                and not any(
                    isinstance(a, Delete) and a.kind == "Service" and a.name == svc_name for a in self.actions
                )
            ):
                self.actions.append(Delete("v1", "Service", svc_name))

    # -- decision ----------------------------------------------------------------------------------

    def decide(self) -> Decision:
        if self.prior_phase in TERMINAL_PHASES:
            return self._terminal()
        if self.plan.paused:
            return self._paused()
        return self._active()

    def _evaluate(self, mode: str, may_create: bool = True) -> Round:
        return evaluate(
            self.job,
            self.plan,
            self.pods,
            self.prior_records,
            int(self.prior.get("backoffCount") or 0),
            self.now,
            mode,
            resumed=condition(self.prior, "Paused") is not None,
            may_create=may_create,
            prior_restarts=int(self.prior.get("restarts") or 0),
            prior_disruptions=self.prior.get("disruptions") or [],
        )

    def _delete_podgroup(self) -> None:
        for pg in self.podgroups:
            if not (pg.get("metadata") or {}).get("deletionTimestamp"):
                self.actions.append(
                    Delete(PODGROUP_API_VERSION, PODGROUP_KIND, _name(pg), uid=pg["metadata"].get("uid"))
                )

    def _terminal(self) -> Decision:
        rnd = self._evaluate(STOPPED)
        self._delete_podgroup()
        self._cleanup(rnd)
        self.actions.extend(rnd.actions)
        return self._decision(
            rnd,
            self.prior_phase,
            merge_conditions(self.prior.get("conditions"), {}, self.now),
            start=self._start(),
            completion=self.prior.get("completionTime") or rfc3339(self.now),
        )

    def _cleanup(self, rnd: Round) -> None:
        """cleanUpPolicy after the end; a deadline failure also stops every unfinished replica
        (docs/controller.md#cleanup)."""
        failed = condition(self.prior, "Failed") or {}
        deadline = failed.get("status") == "True" and failed.get("reason") in STOPS_EVERY_REPLICA
        policy = self.plan.cleanup_policy
        deleted: list[str] = []
        # A pod being replaced when the job ended is unfinished business (kubeflow/trainer#4063).
        replacing = {r.get("replacedUid") for r in self.prior_records.values() if r.get("replacedUid")}
        for (rtype, _), pod in sorted(self.pods.items()):
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            group = self.plan.group(rtype)
            phase = classify(pod, group.training_container if group else "").phase
            unfinished = phase not in ("Succeeded", "Failed") or meta.get("uid") in replacing
            in_scope = self.plan.cleanup_types is None or rtype in self.plan.cleanup_types
            if (in_scope and (policy == "All" or (policy == "Unfinished" and unfinished))) or (
                deadline and unfinished
            ):
                self.actions.append(Delete("v1", "Pod", meta["name"], uid=meta.get("uid")))
                if meta["name"] in self.services:
                    self.actions.append(Delete("v1", "Service", meta["name"]))
                deleted.append(meta["name"])
        if policy != "None" or deadline:
            # A Service outlives its pod only after a crash mid-cleanup (or a pod removed by others).
            live = {pod["metadata"]["name"] for pod in self.pods.values()}
            for group in self.plan.groups:
                if not (deadline or self.plan.cleanup_types is None or group.type in self.plan.cleanup_types):
                    continue
                for index in range(group.replicas):
                    name = pod_name(self.name, group.type, index, group.indexed)
                    if name in self.services and name not in live:
                        self.actions.append(Delete("v1", "Service", name))
        if deleted:
            self.events.append(
                Event("Normal", "CleanedUp", f"Deleted pods after the job ended: {', '.join(deleted)}")
            )

    def _paused(self) -> Decision:
        rnd = self._evaluate(PAUSED)
        self._delete_podgroup()
        self.actions.extend(rnd.actions)
        desired = {"Paused": ("True", "Paused", "The job is paused; its pods are deleted.")}
        if condition(self.prior, "Running") is not None:
            desired["Running"] = ("False", "Paused", "The job is paused.")
        conditions = merge_conditions(self.prior.get("conditions"), desired, self.now)
        return self._decision(rnd, "Paused", conditions, start=self._start())

    def _start(self) -> str:
        return self.prior.get("startTime") or rfc3339(self.now)

    def _active(self) -> Decision:
        plan = self.plan
        resuming = self.prior_phase in ("Paused", "Resuming")
        # The deadline counts from the (re)start: time spent paused is not charged (Kubeflow suspend).
        start = rfc3339(self.now) if self.prior_phase == "Paused" else self._start()
        requeue_at: datetime | None = None
        if plan.active_deadline_seconds is not None and plan.debug is None:
            deadline = (parse_time(start) or self.now) + timedelta(seconds=plan.active_deadline_seconds)
            if self.now >= deadline:
                msg = (
                    f"The job was active longer than activeDeadlineSeconds ({plan.active_deadline_seconds}s)."
                )
                return self._finish("Failed", msg, "DeadlineExceeded", start)
            requeue_at = deadline
        if (expired := overran(self.podgroups)) is not None:
            return self._finish("Failed", expired, MAX_DURATION_EXCEEDED, start)
        pods_allowed = self._ensure_podgroup()
        aux_ready = self._ensure_companions() and pods_allowed
        self._ensure_services()
        rnd = self._evaluate(ACTIVE, may_create=pods_allowed)
        # A failure waiting out the attribution window may still turn out a disruption's: no outcome yet.
        outcome = None if plan.debug is not None or rnd.held else decide_outcome(plan, rnd)
        if outcome is not None:
            phase, message, reason = outcome
            return self._finish(phase, message, reason, start, rnd)
        self.actions.extend(rnd.actions)
        if rnd.requeue_at is not None:
            requeue_at = rnd.requeue_at if requeue_at is None else min(requeue_at, rnd.requeue_at)

        live = [r["phase"] for r in rnd.records.values()]
        if resuming:
            settled = rnd.all_created and all(p in ("Running", "Succeeded", "Failed") for p in live)
            phase = "Running" if settled else "Resuming"
        elif self.prior_phase == "Running":
            phase = "Running"
        else:
            phase = (
                "Running"
                if rnd.all_created and any(p in ("Running", "Succeeded") for p in live)
                else "Pending"
            )

        desired: dict[str, tuple[str, str, str]] = {}
        initialized = condition_true(self.prior, "Initialized") or (aux_ready and rnd.all_created)
        desired["Initialized"] = (
            ("True", NO_REASON, "The job has been initialized successfully.")
            if initialized
            else ("False", "Creating", "Creating the job's resources.")
        )
        if phase == "Running" and self._restarting(rnd, live):
            desired["Running"] = ("True", RESTARTING, self._restarting_message(rnd, live))
        elif phase == "Running":
            desired["Running"] = ("True", NO_REASON, running_message(live))
        elif phase == "Resuming":
            desired["Running"] = ("False", "Resuming", "The job is resuming from pause.")
        self._replica_failure(desired, rnd, phase == "Running")
        if condition(self.prior, "Paused") is not None:
            desired["Paused"] = ("False", "Resumed", "The job is not paused.")
        conditions = merge_conditions(self.prior.get("conditions"), desired, self.now)
        self.events.extend(rnd.events)
        after = None if requeue_at is None else max((requeue_at - self.now).total_seconds(), 0.0)
        return self._decision(rnd, phase, conditions, start=start, requeue_after=after)

    def _restarting(self, rnd: Round, live: list[str]) -> bool:
        """A whole restart is under way (pods of an earlier one are being deleted), or was, and not every
        replica runs again yet (docs/controller.md#disruptions)."""
        was = (condition(self.prior, "Running") or {}).get("reason") == RESTARTING
        return rnd.restarting or (was and not all(p in ("Running", "Succeeded") for p in live))

    @staticmethod
    def _restarting_message(rnd: Round, live: list[str]) -> str:
        return (
            f"The job is restarting as a whole after a disruption (restart {rnd.restarts}, charged to no "
            f"restart budget; status.disruptions says what happened): {running_message(live)}"
        )

    def _finish(
        self, phase: str, message: str, reason: str, start: str, rnd: Round | None = None
    ) -> Decision:
        """The terminal decision: status only. Cleanup and PodGroup removal follow once it is written."""
        if rnd is not None:
            self.events.extend(e for e in rnd.events if e.reason == "BackoffLimitExceeded")
        stopped = self._evaluate(STOPPED)
        if rnd is not None:
            stopped.disruptions, stopped.restarts = rnd.disruptions, rnd.restarts
            # Keep the first pass's words (e.g. "budget exhausted") where its verdict stands.
            for key in stopped.failures:
                if key in rnd.failures and rnd.records[key]["phase"] == stopped.records[key]["phase"]:
                    stopped.failures[key] = rnd.failures[key]
        self.actions = []  # nothing is created, restarted or removed in the round that ends the job
        if phase == "Succeeded":
            desired = {
                "Completed": ("True", "Succeeded", message),
                "Running": ("False", "Succeeded", message),
            }
            if condition(self.prior, "Failed") is not None:
                desired["Failed"] = ("False", "Succeeded", message)
        else:
            # The T9k message names the rule; what killed a replica (OOMKilled...) is what the user needs.
            killed = [f"Pod {pod}: {how}." for pod, how in sorted(stopped.terminations.items())]
            message = " ".join([message, *killed])
            desired = {
                "Completed": ("False", "Failed", message),
                "Failed": ("True", reason, message),
                "Running": ("False", "Failed", message),
            }
        self._replica_failure(desired, stopped, False)
        conditions = merge_conditions(self.prior.get("conditions"), desired, self.now)
        return self._decision(
            stopped,
            phase,
            conditions,
            start=start,
            completion=rfc3339(self.now),
            requeue_after=CLEANUP_REQUEUE_SECONDS,
        )

    def _replica_failure(self, desired: dict[str, tuple[str, str, str]], rnd: Round, running: bool) -> None:
        """ReplicaFailure: True while replicas fail, False once running or after it was reported."""
        if rnd.failures:
            desired["ReplicaFailure"] = ("True", "ReplicaFailure", " ".join(rnd.failures.values()))
        elif running or condition(self.prior, "ReplicaFailure") is not None:
            every_running = running_message([r["phase"] for r in rnd.records.values()]) == ALL_RUNNING
            desired["ReplicaFailure"] = ("False", NO_REASON, ALL_RUNNING if every_running else NO_FAILURE)

    # -- auxiliary objects ---------------------------------------------------------------------------

    def _ensure_podgroup(self) -> bool:
        """True when pods may be created: no T9k scheduler, or its PodGroup is observed
        (docs/controller.md#r14)."""
        sched = self.plan.scheduler
        if sched is None:
            return True
        live = [pg for pg in self.podgroups if not (pg.get("metadata") or {}).get("deletionTimestamp")]
        if not live:
            if not self.podgroups:
                self.actions.append(Create(build_podgroup(self.job, sched)))
            return False
        patch = podgroup_drift(live[0], sched)
        if patch is not None:
            self.actions.append(Patch(PODGROUP_API_VERSION, PODGROUP_KIND, _name(live[0]), patch))
        return True

    def _ensure_companions(self) -> bool:
        ready = True
        for comp in self.plan.companions:
            have = self.others.get((comp.type.kind, comp.name))
            if have is None:
                self.actions.append(Create(comp.build()))
                ready = False
                continue
            if comp.sync:
                want = comp.build()
                patch = {f: want.get(f) for f in comp.sync if have.get(f) != want.get(f)}
                if patch:
                    self.actions.append(Patch(comp.type.api_version, comp.type.kind, comp.name, patch))
        return ready

    def _ensure_services(self) -> None:
        for group in self.plan.groups:
            if not group.service_ports:
                continue
            for index in range(group.replicas):
                name = pod_name(self.name, group.type, index, group.indexed)
                if name not in self.services:
                    self.actions.append(Create(build_service(self.job, group, index)))

    # -- status --------------------------------------------------------------------------------------

    def _decision(
        self,
        rnd: Round,
        phase: str,
        conditions: list[dict[str, Any]],
        *,
        start: str,
        completion: str | None = None,
        requeue_after: float | None = None,
    ) -> Decision:
        tasks = []
        for group in self.plan.groups:
            records = [
                rnd.records[(group.type, i)] for i in range(group.replicas) if (group.type, i) in rnd.records
            ]
            tasks.append(
                {
                    "type": group.type,
                    "restartCount": sum(int(r.get("restartCount") or 0) for r in records),
                    task_replicas_key(self.job.get("kind", "")): records,
                }
            )
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": conditions,
            "tasks": tasks,
            "aggregate": aggregate([r["phase"] for r in rnd.records.values()]),
            "startTime": start,
        }
        if completion is not None:
            status["completionTime"] = completion
        if self.plan.reports_backoff:
            status["backoffCount"] = rnd.backoff_count
        if rnd.restarts:
            status["restarts"] = rnd.restarts
        if rnd.disruptions:
            status["disruptions"] = rnd.disruptions
        if self.plan.tensorboard is not None:
            status["tensorboard"] = self._tensorboard_status(self.plan.tensorboard)
        generation = (self.job.get("metadata") or {}).get("generation")
        if generation is not None:
            status["observedGeneration"] = generation
        if phase != self.prior_phase:
            kind = "Warning" if phase == "Failed" else "Normal"
            message = next(
                (
                    c["message"]
                    for c in conditions
                    if c["type"] in ("Failed", "Completed")
                    and phase in TERMINAL_PHASES
                    and c["status"] == "True"
                ),
                f"The job is {phase}.",
            )
            self.events.append(Event(kind, phase, message))
        return Decision(status=status, actions=self.actions, events=self.events, requeue_after=requeue_after)

    def _tensorboard_status(self, name: str) -> dict[str, Any]:
        tb = self.others.get(("TensorBoard", name))
        if tb is None:
            return {
                "dependent": {"kind": "TensorBoard", "name": name},
                "ready": False,
                "reason": "DependentCreating",
                "action": "Create",
                "note": f"TensorBoard [{name}] is being created",
                "type": "Normal",
            }
        tb_status = tb.get("status") or {}
        condition = next((c for c in tb_status.get("conditions") or [] if c.get("type") == "Ready"), {})
        ready = tb_status.get("phase") == "Running" or condition.get("status") == "True"
        why = f": {condition['message']}" if not ready and condition.get("message") else ""
        meta = tb["metadata"]
        return {
            "dependent": {
                "apiVersion": tb.get("apiVersion"),
                "kind": "TensorBoard",
                "name": name,
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "ready": ready,
            "reason": "DependentReady" if ready else "DependentNotReady",
            "action": "NOP",
            "note": f"TensorBoard [{name}] is {'ready' if ready else 'not ready yet'}{why}",
            # A TensorBoard that cannot run as specified (a file set naming an unsupported storage) Failed.
            "type": "Warning" if tb_status.get("phase") == "Failed" else "Normal",
        }
