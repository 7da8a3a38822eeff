"""Checks shared by the kinds that list replica specs by type."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from t9k_provider.jobs.podtemplates import Issues
from t9k_provider.jobs.specparts import RunMode

_TYPE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def type_name_issues(types: Sequence[str], path: str) -> Issues:
    """Free-form types become part of pod and service names, so they must be lower-case labels."""
    return [
        (f"{path}[{i}].type", f"{t!r} must consist of lower-case letters, digits and '-' (it names pods)")
        for i, t in enumerate(types)
        if not _TYPE.match(t)
    ]


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
    have = ", ".join(sorted(known))
    for path, specs in listed:
        for i, spec in enumerate(specs or []):
            if spec.type not in known:
                issues.append((f"{path}[{i}].type", f"no replica type {spec.type!r}; the job has {have}"))
    return issues
