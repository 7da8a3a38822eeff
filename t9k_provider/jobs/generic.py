"""GenericJob: free-form replica types with user-written success and failure rules."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from t9k_provider.jobs.basemodel import RankValue
from t9k_provider.jobs.contract import Leader
from t9k_provider.jobs.envelope import JobSpec, T9kJob
from t9k_provider.jobs.podtemplates import Issues, template_issues
from t9k_provider.jobs.replicachecks import duplicate_type_issues, run_mode_issues, type_name_issues
from t9k_provider.jobs.specparts import CleanUpPolicy, ReplicaSpec, RunMode, SchedulePolicy, ServiceOption
from t9k_provider.jobs.variables import Variables, variable_issues

# A rule maps replica types to ranks; it holds when every listed replica is in the rule's state.
FinishedRule = dict[str, list[RankValue]]


class GenericJobSpec(JobSpec):
    replica_specs: list[ReplicaSpec] = Field(min_length=1)
    success_rules: list[FinishedRule] | None = Field(
        None, description="The job succeeds when all replicas of any one rule ({type: [ranks]}) succeeded."
    )
    failure_rules: list[FinishedRule] | None = Field(
        None, description="The job fails when all replicas of any one rule failed for good."
    )
    service: ServiceOption | None = None
    clean_up_policy: CleanUpPolicy = Field(
        "None", description="Replicas to delete once the job has finished."
    )
    run_mode: RunMode | None = None
    scheduler: SchedulePolicy | None = None

    def replica_counts(self) -> dict[str, int]:
        return {r.type: r.replicas for r in self.replica_specs}

    def variables(self, job: str) -> Variables:
        """What the variables of job `job`'s templates expand from."""
        ports = None if self.service is None else {p.name: p.port for p in self.service.ports}
        return Variables(job=job, replicas=self.replica_counts(), ports=ports)

    def issues(self) -> Issues:
        types = [r.type for r in self.replica_specs]
        issues = type_name_issues(types, "replicaSpecs") + duplicate_type_issues(types, "replicaSpecs")
        for i, replica in enumerate(self.replica_specs):
            issues += template_issues(replica.template, f"replicaSpecs[{i}].template", "GenericJob")
        counts = self.replica_counts()
        for field, rules in (("successRules", self.success_rules), ("failureRules", self.failure_rules)):
            for i, rule in enumerate(rules or []):
                if not rule:
                    issues.append((f"{field}[{i}]", "a rule must name at least one replica"))
                for replica_type, ranks in rule.items():
                    where = f"{field}[{i}].{replica_type}"
                    if replica_type not in counts:
                        issues.append((where, f"no replica type {replica_type!r} in spec.replicaSpecs"))
                        continue
                    for j, rank in enumerate(ranks):
                        if int(rank) >= counts[replica_type]:
                            have = f"{replica_type!r} has {counts[replica_type]} replica(s)"
                            issues.append((f"{where}[{j}]", f"rank {rank} does not exist: {have}"))
        if self.service is not None:
            seen: set[str] = set()
            for i, port in enumerate(self.service.ports):
                if port.name in seen:
                    issues.append((f"service.ports[{i}].name", f"duplicate port name {port.name!r}"))
                seen.add(port.name)
        # Every template at once: a variable that cannot be expanded is an invalid spec whichever replica uses
        # it (docs/controller.md#genericjob-variable-substitution). The job's name does not matter here.
        templates = [(f"replicaSpecs[{i}].template", rs.template) for i, rs in enumerate(self.replica_specs)]
        issues += variable_issues(templates, self.variables(""))
        return issues + run_mode_issues(self.run_mode, counts)


class GenericJob(T9kJob):
    """GenericJob runs replicas of free-form types; user-written rules decide success and failure."""

    KIND: ClassVar[str] = "GenericJob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("gj",)
    LEADER: ClassVar[Leader] = Leader()  # replica 0 of the first type listed

    spec: GenericJobSpec
