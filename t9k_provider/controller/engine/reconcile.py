"""Entry point of the engine: validate, compile with the kind's compiler, run the plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from t9k_provider.controller.kinds import decide
from t9k_provider.jobs import ManifestError, load
from t9k_provider.jobs.contract import TERMINAL_PHASES

from .model import SpecError
from .status import merge_conditions, rfc3339, sanitized
from .types import Decision, Event, Observed

# (apiVersion, kind, plural) of every child type the engine creates; the runtime watches them all.
WATCHED_CHILD_TYPES: list[tuple[str, str, str]] = [
    ("v1", "Pod", "pods"),
    ("v1", "Service", "services"),
    ("v1", "ConfigMap", "configmaps"),
    ("v1", "Secret", "secrets"),
    ("scheduler.tensorstack.dev/v1beta1", "PodGroup", "podgroups"),
    ("batch/v1", "Job", "jobs"),
    ("flinkoperator.k8s.io/v1beta1", "FlinkCluster", "flinkclusters"),
    ("tensorstack.dev/v1beta1", "TensorBoard", "tensorboards"),
]


def reconcile(observed: Observed, *, ssh_keygen: Callable[[], tuple[str, str]] | None = None) -> Decision:
    """The complete desired status and the actions that get there. Pure: same input, same output.

    `ssh_keygen` returns (private key, public key) in OpenSSH text form; it is called only when a job's SSH
    Secret is missing. Tests inject a fixed pair; the default generates a fresh ed25519 key.
    """
    job = observed.job
    prior = job.get("status") or {}
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return Decision(status=prior)  # garbage collection removes the children
    try:
        # Status is the controller's own output: never let it make a spec invalid.
        typed = load({k: v for k, v in job.items() if k != "status"})
        return decide(typed, job, observed.children, observed.now, ssh_keygen)
    except (ManifestError, SpecError) as exc:
        return invalid(job, exc, observed)


def invalid(job: dict[str, Any], exc: ValueError, observed: Observed) -> Decision:
    """A spec the controller cannot run ends the job Failed with the field path, and is not retried."""
    prior = sanitized(job.get("status"))
    if prior.get("phase") in TERMINAL_PHASES:
        return Decision(status=job.get("status") or {})
    message = f"Invalid spec: {exc}"
    desired = {
        "Completed": ("False", "Failed", message),
        "Failed": ("True", "InvalidSpec", message),
    }
    if any(c.get("type") == "Running" for c in prior.get("conditions") or []):
        desired["Running"] = ("False", "Failed", message)
    status: dict[str, Any] = {
        **{k: v for k, v in prior.items() if k in ("tasks", "aggregate", "backoffCount", "startTime") and v},
        "phase": "Failed",
        "conditions": merge_conditions(prior.get("conditions"), desired, observed.now),
        "completionTime": rfc3339(observed.now),
    }
    generation = (job.get("metadata") or {}).get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    return Decision(status=status, events=[Event("Warning", "InvalidSpec", message)])
