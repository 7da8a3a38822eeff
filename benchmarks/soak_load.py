"""The soak's load: what it creates and changes, when, and what each write was (for its observation).

Changes are ``scale``, ``roll`` (a template change: a rollout), ``annotate`` (metadata only), ``delete-pod``
(a user deletes one of the object's pods: its controller must replace it, once, and never a finished T9k
replica) and ``recreate`` (the object deleted and created again under the same name: the new one's pods take
the old ones' names, so they must wait until the old ones are gone). One object's changes never overlap;
everything else runs at once from a pool of writers.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.api import ApiError
from benchmarks.soak_api import Api
from benchmarks.soak_checks import Key
from benchmarks.soak_workloads import WORKLOADS, Recorder, Workload, new_workload, update_patch

INCARNATION = "soak.t9k/incarnation"  # which creation of a name an object is
#: Each change, in words.
CHANGES = {
    "scale": "scaled",
    "roll": "template changed (a rollout)",
    "annotate": "annotated",
    "delete-pod": "one of its pods deleted",
    "recreate": "deleted and created again under its name",
}


@dataclass(frozen=True)
class Write:
    key: Key
    rv: int
    generation: int  # 0: a change its controller does not observe (metadata, or a kind without status)
    sent: float


@dataclass(frozen=True)
class Action:
    at: float  # seconds after the load began
    workload: Workload
    change: str  # "create", or one of the kind's updates
    step: int


@dataclass
class Load:
    """Builds the actions of one round and does them; ``writes`` and ``deleted_pods`` say what was done."""

    api: Api
    recorder: Recorder
    rng: random.Random
    workloads: list[Workload] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    deleted_pods: dict[str, str] = field(default_factory=dict)  # pod uid -> its phase when deleted
    changes: dict[str, int] = field(default_factory=dict)  # how many of each change were made
    journal: list[str] = field(default_factory=list)  # what was done when, for whoever reads a failure
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _busy: dict[Key, threading.Lock] = field(default_factory=dict)

    def plan(
        self, objects: dict[str, int], updates: int, window: float, namespaces: tuple[str, ...]
    ) -> list[Action]:
        """Creates over the first 80% of the window; changes from its first tenth on, each of a kind drawn
        evenly (then of an object created a second earlier that takes it), in time order."""
        rng = self.rng
        actions = []
        for name, count in objects.items():
            kind = WORKLOADS[name]
            for i in range(count):
                ns = namespaces[i % len(namespaces)]
                workload = new_workload(kind, ns, f"{name.lower()[:12]}-{i}", self.recorder, rng)
                self.workloads.append(workload)
                self._busy[workload.key] = threading.Lock()
                actions.append(Action(rng.uniform(0, 0.8 * window), workload, "create", 0))
        creates = sorted(actions, key=lambda a: a.at)
        for step in range(updates):
            at = rng.uniform(0.1 * window, window)
            change = rng.choice(list(CHANGES))
            earlier = [a.workload for a in creates if a.at < at - 1.0] or [creates[0].workload]
            able = [w for w in earlier if change in w.kind.updates] or earlier
            workload = rng.choice(able)
            if change not in workload.kind.updates:
                change = rng.choice(workload.kind.updates)
            actions.append(Action(at, workload, change, step + 1))
        return sorted(actions, key=lambda a: a.at)

    def do(self, action: Action) -> None:
        workload = action.workload
        with self._busy[workload.key]:
            if action.change == "create":
                self._create(workload, 0)
            elif action.change == "recreate":
                self._recreate(workload, action.step)
            elif action.change == "delete-pod":
                self._delete_pod(workload)
            else:
                with self._lock:
                    patch = update_patch(workload, action.change, action.step, self.rng)
                status, obj, sent = self.api.request(
                    "PATCH", workload.path, patch, content_type="application/merge-patch+json"
                )
                if status != 200:
                    raise ApiError(f"{action.change} {workload}: HTTP {status}: {str(obj)[:300]}")
                self._wrote(workload, obj, sent, controlled=action.change != "annotate")
        self.note(f"{action.change} {workload} (uid {workload.uid})")
        with self._lock:
            self.changes[action.change] = self.changes.get(action.change, 0) + 1

    def note(self, what: str) -> None:
        with self._lock:
            self.journal.append(f"{time.time():.3f} {what}")

    def _create(self, workload: Workload, incarnation: int) -> None:
        """POST until the name is free (a recreated pod's predecessor may still be terminating); a 409 from
        this very incarnation is a try that was committed while its answer was lost to a fault."""
        workload.manifest["metadata"].setdefault("annotations", {})[INCARNATION] = str(incarnation)
        deadline = time.monotonic() + self.api.patience
        while True:
            status, obj, sent = self.api.request(
                "POST", workload.kind.collection(workload.namespace), workload.manifest
            )
            if status == 409:
                status, obj, sent = self.api.request("GET", workload.path)
                if status == 404:
                    continue
                if status == 200 and (obj["metadata"].get("annotations") or {}).get(INCARNATION) == str(
                    incarnation
                ):
                    break
                if time.monotonic() > deadline:
                    raise ApiError(f"create {workload}: its name stayed taken for {self.api.patience:g} s")
                time.sleep(0.2)
                continue
            break
        if status not in (200, 201):
            raise ApiError(f"create {workload}: HTTP {status}: {str(obj)[:300]}")
        workload.uid = obj["metadata"]["uid"]
        self._wrote(workload, obj, sent, controlled=True)

    def _recreate(self, workload: Workload, step: int) -> None:
        status, obj, _ = self.api.request("DELETE", workload.path, {"propagationPolicy": "Background"})
        if status not in (200, 202, 404):
            raise ApiError(f"delete {workload}: HTTP {status}: {str(obj)[:300]}")
        with self._lock:
            fresh = new_workload(workload.kind, workload.namespace, workload.name, self.recorder, self.rng)
        workload.manifest = fresh.manifest
        self._create(workload, step)

    def _delete_pod(self, workload: Workload) -> None:
        """One of its pods that has not finished, chosen at random among those not being deleted; none:
        nothing. (A finished T9k replica whose pod is deleted before the controller has recorded its outcome
        runs again: see docs/benchmarks.md, section 13.)"""
        path = f"/api/v1/namespaces/{workload.namespace}/pods?labelSelector=app%3D{workload.name}"
        pods = [
            p
            for p in self.api.json("GET", path)["items"]
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        if not pods:
            return
        with self._lock:
            pod = self.rng.choice(pods)
        meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase") or "Pending"
        with self._lock:
            self.deleted_pods[meta["uid"]] = phase
        self.note(f"deleting pod {meta['name']} ({meta['uid']}, {phase})")
        path = f"/api/v1/namespaces/{workload.namespace}/pods/{meta['name']}"
        status, obj, _ = self.api.request("DELETE", path, {"preconditions": {"uid": meta["uid"]}})
        if status not in (200, 404, 409):  # 409: replaced meanwhile (its uid changed)
            raise ApiError(f"delete pod of {workload}: HTTP {status}: {str(obj)[:300]}")

    def _wrote(self, workload: Workload, obj: dict[str, Any], sent: float, controlled: bool) -> None:
        meta = obj["metadata"]
        has_status = workload.kind.name not in ("Pod", "Job")
        generation = meta.get("generation", 0) if controlled and has_status else 0
        with self._lock:
            self.writes.append(Write(workload.key, int(meta["resourceVersion"]), generation, sent))
