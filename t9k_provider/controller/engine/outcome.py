"""Which rule decides a replica job, and what its Running condition says while none does
(docs/controller.md#success-and-failure)."""

from __future__ import annotations

from collections import Counter

from t9k_provider.jobs.contract import REPLICA_PHASES

from .plan import Plan
from .rounds import Round

ALL_RUNNING = "All pods are running normally."
# Failed reason of a job whose replicas all finished for good without meeting any rule.
NO_RULE_MATCHED = "NoRuleMatched"
_PHASE_WORDS = {"Creating": "being created"}


def _rule_text(rule: dict[str, tuple[int, ...]]) -> str:
    inner = ", ".join(f'"{t}": [{", ".join(str(i) for i in idx)}]' for t, idx in rule.items())
    return "{ " + inner + " }"


def _rule_met(rule: dict[str, tuple[int, ...]], phases: dict[tuple[str, int], str], want: str) -> bool:
    return bool(rule) and all(phases.get((t, i)) == want for t, idx in rule.items() for i in idx)


def _replicas_in(plan: Plan, phases: dict[tuple[str, int], str], want: str) -> str:
    """The replicas in phase `want`, written as a rule is ({ "worker": [0, 2] }), or "none"."""
    rule = {
        g.type: idx
        for g in plan.groups
        if (idx := tuple(i for i in range(g.replicas) if phases.get((g.type, i)) == want))
    }
    return _rule_text(rule) if rule else "none"


def _no_rule_matched(plan: Plan, phases: dict[tuple[str, int], str]) -> str:
    message = (
        "Every replica has finished and no success or failure rule matched, so the job can no longer change. "
        f"Succeeded: {_replicas_in(plan, phases, 'Succeeded')}; "
        f"failed: {_replicas_in(plan, phases, 'Failed')}."
    )
    if plan.rule_messages:
        message += (
            f" Success rules: {', '.join(_rule_text(r) for r in plan.success_rules)};"
            f" failure rules: {', '.join(_rule_text(r) for r in plan.failure_rules)}."
        )
    return message


def decide_outcome(plan: Plan, rnd: Round) -> tuple[str, str, str] | None:
    """(phase, message, reason) when a failure or success rule is met (failure wins), or when every replica
    has finished for good and none is met: nothing can change any more, so the job fails with reason
    NoRuleMatched (docs/controller.md#success-and-failure). `rnd` is an active round: a replica about to be
    restarted or recreated is `Creating` there, not finished."""
    phases = {key: rec["phase"] for key, rec in rnd.records.items()}
    for phase, rules, default in (
        ("Failed", plan.failure_rules, plan.failure_message),
        ("Succeeded", plan.success_rules, plan.success_message),
    ):
        for rule in rules:
            if _rule_met(rule, phases, phase):
                if plan.rule_messages:
                    verb = "is failed" if phase == "Failed" else "succeeded"
                    return phase, f"The job {verb} with rule: {_rule_text(rule)}", phase
                return phase, default, phase
    if phases and all(p in ("Succeeded", "Failed") for p in phases.values()):
        return "Failed", _no_rule_matched(plan, phases), NO_RULE_MATCHED
    return None


def running_message(phases: list[str]) -> str:
    """The Running condition's message: the T9k words only while every replica runs, else the counts."""
    if phases and all(p == "Running" for p in phases):
        return ALL_RUNNING
    counts = Counter(phases)
    order = [*REPLICA_PHASES, *sorted(set(counts) - set(REPLICA_PHASES))]
    others = ", ".join(
        f"{counts[p]} {_PHASE_WORDS.get(p, p.lower())}" for p in order if p != "Running" and counts[p]
    )
    return f"{counts['Running']} of {len(phases)} pods are running ({others})."
