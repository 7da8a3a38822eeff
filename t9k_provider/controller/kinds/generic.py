"""GenericJob: free-form types, variable substitution, Services only when ports are declared, user rules."""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.controller.engine.plan import Plan, ReplicaGroup
from t9k_provider.controller.engine.substitution import Variables, check_variables, substitute_template
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
    variables = Variables(
        job=ctx.name, replicas=counts, ports=None if ports is None else {p.name: p.port for p in ports}
    )
    service_ports = tuple(p.dump() for p in ports or [])
    # Checked once here, over every template: a variable that cannot be expanded is an invalid spec whichever
    # replica is built (docs/controller.md#genericjob-variable-substitution).
    check_variables(
        [(f"spec.replicaSpecs[{i}].template", rs.template) for i, rs in enumerate(spec.replica_specs)],
        variables,
    )
    groups = []
    for i, rs in enumerate(spec.replica_specs):
        path = f"spec.replicaSpecs[{i}].template"
        groups.append(
            ReplicaGroup(
                type=rs.type,
                replicas=rs.replicas,
                template=partial(substitute_template, rs.template, variables, rs.type, path=path),
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
