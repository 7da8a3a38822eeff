"""Built-in resource validation: metadata rules, kind rules, update immutability and the 422 message."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t9k_provider.local.apiserver.generic import validation
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.generic.validation import invalid_message
from t9k_provider.local.apiserver.served import BUILTIN
from t9k_provider.local.apiserver.strategies.custom import resources_from_crd
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause

_BUILTIN = {r.plural: r for r in BUILTIN if not r.stored_as}
_CUSTOM = resources_from_crd(
    {
        "spec": {
            "group": "x.dev",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": True, "storage": True}],
        }
    }
)[0]


def resource(plural: str) -> Resource:
    """The built-in resource of this plural; any other is a (schemaless, namespaced) custom resource."""
    return _BUILTIN.get(plural, _CUSTOM)


def validate_create(plural: str, obj: dict) -> list[Cause]:
    return validation.validate_create(resource(plural), obj)


def validate_update(plural: str, old: dict, new: dict) -> list[Cause]:
    return validation.validate_update(resource(plural), old, new)


def meta(name: str = "x", namespace: str | None = "default", **extra: Any) -> dict:
    out: dict[str, Any] = {"name": name, **extra}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def pod(**spec: Any) -> dict:
    base = {
        "metadata": meta("p"),
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1"]}],
            "restartPolicy": "Never",
            **spec,
        },
    }
    return base


def fields(causes: list[Cause]) -> list[str]:
    return [c.field for c in causes]


def only(causes: list[Cause]) -> Cause:
    assert len(causes) == 1, causes
    return causes[0]


# ----------------------------------------------------------------------------------------- names


def test_valid_objects_pass() -> None:
    assert validate_create("pods", pod()) == []
    assert validate_create("configmaps", {"metadata": meta("cfg.v1"), "data": {"a.b": "1"}}) == []
    assert validate_create("namespaces", {"metadata": meta("team-a", None)}) == []
    assert validate_create("services", {"metadata": meta("svc"), "spec": {"ports": [{"port": 80}]}}) == []


def test_subdomain_name_rule_and_message() -> None:
    cause = only(validate_create("configmaps", {"metadata": meta("Bad_Name")}))
    assert cause == Cause(
        "FieldValueInvalid",
        'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
        "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        "metadata.name",
    )


def test_service_names_are_dns1035_labels() -> None:
    cause = only(validate_create("services", {"metadata": meta("1svc"), "spec": {"ports": [{"port": 80}]}}))
    assert "a DNS-1035 label must consist of lower case alphanumeric characters" in cause.message
    assert validate_create("configmaps", {"metadata": meta("1cfg")}) == []


def test_namespace_names_are_dns1123_labels_and_cluster_scoped() -> None:
    assert fields(validate_create("namespaces", {"metadata": meta("a.b", None)})) == ["metadata.name"]
    assert only(validate_create("namespaces", {"metadata": meta("a", "default")})) == Cause(
        "FieldValueForbidden", "Forbidden: not allowed on this type", "metadata.namespace"
    )


def test_name_too_long() -> None:
    causes = validate_create("pods", {**pod(), "metadata": meta("a" * 254)})
    assert any(c.message.endswith("must be no more than 253 characters") for c in causes)


def test_missing_name_and_generate_name_prefix() -> None:
    assert only(validate_create("configmaps", {"metadata": {"namespace": "default"}})) == Cause(
        "FieldValueRequired", "Required value: name or generateName is required", "metadata.name"
    )
    ok = {"metadata": {"generateName": "job-", "name": "job-x7k2q", "namespace": "default"}}
    assert validate_create("configmaps", ok) == []
    bad = {"metadata": {"generateName": "Job-", "name": "job-x7k2q", "namespace": "default"}}
    assert fields(validate_create("configmaps", bad)) == ["metadata.generateName"]


def test_namespaced_resources_need_a_namespace() -> None:
    assert fields(validate_create("configmaps", {"metadata": meta("c", None)})) == ["metadata.namespace"]


def test_custom_resources_get_metadata_checks() -> None:
    job = {"metadata": meta("Bad"), "spec": {"anything": True}}
    assert fields(validate_create("customresources", job)) == ["metadata.name"]
    assert validate_create("pytorchtrainingjobs", {"metadata": meta("good")}) == []


# ----------------------------------------------------------------------------------------- labels etc.


def test_label_keys_and_values() -> None:
    labels = {"example.com/ok": "v", "bad key": "v", "k": "-bad", "long": "x" * 64, "a/b/c": ""}
    causes = validate_create("configmaps", {"metadata": meta(labels=labels)})
    assert set(fields(causes)) == {"metadata.labels"}
    messages = [c.message for c in causes]
    assert any(m.startswith('Invalid value: "bad key": name part must consist of') for m in messages)
    assert any(m.startswith('Invalid value: "-bad": a valid label must be') for m in messages)
    assert any(m == f'Invalid value: "{"x" * 64}": must be no more than 63 characters' for m in messages)
    assert any(m.startswith('Invalid value: "a/b/c": a qualified name must consist of') for m in messages)


def test_annotation_total_size_limit() -> None:
    small = {"a": "x" * 1000}
    assert validate_create("configmaps", {"metadata": meta(annotations=small)}) == []
    big = {"a": "x" * (256 * 1024)}
    assert only(validate_create("configmaps", {"metadata": meta(annotations=big)})) == Cause(
        "FieldValueTooLong", "Too long: may not be more than 262144 bytes", "metadata.annotations"
    )


def test_owner_references_and_single_controller() -> None:
    refs = [
        {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "1", "controller": True},
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "X",
            "name": "b",
            "uid": "2",
            "controller": True,
        },
        {"apiVersion": "", "kind": "", "name": "", "uid": ""},
    ]
    causes = validate_create("configmaps", {"metadata": meta(ownerReferences=refs)})
    assert set(fields(causes)) == {
        "metadata.ownerReferences",
        "metadata.ownerReferences.apiVersion",
        "metadata.ownerReferences.kind",
        "metadata.ownerReferences.name",
        "metadata.ownerReferences.uid",
    }
    assert any('Found "true" in references for a and b' in c.message for c in causes)


def test_finalizers_must_be_qualified_and_not_orphan_with_foreground() -> None:
    assert validate_create("configmaps", {"metadata": meta(finalizers=["example.com/x", "kubernetes"])}) == []
    causes = validate_create(
        "configmaps", {"metadata": meta(finalizers=["orphan", "foregroundDeletion", "a b"])}
    )
    assert len(causes) == 2
    assert any("cannot be both set" in c.message for c in causes)


# ----------------------------------------------------------------------------------------- pods


def test_pod_requires_containers() -> None:
    bad = pod()
    bad["spec"]["containers"] = []
    assert only(validate_create("pods", bad)) == Cause(
        "FieldValueRequired", "Required value", "spec.containers"
    )


def test_pod_container_names_unique_labels_and_image_required() -> None:
    bad = pod(
        initContainers=[{"name": "c", "image": "x"}],
        containers=[
            {"name": "c", "image": "x"},
            {"name": "Bad", "image": "y"},
            {"image": "z"},
            {"name": "n"},
        ],
    )
    causes = validate_create("pods", bad)
    assert Cause("FieldValueDuplicate", 'Duplicate value: "c"', "spec.containers[0].name") in causes
    assert "spec.containers[1].name" in fields(causes)
    assert Cause("FieldValueRequired", "Required value", "spec.containers[2].name") in causes
    assert Cause("FieldValueRequired", "Required value", "spec.containers[3].image") in causes


def test_pod_restart_policy_env_ports_and_volume_mounts() -> None:
    bad = pod(restartPolicy="Sometimes", volumes=[{"name": "data", "emptyDir": {}}])
    bad["spec"]["containers"][0].update(
        env=[{"name": "1BAD", "value": "x"}, {"value": "y"}],
        ports=[{"containerPort": 0}, {"containerPort": 80, "protocol": "HTTP"}],
        volumeMounts=[{"name": "data", "mountPath": "/d"}, {"name": "nope", "mountPath": "/n"}],
    )
    causes = validate_create("pods", bad)
    assert (
        Cause(
            "FieldValueNotSupported",
            'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
            "spec.restartPolicy",
        )
        in causes
    )
    got = set(fields(causes))
    assert {
        "spec.containers[0].env[0].name",
        "spec.containers[0].env[1].name",
        "spec.containers[0].ports[0].containerPort",
        "spec.containers[0].ports[1].protocol",
        "spec.containers[0].volumeMounts[1].name",
    } <= got
    assert (
        Cause("FieldValueNotFound", 'Not found: "nope"', "spec.containers[0].volumeMounts[1].name") in causes
    )
    assert "spec.containers[0].volumeMounts[0].name" not in got


def test_pod_update_allows_image_labels_and_status() -> None:
    old = pod(activeDeadlineSeconds=100)
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "busybox:2"
    new["spec"]["activeDeadlineSeconds"] = 50
    new["metadata"]["labels"] = {"a": "b"}
    new["status"] = {"phase": "Running"}
    assert validate_update("pods", old, new) == []


def test_pod_update_of_other_spec_fields_is_forbidden() -> None:
    old = pod()
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["command"] = ["sleep", "2"]
    cause = only(validate_update("pods", old, new))
    assert cause.reason == "FieldValueForbidden"
    assert cause.field == "spec"
    assert cause.message.startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    )
    assert 'spec.containers[0].command[1]: "1" -> "2"' in cause.message


def test_pod_update_adding_container_and_raising_deadline() -> None:
    old = pod(activeDeadlineSeconds=10)
    more = copy.deepcopy(old)
    more["spec"]["containers"].append({"name": "d", "image": "x"})
    assert only(validate_update("pods", old, more)).message == (
        "Forbidden: pod updates may not add or remove containers"
    )
    later = copy.deepcopy(old)
    later["spec"]["activeDeadlineSeconds"] = 20
    assert fields(validate_update("pods", old, later)) == ["spec.activeDeadlineSeconds"]


def test_pod_update_tolerations_only_additions_and_empty_values_ignored() -> None:
    old = pod(tolerations=[{"key": "a", "operator": "Exists"}])
    added = copy.deepcopy(old)
    added["spec"]["tolerations"].append({"key": "b", "operator": "Exists"})
    added["spec"]["nodeSelector"] = {}
    assert validate_update("pods", old, added) == []
    removed = copy.deepcopy(old)
    removed["spec"]["tolerations"] = []
    assert fields(validate_update("pods", old, removed)) == ["spec.tolerations"]


# ----------------------------------------------------------------------------------------- metadata updates


def test_metadata_immutable_fields() -> None:
    old = {"metadata": meta(uid="u1", creationTimestamp="2025-01-01T00:00:00Z")}
    new = {"metadata": meta("y", "other", uid="u2", creationTimestamp="2025-02-01T00:00:00Z")}
    causes = validate_update("configmaps", old, new)
    assert Cause("FieldValueInvalid", 'Invalid value: "y": field is immutable', "metadata.name") in causes
    assert {"metadata.namespace", "metadata.uid", "metadata.creationTimestamp"} <= set(fields(causes))
    filled_by_server = {"metadata": meta()}
    assert validate_update("configmaps", old, filled_by_server) == []


def test_no_new_finalizers_while_deleting() -> None:
    old = {"metadata": meta(deletionTimestamp="2025-01-01T00:00:00Z", finalizers=["a.io/x"])}
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["a.io/x", "b.io/y"]
    assert only(validate_update("configmaps", old, new)) == Cause(
        "FieldValueForbidden",
        "Forbidden: no new finalizers can be added if the object is being deleted, "
        'found new finalizers []string{"b.io/y"}',
        "metadata.finalizers",
    )
    removed = copy.deepcopy(old)
    removed["metadata"]["finalizers"] = []
    assert validate_update("configmaps", old, removed) == []


# ----------------------------------------------------------------------------------------- other kinds


def test_service_rules_and_cluster_ip_immutability() -> None:
    bad = {
        "metadata": meta("s"),
        "spec": {"type": "Magic", "ports": [{"port": 80}, {"port": 70000, "name": "b"}]},
    }
    got = set(fields(validate_create("services", bad)))
    assert got == {"spec.type", "spec.ports[0].name", "spec.ports[1].port"}
    old = {"metadata": meta("s"), "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}}
    new = copy.deepcopy(old)
    new["spec"]["clusterIP"] = "10.96.0.11"
    assert only(validate_update("services", old, new)) == Cause(
        "FieldValueInvalid", 'Invalid value: "10.96.0.11": field is immutable', "spec.clusterIP"
    )


def test_configmap_keys_and_immutable_data() -> None:
    bad = {"metadata": meta(), "data": {"bad key": "1", "k": "1"}, "binaryData": {"k": "MQ=="}}
    causes = validate_create("configmaps", bad)
    assert fields(causes) == ["data[bad key]", "binaryData[k]"]
    old = {"metadata": meta(), "data": {"a": "1"}, "immutable": True}
    new = copy.deepcopy(old)
    new["data"]["a"] = "2"
    assert fields(validate_update("configmaps", old, new)) == ["data"]


def test_secret_type_is_immutable() -> None:
    old = {"metadata": meta(), "type": "Opaque", "data": {}}
    new = {**copy.deepcopy(old), "type": "kubernetes.io/tls"}
    assert fields(validate_update("secrets", old, new)) == ["type"]


def test_legacy_event_namespace_rule() -> None:
    event = {
        "metadata": meta("p.1", "ns"),
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"},
    }
    assert only(validate_create("events", event)) == Cause(
        "FieldValueInvalid",
        'Invalid value: "other": does not match event.namespace',
        "involvedObject.namespace",
    )
    event["involvedObject"]["namespace"] = "ns"
    assert validate_create("events", event) == []


def test_event_with_event_time_needs_reporting_fields() -> None:
    event = {
        "metadata": meta("p.1", "ns"),
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns"},
        "eventTime": "2025-01-02T03:04:05.000000Z",
    }
    causes = validate_create("events", event)
    required = {c.field for c in causes if c.reason == "FieldValueRequired"}
    assert required == {"reportingComponent", "reportingInstance", "action", "reason"}
    event.update(reportingComponent="kopf", reportingInstance="dev", action="Logging", reason="Hello")
    assert validate_create("events", event) == []


def test_lease_spec_rules() -> None:
    lease = {"metadata": meta("leader"), "spec": {"holderIdentity": "a", "leaseDurationSeconds": 0}}
    assert fields(validate_create("leases", lease)) == ["spec.leaseDurationSeconds"]


def test_job_rules_and_template_immutability() -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": pod()["spec"]}
    job = {"metadata": meta("j"), "spec": {"template": template, "backoffLimit": 2}}
    assert validate_create("jobs", job) == []
    always = copy.deepcopy(job)
    always["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert only(validate_create("jobs", always)).message == (
        'Unsupported value: "Always": supported values: "OnFailure", "Never"'
    )
    unset = copy.deepcopy(job)
    del unset["spec"]["template"]["spec"]["restartPolicy"]
    assert (
        only(validate_create("jobs", unset)).message == 'Required value: valid values: "OnFailure", "Never"'
    )
    negative = copy.deepcopy(job)
    negative["spec"]["completions"] = -1
    assert fields(validate_create("jobs", negative)) == ["spec.completions"]
    changed = copy.deepcopy(job)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    assert fields(validate_update("jobs", job, changed)) == ["spec.template"]


def pdb(**spec: Any) -> dict:
    return {"metadata": meta("budget"), "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


def test_pod_disruption_budget_counts_selector_and_policy() -> None:
    for spec in ({"minAvailable": 2}, {"minAvailable": "100%"}, {"maxUnavailable": 0}, {}):
        assert validate_create("poddisruptionbudgets", pdb(**spec)) == []
    assert validate_create("poddisruptionbudgets", {"metadata": meta("b"), "spec": {"selector": {}}}) == []
    assert only(validate_create("poddisruptionbudgets", pdb(minAvailable=-1))) == Cause(
        "FieldValueInvalid", "Invalid value: -1: must be greater than or equal to 0", "spec.minAvailable"
    )
    assert only(validate_create("poddisruptionbudgets", pdb(maxUnavailable="150%"))) == Cause(
        "FieldValueInvalid", 'Invalid value: "150%": must not be greater than 100%', "spec.maxUnavailable"
    )
    assert only(validate_create("poddisruptionbudgets", pdb(minAvailable="half"))).message.startswith(
        "Invalid value: \"half\": a valid percent string must be a numeric string followed by an ending '%'"
    )
    assert only(validate_create("poddisruptionbudgets", pdb(minAvailable=2**31))) == Cause(
        "FieldValueTypeInvalid", "Invalid value: 2147483648: must be of type int32", "spec.minAvailable"
    )
    both = only(validate_create("poddisruptionbudgets", pdb(minAvailable=1, maxUnavailable=1)))
    assert (both.field, both.message.endswith(": minAvailable and maxUnavailable cannot be both set")) == (
        "spec",
        True,
    )
    assert only(validate_create("poddisruptionbudgets", pdb(unhealthyPodEvictionPolicy="Never"))) == Cause(
        "FieldValueNotSupported",
        'Unsupported value: "Never": supported values: "AlwaysAllow", "IfHealthyBudget"',
        "spec.unhealthyPodEvictionPolicy",
    )


def test_pod_disruption_budget_selector_is_a_valid_label_selector() -> None:
    expressions = [
        {"key": "a", "operator": "In"},
        {"key": "b", "operator": "Exists", "values": ["x"]},
        {"key": "-c", "operator": "Bogus"},
        {"key": "d", "operator": "NotIn", "values": ["bad value"]},
    ]
    causes = validate_create("poddisruptionbudgets", pdb(selector={"matchExpressions": expressions}))
    path = "spec.selector.matchExpressions"
    assert [(c.field, c.message.split(":")[0]) for c in causes] == [
        (f"{path}[0].values", "Required value"),
        (f"{path}[1].values", "Forbidden"),
        (f"{path}[2].operator", "Invalid value"),
        (f"{path}[2].key", "Invalid value"),
        (f"{path}[3].values[0]", "Invalid value"),
    ]
    labels = validate_create("poddisruptionbudgets", pdb(selector={"matchLabels": {"a/b/c": "x"}}))
    assert fields(labels) == ["spec.selector.matchLabels"]
    assert fields(validate_create("poddisruptionbudgets", pdb(selector=["app"]))) == ["spec.selector"]


def test_pod_disruption_budget_status_counters_and_conditions() -> None:
    good = {
        "type": "DisruptionAllowed",
        "status": "True",
        "reason": "SufficientPods",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    budget = {**pdb(minAvailable=1), "status": {"disruptionsAllowed": 1, "conditions": [good]}}
    assert validate_create("poddisruptionbudgets", budget) == []
    bad_condition = {"type": "Other", "status": "Maybe", "reason": "no spaces allowed"}
    budget["status"] = {
        "currentHealthy": -1,
        "disruptedPods": {"p": "yesterday"},
        "conditions": [bad_condition, good, good],
    }
    assert fields(validate_create("poddisruptionbudgets", budget)) == [
        "status.currentHealthy",
        "status.disruptedPods[p]",
        "status.conditions[0].status",
        "status.conditions[0].lastTransitionTime",
        "status.conditions[0].reason",
        "status.conditions[2].type",
    ]


def crd(scope: str = "Namespaced") -> dict:
    return {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": scope,
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }


def test_crd_create_runs_crd_checks_and_scope_is_immutable() -> None:
    assert validate_create("customresourcedefinitions", crd()) == []
    bad = crd()
    bad["metadata"]["name"] = "other.example.com"
    assert fields(validate_create("customresourcedefinitions", bad)) == ["metadata.name"]
    assert only(validate_update("customresourcedefinitions", crd(), crd("Cluster"))) == Cause(
        "FieldValueInvalid", 'Invalid value: "Cluster": field is immutable', "spec.scope"
    )


# ----------------------------------------------------------------------------------------- message


def test_invalid_message_single_and_multiple_causes() -> None:
    one = [Cause("FieldValueRequired", "Required value", "spec.replicas")]
    assert invalid_message("PyTorchTrainingJob", "batch.tensorstack.dev", "j", one) == (
        'PyTorchTrainingJob.batch.tensorstack.dev "j" is invalid: spec.replicas: Required value'
    )
    two = [*one, Cause("FieldValueInvalid", 'Invalid value: "x": bad', "spec.mode"), one[0]]
    assert invalid_message("Pod", "", "p", two) == (
        'Pod "p" is invalid: [spec.replicas: Required value, spec.mode: Invalid value: "x": bad]'
    )


@pytest.mark.parametrize(
    "resource",
    [
        "pods",
        "services",
        "namespaces",
        "configmaps",
        "secrets",
        "events",
        "leases",
        "jobs",
        "nodes",
        "poddisruptionbudgets",
    ],
)
def test_every_resource_accepts_empty_garbage_without_crashing(resource: str) -> None:
    for body in (
        {},
        {"metadata": {}},
        {"metadata": meta(), "spec": "nonsense", "data": 3, "involvedObject": 1},
    ):
        causes = validate_create(resource, body)
        assert all(isinstance(c, Cause) for c in causes)
        assert validate_update(resource, body, body) is not None


_keys = st.sampled_from(
    [
        "metadata",
        "name",
        "namespace",
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
        "spec",
        "containers",
        "initContainers",
        "image",
        "env",
        "ports",
        "volumes",
        "volumeMounts",
        "template",
        "data",
        "involvedObject",
        "eventTime",
        "restartPolicy",
        "type",
        "port",
        "uid",
        "generateName",
        "tolerations",
        "minAvailable",
        "maxUnavailable",
        "selector",
        "matchExpressions",
        "status",
        "conditions",
        "disruptedPods",
    ]
)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2, 70000), st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=20,
)
_bodies = st.dictionaries(_keys, _json, max_size=5)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        [
            "pods",
            "services",
            "namespaces",
            "configmaps",
            "secrets",
            "events",
            "leases",
            "jobs",
            "poddisruptionbudgets",
            "widgets",
            "customresourcedefinitions",
        ]
    ),
    _bodies,
    _bodies,
)
def test_malformed_bodies_give_causes_never_exceptions(resource: str, old: dict, new: dict) -> None:
    assert all(isinstance(c, Cause) for c in validate_create(resource, new))
    assert all(isinstance(c, Cause) for c in validate_update(resource, old, new))


def test_wrong_json_types_are_type_invalid_causes() -> None:
    bad = pod()
    bad["metadata"]["name"] = ["p"]
    bad["spec"]["containers"][0]["command"] = "sleep 1"
    causes = validate_create("pods", bad)
    assert (
        Cause("FieldValueTypeInvalid", 'Invalid value: ["p"]: must be of type string', "metadata.name")
        in causes
    )
    assert (
        Cause(
            "FieldValueTypeInvalid",
            'Invalid value: "sleep 1": must be of type array',
            "spec.containers[0].command",
        )
        in causes
    )


@pytest.mark.parametrize(
    "value,printed",
    [
        (None, "null"),
        (True, "true"),
        (3, "3"),
        (3.0, "3"),
        (2.5, "2.5"),
        ('a"b', '"a\\"b"'),
        (["x"], '["x"]'),
    ],
)
def test_values_print_like_field_errors(value: Any, printed: str) -> None:
    assert fe.invalid("f", value, "d").message == f"Invalid value: {printed}: d"


def test_singular_units_in_limits() -> None:
    assert fe.too_long("f", 1).message == "Too long: may not be more than 1 byte"
    assert fe.too_many("f", 2, 1).message == "Too many: 2: must have at most 1 item"


def test_container_resources_names_quantities_and_limits() -> None:
    good = pod()
    good["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1},
        "requests": {"cpu": "500m", "memory": "512Mi", "nvidia.com/gpu": "1"},
    }
    assert validate_create("pods", good) == []
    bad = pod()
    bad["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1", "gpu": "1", "memory": "1x", "nvidia.com/gpu": "2"},
        "requests": {"cpu": "2", "example.com/fpga": "1", "nvidia.com/gpu": "1", "ephemeral-storage": "-1"},
    }
    causes = validate_create("pods", bad)
    base = "spec.containers[0].resources"
    expected = [
        ('Invalid value: "gpu": must be a standard resource for containers', f"{base}.limits[gpu]"),
        (
            'Invalid value: "1x": quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            f"{base}.limits[memory]",
        ),
        ('Invalid value: "2": must be less than or equal to cpu limit of 1', f"{base}.requests"),
        ('Invalid value: "1": must be equal to nvidia.com/gpu limit of 2', f"{base}.requests"),
    ]
    for message, field in expected:
        assert Cause("FieldValueInvalid", message, field) in causes
    required = "Required value: Limit must be set for non overcommitable resources"
    assert Cause("FieldValueRequired", required, f"{base}.limits") in causes
    assert f"{base}.requests[ephemeral-storage]" in fields(causes)
    fractional = pod()
    fractional["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "500m"}}
    assert only(validate_create("pods", fractional)).message == 'Invalid value: "500m": must be an integer'


def test_env_value_from_sources() -> None:
    good = pod()
    good["spec"]["containers"][0]["env"] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "ROLE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['example.com/role']"}}},
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "password"}}},
        {"name": "CFG", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "a.b"}}},
    ]
    assert validate_create("pods", good) == []
    bad = pod()
    bad["spec"]["containers"][0]["env"] = [
        {"name": "A", "valueFrom": {}},
        {"name": "B", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {
            "name": "C",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.name"},
                "secretKeyRef": {"name": "s", "key": "k"},
            },
        },
        {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}},
        {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "c"}}},
    ]
    causes = validate_create("pods", bad)
    env = "spec.containers[0].env"
    messages = {c.field: c.message for c in causes}
    assert messages[f"{env}[0].valueFrom"].endswith(
        "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
    )
    assert (
        messages[f"{env}[1].valueFrom"] == 'Invalid value: "": may not be specified when `value` is not empty'
    )
    assert messages[f"{env}[2].valueFrom"].endswith("may not have more than one field specified at a time")
    assert messages[f"{env}[3].valueFrom.fieldRef.fieldPath"].startswith(
        'Unsupported value: "spec.containers": supported values: "metadata.name", "metadata.namespace"'
    )
    assert messages[f"{env}[4].valueFrom.configMapKeyRef.key"] == "Required value"


def test_hostname_subdomain_and_service_account_names() -> None:
    good = pod(hostname="worker-0", subdomain="job-svc", serviceAccountName="runner")
    assert validate_create("pods", good) == []
    bad = pod(hostname="Worker_0", subdomain="a.b", serviceAccountName="Bad!")
    assert set(fields(validate_create("pods", bad))) == {
        "spec.hostname",
        "spec.subdomain",
        "spec.serviceAccountName",
    }


def test_volume_sources() -> None:
    good = pod(
        volumes=[
            {"name": "a", "emptyDir": {}},
            {"name": "b", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "p"}]}},
            {"name": "c", "secret": {"secretName": "s"}},
            {"name": "d", "hostPath": {"path": "/tmp"}},
            {
                "name": "e",
                "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]},
            },
            {"name": "f", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
        ]
    )
    assert validate_create("pods", good) == []  # downwardAPI items name a field, not a key
    bad = pod(
        volumes=[
            {"name": "a"},
            {"name": "b", "emptyDir": {}, "hostPath": {"path": "/x"}},
            {"name": "c", "configMap": {"items": [{"key": "k"}]}},
            {"name": "d", "secret": {}},
        ]
    )
    causes = validate_create("pods", bad)
    assert (
        Cause("FieldValueRequired", "Required value: must specify a volume type", "spec.volumes[0]") in causes
    )
    assert (
        Cause(
            "FieldValueForbidden",
            "Forbidden: may not specify more than 1 volume type",
            "spec.volumes[1].hostPath",
        )
        in causes
    )
    assert {"spec.volumes[2].configMap.name", "spec.volumes[2].configMap.items[0].path"} <= set(
        fields(causes)
    )
    assert "spec.volumes[3].secret.secretName" in fields(causes)


def test_service_cluster_ip_secret_data_and_namespace_finalizers() -> None:
    svc = {"metadata": meta("s"), "spec": {"clusterIP": "10.96.0.300", "ports": [{"port": 80}]}}
    assert fields(validate_create("services", svc)) == ["spec.clusterIP"]
    svc["spec"]["clusterIP"] = "None"
    assert validate_create("services", svc) == []
    secret = {"metadata": meta(), "data": {"ok": "aGk=", "bad": "not base64!"}}
    assert only(validate_create("secrets", secret)).field == "data[bad]"
    ns = {
        "metadata": meta("team", None),
        "spec": {"finalizers": ["kubernetes", "example.com/cleanup", "custom"]},
    }
    assert only(validate_create("namespaces", ns)).message == (
        'Invalid value: "custom": name is neither a standard finalizer name nor is it fully qualified'
    )


def test_deeply_nested_objects_give_a_cause_not_a_crash() -> None:
    deep = json.loads('{"a":' * 900 + "1" + "}" * 900)
    old = pod(extra=deep)
    new = json.loads(json.dumps(old))
    new["spec"]["containers"][0]["image"] = "other"
    causes = validate_update("pods", old, new)
    assert all(isinstance(c, Cause) for c in causes)


def _workload(**spec: Any) -> dict:
    labels = {"app": "w"}
    pod_spec = {**pod()["spec"], "restartPolicy": "Always"}
    return {
        "metadata": meta("w"),
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            **spec,
        },
    }


def test_deployment_rollout_parameters() -> None:
    assert validate_create("deployments", _workload(strategy={"type": "RollingUpdate"})) == []
    over = _workload(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "120%"}})
    assert (
        only(validate_create("deployments", over)).message
        == 'Invalid value: "120%": must not be greater than 100%'
    )
    word = _workload(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "lots"}})
    assert only(validate_create("deployments", word)).field == "spec.strategy.rollingUpdate.maxSurge"
    kind = _workload(strategy={"type": "BlueGreen"})
    assert only(validate_create("deployments", kind)).message == (
        'Unsupported value: "BlueGreen": supported values: "Recreate", "RollingUpdate"'
    )
    deadline = _workload(strategy={"type": "Recreate"}, minReadySeconds=10, progressDeadlineSeconds=10)
    assert only(validate_create("deployments", deadline)).message == (
        "Invalid value: 10: must be greater than minReadySeconds"
    )


def test_workload_selectors_per_kind() -> None:
    for plural, word in (
        ("deployments", "deployment"),
        ("statefulsets", "statefulset"),
        ("daemonsets", "daemonset"),
    ):
        empty = _workload(updateStrategy={"type": "OnDelete"}, podManagementPolicy="Parallel")
        if plural == "deployments":
            empty = _workload(strategy={"type": "Recreate"})
        empty["spec"]["selector"] = {}
        assert (
            only(validate_create(plural, empty)).message
            == f"Invalid value: {{}}: empty selector is invalid for {word}"
        )
    expression = _workload(strategy={"type": "Recreate"})
    expression["spec"]["selector"] = {
        "matchExpressions": [{"key": "app", "operator": "In", "values": ["w", "v"]}]
    }
    assert validate_create("deployments", expression) == []
    expression["spec"]["selector"]["matchExpressions"][0]["operator"] = "NotIn"
    assert only(validate_create("deployments", expression)).field == "spec.template.metadata.labels"


def test_statefulset_only_some_fields_change() -> None:
    old = _workload(updateStrategy={"type": "RollingUpdate"}, podManagementPolicy="OrderedReady", replicas=1)
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 3
    scaled["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    assert validate_update("statefulsets", old, scaled) == []
    renamed = copy.deepcopy(old)
    renamed["spec"]["podManagementPolicy"] = "Parallel"
    assert only(validate_update("statefulsets", old, renamed)).field == "spec"


def test_api_service_rules() -> None:
    local = {
        "metadata": meta("v1.x.dev", namespace=None),
        "spec": {"group": "x.dev", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1},
    }
    assert validate_create("apiservices", local) == []
    bundled = copy.deepcopy(local)
    bundled["spec"]["caBundle"] = "YQ=="
    assert only(validate_create("apiservices", bundled)).message == (
        "Forbidden: local APIServices may not have a caBundle"
    )
    ranked = copy.deepcopy(local)
    ranked["spec"]["versionPriority"] = 1001
    assert only(validate_create("apiservices", ranked)).message == (
        "Invalid value: 1001: must be positive and less than 1000"
    )
    served = copy.deepcopy(local)
    served["spec"]["service"] = {"namespace": "ns", "port": 443}
    assert only(validate_create("apiservices", served)).message == "Required value"


def test_rbac_rules_and_bindings() -> None:
    role = {
        "metadata": meta("system:odd name"),
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }
    assert validate_create("roles", role) == []  # RBAC names are path segments, not DNS names
    assert [c.field for c in validate_create("roles", {**role, "metadata": meta("a/b")})] == ["metadata.name"]
    both = {
        "metadata": meta("x", None),
        "rules": [{"nonResourceURLs": ["/x"], "resources": ["pods"], "verbs": ["get"]}],
    }
    assert only(validate_create("clusterroles", both)).message == (
        'Invalid value: ["/x"]: rules cannot apply to both regular resources and non-resource URLs'
    )
    no_group = {"metadata": meta("x", None), "rules": [{"resources": ["pods"], "verbs": ["get"]}]}
    assert only(validate_create("clusterroles", no_group)).field == "rules[0].apiGroups"
    binding = {
        "metadata": meta("b", None),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "apiGroup": "", "name": "sa"}],
    }
    assert only(validate_create("clusterrolebindings", binding)).field == "subjects[0].namespace"
    binding["subjects"][0]["namespace"] = "ns"
    assert validate_create("clusterrolebindings", binding) == []
    changed = copy.deepcopy(binding)
    changed["roleRef"]["name"] = "other"
    assert only(validate_update("clusterrolebindings", binding, changed)).field == "roleRef"
    odd = copy.deepcopy(binding)
    odd["subjects"] = [{"kind": "Robot", "name": "r"}]
    assert only(validate_create("clusterrolebindings", odd)).message == (
        'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"'
    )
