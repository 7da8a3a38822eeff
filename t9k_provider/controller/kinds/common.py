"""Helpers every kind compiler shares: run modes, scheduler, env injection, template edits."""

from __future__ import annotations

import copy
from typing import Any

from t9k_provider.controller.engine.initwait import wait_container
from t9k_provider.controller.engine.plan import ModeOverride, OverrideKey, SchedulerPlan
from t9k_provider.jobs.specparts import ElasticConfig, RunMode, SchedulePolicy

#: Run-mode entries whose `type` names one replica, not a type: spec type -> (replica type, index).
Aliases = dict[str, tuple[str, int]]


def debug_overrides(
    run_mode: RunMode | None, types: list[str], aliases: Aliases | None = None
) -> dict[OverrideKey, ModeOverride] | None:
    """None when debug is off. Every type is overridden, listed or not: debug mode deploys the training
    environment but never starts training (docs/controller.md#debug-mode); a type the debug spec does not
    list, or lists with `command=None`, runs its group's default debug command. An entry whose type is one
    of `aliases` (DeepSpeed's `master`) applies to that one replica, over its type's entry."""
    if run_mode is None or not run_mode.debug_enabled:
        return None
    assert run_mode.debug is not None
    overrides: dict[OverrideKey, ModeOverride] = {t: ModeOverride() for t in types}
    for s in run_mode.debug.replica_specs or []:
        overrides[(aliases or {}).get(s.type, s.type)] = ModeOverride(
            command=tuple(s.command) if s.command else None, skip_init_container=s.skip_init_container
        )
    return overrides


def resume_overrides(
    run_mode: RunMode | None, aliases: Aliases | None = None
) -> dict[OverrideKey, ModeOverride]:
    """The resume override of each type listed, or of the one replica an alias names (over its type's)."""
    if run_mode is None or run_mode.pause is None:
        return {}
    return {
        (aliases or {}).get(s.type, s.type): ModeOverride(
            command=tuple(s.command) if s.command is not None else None,
            args=tuple(s.args) if s.args is not None else None,
            skip_init_container=s.skip_init_container,
        )
        for s in run_mode.pause.resume_specs or []
    }


def scheduler_plan(scheduler: SchedulePolicy | None, min_member: int) -> SchedulerPlan | None:
    if scheduler is None or scheduler.t9k_scheduler is None:
        return None
    t9k = scheduler.t9k_scheduler
    return SchedulerPlan(queue=t9k.queue, priority=t9k.priority, min_member=min_member)


def elastic_replicas(elastic: ElasticConfig, written: int) -> int:
    """expectedReplicas (else the written count) clamped into [minReplicas, maxReplicas]."""
    assert elastic.min_replicas is not None and elastic.max_replicas is not None  # validated by the model
    return min(max(elastic.expected_replicas or written, elastic.min_replicas), elastic.max_replicas)


def container_named(template: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next(
        (c for c in (template.get("spec") or {}).get("containers") or [] if c.get("name") == name), None
    )


def pick_container(template: dict[str, Any], preferred: tuple[str, ...]) -> str:
    """Name of the first container named in `preferred`, else of the first container."""
    containers = (template.get("spec") or {}).get("containers") or []
    for name in preferred:
        if any(c.get("name") == name for c in containers):
            return name
    return str(containers[0].get("name", "")) if containers else ""


def with_env(template: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """A copy with `env` added to every container; a variable the user set keeps the user's value."""
    out = copy.deepcopy(template)
    for container in (out.setdefault("spec", {})).get("containers") or []:
        present = {e.get("name") for e in container.get("env") or []}
        extra = [{"name": k, "value": v} for k, v in env.items() if k not in present]
        if extra:
            container["env"] = [*(container.get("env") or []), *extra]
    return out


def ensure_port(template: dict[str, Any], container: str, name: str, port: int) -> None:
    """Declare the port the controller uses on the training container (in place)."""
    target = container_named(template, container)
    if target is None:
        return
    ports = target.setdefault("ports", [])
    if not any(p.get("containerPort") == port or p.get("name") == name for p in ports):
        ports.append({"name": name, "containerPort": port, "protocol": "TCP"})


def declared_port(template: dict[str, Any], container: str, name: str | None) -> int | None:
    """The port named `name` on the container, or its first declared port when `name` is None."""
    target = container_named(template, container)
    for port in (target or {}).get("ports") or []:
        if name is None or port.get("name") == name:
            value = port.get("containerPort")
            return int(value) if value is not None else None
    return None


def add_wait(template: dict[str, Any], container: str, targets: list[str]) -> None:
    """Prepend the bounded peer wait (docs/controller.md#r4) to the template's init containers (in place)."""
    if not targets:
        return
    image = (container_named(template, container) or {}).get("image", "")
    spec = template.setdefault("spec", {})
    spec["initContainers"] = [wait_container(image, targets), *(spec.get("initContainers") or [])]


def set_command(template: dict[str, Any], container: str, command: list[str]) -> None:
    """Replace the container's command and drop its args (in place)."""
    target = container_named(template, container)
    if target is None:
        return
    target["command"] = list(command)
    target.pop("args", None)


def mode_fields(run_mode: RunMode | None, types: list[str], aliases: Aliases | None = None) -> dict[str, Any]:
    """The Plan fields every kind takes from `spec.runMode`."""
    return {
        "debug": debug_overrides(run_mode, types, aliases),
        "paused": run_mode is not None and run_mode.pause_enabled,
        "resume": resume_overrides(run_mode, aliases),
    }
