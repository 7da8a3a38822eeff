"""Checks and look-ups on pod templates, which stay plain Kubernetes dicts."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

Issues = list[tuple[str, str]]


def containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The template's containers ([] when the template is malformed)."""
    spec = template.get("spec") if isinstance(template, dict) else None
    found = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def container_index(
    template: dict[str, Any], preferred: Sequence[str], fallback_first: bool = True
) -> int | None:
    """Index of the first container whose name is in `preferred` (in that order), else 0."""
    found = containers(template)
    for name in preferred:
        for i, container in enumerate(found):
            if container.get("name") == name:
                return i
    return 0 if fallback_first and found else None


def template_issues(
    template: dict[str, Any],
    path: str,
    kind: str,
    required_container: str | None = None,
    may_be_empty: bool = False,
) -> Issues:
    """A template must hold named containers, and the kind's training container when it needs one."""
    if may_be_empty and not template:
        return []
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return [(f"{path}.spec", "a pod template needs a `spec` with `containers`")]
    listed = spec.get("containers")
    where = f"{path}.spec.containers"
    if not isinstance(listed, list) or not listed:
        return [(where, "at least one container is required")]
    issues: Issues = []
    names: set[str] = set()
    for i, container in enumerate(listed):
        name = container.get("name") if isinstance(container, dict) else None
        if not isinstance(name, str) or not name:
            issues.append((f"{where}[{i}].name", "every container needs a name"))
        elif name in names:
            issues.append((f"{where}[{i}].name", f"duplicate container name {name!r}"))
        else:
            names.add(name)
    if required_container and required_container not in names and not issues:
        issues.append((where, f'{kind} needs a container named "{required_container}"'))
    return issues


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


def mount_issues(template: dict[str, Any], path: str, reserved: Sequence[str], owner: str) -> Issues:
    """Mounts at or below a path the controller itself mounts would break the job."""
    issues: Issues = []
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict):
        return issues
    for group in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(group) or []):
            if not isinstance(container, dict):
                continue
            for j, mount in enumerate(container.get("volumeMounts") or []):
                target = mount.get("mountPath") if isinstance(mount, dict) else None
                if not isinstance(target, str):
                    continue
                target = _norm(target)
                for taken in reserved:
                    taken = _norm(taken)
                    if target == taken or target.startswith(taken + "/"):
                        where = f"{path}.spec.{group}[{i}].volumeMounts[{j}].mountPath"
                        issues.append((where, f"{target!r} is reserved: {owner} mounts {taken} itself"))
    return issues
