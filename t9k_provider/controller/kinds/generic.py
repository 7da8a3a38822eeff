"""GenericJob: free-form types, variable substitution, Services only when ports are declared, user rules."""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.controller.engine.plan import Plan, ReplicaGroup
from t9k_provider.controller.engine.substitution import substitute_template
from t9k_provider.jobs.generic import GenericJob

from .common import mode_fields, pick_container, scheduler_plan
from .context import JobContext


def _rules(rules: list[dict[str, list[Any]]] | None) -> tuple[dict[str, tuple[int, ...]], ...] | None:
    if rules is None:
        return None
    return tuple({t: tuple(int(r) for r in ranks) for t, ranks in rule.items()} for rule in rules)


def compile_generic(typed: GenericJob, ctx: JobContext) -> Plan:
    spec = typed.spec
    counts = spec.replica_counts()
    ports = spec.service.ports if spec.service is not None else None
    # The model refused a job whose variables cannot be expanded (jobs/variables.py).
    variables = spec.variables(ctx.name)
    service_ports = tuple(p.dump() for p in ports or [])
    groups = []
    for rs in spec.replica_specs:
        groups.append(
            ReplicaGroup(
                type=rs.type,
                replicas=rs.replicas,
                template=partial(substitute_template, rs.template, variables, rs.type),
                restart_policy=rs.restart_policy.policy,
                restart_limit=rs.restart_policy.limit,
                training_container=pick_container(rs.template, ()),
                service_ports=service_ports,
            )
        )
    # Without rules: success when every replica succeeded, failure as soon as any replica failed for good.
    every = {rs.type: tuple(range(rs.replicas)) for rs in spec.replica_specs}
    each = tuple({rs.type: (r,)} for rs in spec.replica_specs for r in range(rs.replicas))
    return Plan(
        groups=tuple(groups),
        success_rules=_rules(spec.success_rules) or (every,),
        failure_rules=_rules(spec.failure_rules) or each,
        cleanup_policy=spec.clean_up_policy,
        scheduler=scheduler_plan(spec.scheduler, sum(counts.values())),
        rule_messages=True,
        **mode_fields(spec.run_mode, list(counts)),
    )
