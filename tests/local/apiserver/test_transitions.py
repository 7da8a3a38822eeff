"""CRD transition rules as the local server evaluates them: ``self == oldSelf`` where both sides have one."""

from __future__ import annotations

from t9k_provider.local.machinery.transitions import transition_causes

RULE = {"rule": "self  ==  oldSelf", "message": "frozen"}  # spacing as a CRD author may write it
SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "frozen": {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [RULE]},
                "free": {"type": "string"},
                "other": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3"}]},
            },
        }
    },
}


def test_changing_an_immutable_value_is_invalid_and_names_the_field() -> None:
    (cause,) = transition_causes(SCHEMA, {"spec": {"frozen": ["a"]}}, {"spec": {"frozen": ["b"]}})
    assert cause.field == "spec.frozen" and cause.reason == "FieldValueInvalid"
    assert cause.message == 'Invalid value: "array": frozen'


def test_unchanged_values_other_fields_and_other_rules_pass() -> None:
    old = {"spec": {"frozen": ["a"], "free": "x", "other": "long value"}}
    assert transition_causes(SCHEMA, old, {"spec": {"frozen": ["a"], "free": "y", "other": "longer"}}) == []


def test_a_value_only_one_side_has_is_not_a_transition() -> None:
    """As in Kubernetes: the rule runs only where the old object had the value and the new one has it."""
    assert transition_causes(SCHEMA, {"spec": {}}, {"spec": {"frozen": ["a"]}}) == []
    assert transition_causes(SCHEMA, {"spec": {"frozen": ["a"]}}, {"spec": {}}) == []


def test_without_a_message_the_rule_is_named() -> None:
    schema = {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}
    (cause,) = transition_causes(schema, "a", "b")
    assert cause.field == "" and cause.message.endswith("failed rule: self == oldSelf")
