"""A pure in-memory object set that applies engine Decisions, so tests can play whole pod lifecycles.

It is a test helper, not a mock of the API: it keeps objects by (kind, name), assigns uids, honours uid
preconditions on delete, rejects creating an existing name (AlreadyExists) and records every create.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from t9k_provider.controller.engine import Create, Decision, Delete, Observed, Patch
from t9k_provider.controller.reconcile import reconcile
from t9k_provider.controller.runtime.jobsync import action_runs
from t9k_provider.jobs.contract import task_replicas
from tests.support.builders import make_job

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
API = "batch.tensorstack.dev/v1beta1"


def fixed_keygen() -> tuple[str, str]:
    return (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nTEST\n-----END OPENSSH PRIVATE KEY-----\n",
        "ssh-ed25519 TEST t9k",
    )


def job(kind: str, spec: dict[str, Any], name: str = "demo") -> dict[str, Any]:
    """A job as the simulator's controller sees it: stored (uid, generation) in namespace ``ns``."""
    return make_job(kind, name, spec, namespace="ns", uid=f"uid-{name}", generation=1)


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class Sim:
    job: dict[str, Any]
    now: datetime = T0
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    created: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, name, uid)
    already_exists: list[tuple[str, str]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    # When True, deletes leave a terminating object (deletionTimestamp) until `finish_deletes()`.
    graceful: bool = False
    _uids: itertools.count = field(default_factory=lambda: itertools.count(1))

    # -- observation and decision ----------------------------------------------------------------

    def observed(self) -> Observed:
        return Observed(
            job=copy.deepcopy(self.job),
            children=[copy.deepcopy(o) for o in self.objects.values()],
            now=self.now,
        )

    def decide(self) -> Decision:
        return reconcile(self.observed(), ssh_keygen=fixed_keygen)

    def step(self, write_status: bool = True, prefix: int | None = None, subset: int = 0) -> Decision:
        """One reconcile as the runtime runs it: status first, then the actions run by run, then events.

        A crash (``prefix`` given) lands in the run holding action ``prefix``: the runs before it are done,
        and of that run only the actions whose bit is set in ``subset`` (its requests go out concurrently).
        """
        decision = self.decide()
        if write_status:
            self.job["status"] = copy.deepcopy(decision.status)
        actions = decision.actions if prefix is None else _crashed(decision.actions, prefix, subset)
        for action in actions:
            self.apply(action)
        self.events.extend(decision.events)
        return decision

    def settle(self, limit: int = 20) -> Decision:
        """Reconcile until a round changes nothing (no actions, same status)."""
        for _ in range(limit):
            before = copy.deepcopy(self.job.get("status"))
            decision = self.step()
            if not decision.actions and decision.status == before:
                return decision
        raise AssertionError(f"no fixed point after {limit} reconciles: {decision}")

    # -- applying actions ---------------------------------------------------------------------------

    def apply(self, action: Any) -> None:
        if isinstance(action, Create):
            obj = copy.deepcopy(action.obj)
            key = (obj["kind"], obj["metadata"]["name"])
            if key in self.objects:
                self.already_exists.append(key)
                return
            uid = f"{obj['kind'].lower()}-{next(self._uids)}"
            obj["metadata"]["uid"] = uid
            if obj["kind"] == "Pod":
                obj["status"] = {"phase": "Pending"}
            self.objects[key] = obj
            self.created.append((obj["kind"], obj["metadata"]["name"], uid))
        elif isinstance(action, Delete):
            key = (action.kind, action.name)
            obj = self.objects.get(key)
            if obj is None or (action.uid is not None and obj["metadata"]["uid"] != action.uid):
                return
            if self.graceful and action.kind == "Pod" and action.grace_period_seconds != 0:
                obj["metadata"].setdefault("deletionTimestamp", self.now.strftime("%Y-%m-%dT%H:%M:%SZ"))
            else:
                del self.objects[key]
        elif isinstance(action, Patch):
            merge(self.objects[(action.kind, action.name)], action.patch)
        else:  # pragma: no cover - the engine only returns the three action types
            raise TypeError(action)

    def finish_deletes(self) -> None:
        for key in [k for k, o in self.objects.items() if o["metadata"].get("deletionTimestamp")]:
            del self.objects[key]

    # -- the world moving on ------------------------------------------------------------------------

    def pods(self) -> dict[str, dict[str, Any]]:
        return {name: o for (kind, name), o in self.objects.items() if kind == "Pod"}

    def pod(self, name: str) -> dict[str, Any]:
        return self.objects[("Pod", name)]

    def set_pod(
        self,
        name: str,
        phase: str,
        exit_code: int | None = None,
        reason: str | None = None,
        container_name: str | None = None,
    ) -> None:
        pod = self.pod(name)
        cname = container_name or pod["spec"]["containers"][0]["name"]
        status: dict[str, Any] = {"phase": phase, "conditions": []}
        if phase == "Running":
            status["containerStatuses"] = [{"name": cname, "state": {"running": {}}}]
            status["conditions"] = [{"type": "Ready", "status": "True"}]
        elif exit_code is not None:
            status["containerStatuses"] = [{"name": cname, "state": {"terminated": {"exitCode": exit_code}}}]
        if reason:
            status["reason"] = reason
        pod["status"] = status

    def disrupt(
        self,
        name: str,
        reason: str = "EvictionByEvictionAPI",
        message: str = "Eviction API: evicting",
        *,
        delete: bool = True,
        grace: int = 30,
        node: str | None = "node-1",
    ) -> None:
        """What Kubernetes does to a pod it disrupts: the `DisruptionTarget` condition, then (``delete``) a
        graceful deletion, which leaves the object terminating until `finish_deletes` (or a force delete)."""
        pod = self.pod(name)
        if node is not None:
            pod["spec"]["nodeName"] = node
        at = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        pod["status"].setdefault("conditions", []).append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": at,
            }
        )
        if delete:
            deadline = (self.now + timedelta(seconds=grace)).strftime("%Y-%m-%dT%H:%M:%SZ")
            pod["metadata"].update(deletionTimestamp=deadline, deletionGracePeriodSeconds=grace)

    def run_all(self, names: list[str] | None = None) -> None:
        for name in names or list(self.pods()):
            if self.pod(name)["status"].get("phase") == "Pending":
                self.set_pod(name, "Running")

    def finish(self, name: str, exit_code: int = 0, finished_at: datetime | None = None) -> None:
        """The pod's container ended with ``exit_code``; ``finished_at``: the kubelet's `finishedAt`."""
        self.set_pod(name, "Succeeded" if exit_code == 0 else "Failed", exit_code=exit_code)
        if finished_at is not None:
            terminated = self.pod(name)["status"]["containerStatuses"][0]["state"]["terminated"]
            terminated["finishedAt"] = finished_at.strftime("%Y-%m-%dT%H:%M:%SZ")

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def delete_object(self, kind: str, name: str) -> None:
        del self.objects[(kind, name)]

    # -- reading the status ---------------------------------------------------------------------------

    @property
    def status(self) -> dict[str, Any]:
        return self.job.get("status") or {}

    def cond(self, ctype: str) -> dict[str, Any] | None:
        return next((c for c in self.status.get("conditions") or [] if c["type"] == ctype), None)

    def replica(self, name: str) -> dict[str, Any]:
        for task in self.status.get("tasks") or []:
            for rec in task_replicas(task):
                if rec["name"] == name:
                    return rec
        raise KeyError(name)

    def kinds(self, kind: str) -> list[str]:
        return sorted(name for (k, name) in self.objects if k == kind)


def _crashed(actions: list[Any], prefix: int, subset: int) -> list[Any]:
    done: list[Any] = []
    for run in action_runs(actions):
        if len(done) + len(run) > prefix:
            return done + [action for i, action in enumerate(run) if subset >> i & 1]
        done += run
    return done
