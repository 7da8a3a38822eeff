"""The controller's decision for one job: validate, then run it as its kind's registry entry says.

Pure: `reconcile(observed) -> Decision` does no I/O; the runtime feeds it and carries the Decision out.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.jobs import ManifestError, load
from t9k_provider.jobs.contract import TERMINAL_PHASES
from t9k_provider.kube.timestamps import rfc3339

from .engine.decision import Decision, Event, Observed
from .engine.plan import SpecError
from .engine.status import merge_conditions, sanitized
from .kinds.context import JobContext, Keygen
from .kinds.registry import REGISTRY


def reconcile(observed: Observed, *, ssh_keygen: Keygen | None = None) -> Decision:
    """The complete desired status and the actions that get there. Pure: same input, same output.

    `ssh_keygen` returns (private key, public key) in OpenSSH text form; it is called only when a job's SSH
    Secret is missing. Tests inject a fixed pair; the default generates a fresh ed25519 key.
    """
    job = observed.job
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return Decision(status=job.get("status") or {})  # garbage collection removes the children
    try:
        # Status is the controller's own output: never let it make a spec invalid.
        typed = load({k: v for k, v in job.items() if k != "status"})
        kind = REGISTRY[type(typed)]
        return kind.decide(typed, JobContext(job, ssh_keygen), observed.children, observed.now)
    except (ManifestError, SpecError) as exc:
        return invalid(job, exc, observed)


# What an invalid spec's status keeps of the controller's earlier bookkeeping.
KEPT_WHEN_INVALID = ("tasks", "aggregate", "backoffCount", "startTime", "restarts", "disruptions")


def invalid(job: dict[str, Any], exc: ValueError, observed: Observed) -> Decision:
    """A spec the controller cannot run ends the job Failed with the field path, and is not retried."""
    prior = sanitized(job.get("status"))
    if prior.get("phase") in TERMINAL_PHASES:
        return Decision(status=job.get("status") or {})
    message = f"Invalid spec: {exc}"
    desired = {"Completed": ("False", "Failed", message), "Failed": ("True", "InvalidSpec", message)}
    if any(c.get("type") == "Running" for c in prior.get("conditions") or []):
        desired["Running"] = ("False", "Failed", message)
    status: dict[str, Any] = {
        **{k: v for k, v in prior.items() if k in KEPT_WHEN_INVALID and v},
        "phase": "Failed",
        "conditions": merge_conditions(prior.get("conditions"), desired, observed.now),
        "completionTime": rfc3339(observed.now),
    }
    generation = (job.get("metadata") or {}).get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    return Decision(status=status, events=[Event("Warning", "InvalidSpec", message)])
