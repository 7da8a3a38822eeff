"""Checks shared by the kinds that list replica specs by type."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from t9k_provider.jobs.common import RunMode
from t9k_provider.jobs.templates import Issues


def duplicate_type_issues(types: Sequence[str], path: str) -> Issues:
    seen: set[str] = set()
    issues: Issues = []
    for i, replica_type in enumerate(types):
        if replica_type in seen:
            issues.append((f"{path}[{i}].type", f"replica type {replica_type!r} is listed twice"))
        seen.add(replica_type)
    return issues


def allowed_type_issues(types: Sequence[str], allowed: Iterable[str], path: str, kind: str) -> Issues:
    allowed = tuple(allowed)
    return [
        (f"{path}[{i}].type", f"{kind} replica type must be one of {', '.join(allowed)}; got {t!r}")
        for i, t in enumerate(types)
        if t not in allowed
    ]


def run_mode_issues(run_mode: RunMode | None, types: Iterable[str]) -> Issues:
    """Debug and resume settings may only name replica types the job has."""
    if run_mode is None:
        return []
    known = set(types)
    issues: Issues = []
    listed = [
        ("runMode.debug.replicaSpecs", run_mode.debug.replica_specs if run_mode.debug else None),
        ("runMode.pause.resumeSpecs", run_mode.pause.resume_specs if run_mode.pause else None),
    ]
    for path, specs in listed:
        for i, spec in enumerate(specs or []):
            if spec.type not in known:
                issues.append(
                    (
                        f"{path}[{i}].type",
                        f"no replica type {spec.type!r}; the job has {', '.join(sorted(known))}",
                    )
                )
    return issues
