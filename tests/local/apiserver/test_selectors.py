"""Label and field selectors: grammar, matching and error messages of apimachinery."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t9k_provider.local.apiserver.served import BUILTIN
from t9k_provider.local.machinery.selectors import (
    FieldGetter,
    SelectorError,
    label_selector_from_spec,
    parse_field_selector,
    parse_label_selector,
)


def selectable(kind: str) -> dict[str, FieldGetter]:
    """The field selector fields a built-in kind's strategy declares (none for custom resources)."""
    return next((r.strategy.field_selectors for r in BUILTIN if r.kind == kind), {})


LABELS = {"app": "web", "tier": "", "n": "10", "example.com/role": "db"}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app=db", False),
        ("missing!=x", True),
        ("missing=x", False),
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("missing notin (db)", True),
        ("missing in (db)", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("n>9", True),
        ("n>10", False),
        ("n<11", True),
        ("missing>1", False),
        ("app>1", False),
        ("tier=", True),
        ("tier in (a,)", True),
        ("tier in ()", True),
        ("app in (,web)", True),
        ("example.com/role=db", True),
        ("  app = web ,  tier  ", True),
        ("app=web,tier=x", False),
        ("app in(web)", True),
        ("in=x", False),
        ("notin notin (x)", True),
    ],
)
def test_label_selector_matching(text: str, expected: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is expected


def test_airflow_pod_operator_selector() -> None:
    sel = parse_label_selector("dag_id=d,kubernetes_pod_operator=True,already_checked!=True,!airflow-worker")
    assert sel.matches({"dag_id": "d", "kubernetes_pod_operator": "True"})
    assert not sel.matches({"dag_id": "d", "kubernetes_pod_operator": "True", "already_checked": "True"})
    assert not sel.matches({"dag_id": "d", "kubernetes_pod_operator": "True", "airflow-worker": "1"})


def test_none_labels_behave_as_empty() -> None:
    assert parse_label_selector("a!=b,!c").matches(None)
    assert not parse_label_selector("a").matches(None)


@pytest.mark.parametrize(
    "text,message",
    [
        ("app=", None),
        ("app in", "unable to parse requirement: found '' expected: '('"),
        ("app in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("app in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("app in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
        ("app in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("app foo", "unable to parse requirement: found 'foo', expected: in, notin, =, ==, !=, gt, lt"),
        ("=x", "found '=', expected: !, identifier, or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a=(", "unable to parse requirement: found '(', expected: identifier"),
        ("n>x", None),
    ],
)
def test_label_selector_syntax_errors(text: str, message: str | None) -> None:
    if message is None:
        if text == "app=":
            assert parse_label_selector(text).matches({"app": ""})
            return
        with pytest.raises(SelectorError) as err:
            parse_label_selector(text)
        assert "for 'Gt', 'Lt' operators, the value must be an integer" in str(err.value)
        return
    with pytest.raises(SelectorError) as err:
        parse_label_selector(text)
    assert str(err.value) == message


def test_invalid_key_message_matches_server() -> None:
    with pytest.raises(SelectorError) as err:
        parse_label_selector("a/b/c=x")
    assert str(err.value).startswith(
        'unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name '
    )


def test_invalid_value_message_matches_server() -> None:
    with pytest.raises(SelectorError) as err:
        parse_label_selector("app=-bad")
    assert str(err.value) == (
        'unable to parse requirement: values[0][app]: Invalid value: "-bad": '
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character "
        "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    )


def test_value_too_long() -> None:
    with pytest.raises(SelectorError, match="must be no more than 63 characters"):
        parse_label_selector("app=" + "a" * 64)


label_keys = st.sampled_from(["a", "b", "c", "x.io/d"])
label_values = st.sampled_from(["", "1", "v", "w"])
label_sets = st.dictionaries(label_keys, label_values, max_size=4)


@settings(max_examples=200, deadline=None)
@given(label_sets, label_keys, st.lists(label_values.filter(bool), min_size=1, max_size=3))
def test_in_and_notin_are_complementary(labels: dict, key: str, values: list) -> None:
    joined = ",".join(values)
    positive = parse_label_selector(f"{key} in ({joined})").matches(labels)
    negative = parse_label_selector(f"{key} notin ({joined})").matches(labels)
    assert positive != negative
    assert positive == (key in labels and labels[key] in values)


@settings(max_examples=200, deadline=None)
@given(label_sets, label_keys, label_values)
def test_equals_and_not_equals_are_complementary(labels: dict, key: str, value: str) -> None:
    assert parse_label_selector(f"{key}={value}").matches(labels) != parse_label_selector(
        f"{key}!={value}"
    ).matches(labels)


@settings(max_examples=200, deadline=None)
@given(label_sets, st.lists(st.tuples(label_keys, label_values), min_size=1, max_size=3))
def test_comma_is_conjunction(labels: dict, terms: list) -> None:
    parts = [f"{k}={v}" for k, v in terms]
    combined = parse_label_selector(",".join(parts)).matches(labels)
    assert combined == all(parse_label_selector(p).matches(labels) for p in parts)


# ------------------------------------------------------------------------------- from spec


def test_label_selector_from_spec() -> None:
    sel = label_selector_from_spec(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "n", "operator": "In", "values": ["10", "11"]},
                {"key": "gone", "operator": "DoesNotExist"},
                {"key": "tier", "operator": "Exists"},
                {"key": "app", "operator": "NotIn", "values": ["db"]},
            ],
        }
    )
    assert sel.matches(LABELS)
    assert not sel.matches({**LABELS, "gone": "1"})
    assert label_selector_from_spec({}).matches({})
    assert not label_selector_from_spec(None).matches(LABELS)


@pytest.mark.parametrize(
    "spec",
    [
        {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        {"matchLabels": {"bad key": "x"}},
    ],
)
def test_label_selector_from_spec_rejects_invalid(spec: dict) -> None:
    with pytest.raises(SelectorError):
        label_selector_from_spec(spec)


# ------------------------------------------------------------------------------- field selectors

POD = {
    "metadata": {"name": "p1", "namespace": "default"},
    "spec": {"nodeName": "node-0", "restartPolicy": "Never", "hostNetwork": True},
    "status": {"phase": "Running", "podIP": "10.0.0.2"},
}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", True),
        ("metadata.name=p1", True),
        ("metadata.name==p1", True),
        ("metadata.name!=p1", False),
        ("metadata.namespace=default,status.phase=Running", True),
        ("status.phase=Pending", False),
        ("spec.nodeName=node-0", True),
        ("spec.schedulerName=", True),
        ("spec.serviceAccountName!=", False),
        ("spec.hostNetwork=true", True),
        ("status.podIP=10.0.0.2", True),
        ("status.nominatedNodeName=", True),
        ("spec.restartPolicy=Never", True),
    ],
)
def test_pod_field_selectors(text: str, expected: bool) -> None:
    assert parse_field_selector(text, selectable("Pod")).matches(POD) is expected


def test_event_field_selectors() -> None:
    event = {
        "metadata": {"name": "e", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "ns", "uid": "u"},
        "reason": "Started",
        "source": {"component": "kubelet"},
        "type": "Normal",
        "reportingComponent": "kubelet",
    }
    sel = parse_field_selector(
        "involvedObject.name=p1,involvedObject.kind=Pod,reason=Started,source=kubelet,type=Normal,"
        "reportingComponent=kubelet,involvedObject.uid=u,involvedObject.fieldPath=",
        selectable("Event"),
    )
    assert sel.matches(event)
    assert not parse_field_selector("involvedObject.name=p2", selectable("Event")).matches(event)


def test_other_kind_fields() -> None:
    assert parse_field_selector("status.phase=Active", selectable("Namespace")).matches(
        {"status": {"phase": "Active"}}
    )
    assert parse_field_selector("type=Opaque", selectable("Secret")).matches({"type": "Opaque"})
    assert parse_field_selector("status.successful=1", selectable("Job")).matches(
        {"status": {"successful": 1}}
    )
    assert parse_field_selector("status.successful=0", selectable("Job")).matches({"status": {}})


@pytest.mark.parametrize(
    "text,kind",
    [("spec.foo=x", "Pod"), ("status.phase=Running", "ConfigMap"), ("spec.x=1", "PyTorchTrainingJob")],
)
def test_unsupported_field_label(text: str, kind: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_field_selector(text, selectable(kind))
    assert str(err.value) == f"field label not supported: {text.split('=')[0]}"


def test_custom_resources_support_metadata_fields() -> None:
    assert parse_field_selector("metadata.name=j", selectable("PyTorchTrainingJob")).matches(
        {"metadata": {"name": "j"}}
    )


@pytest.mark.parametrize("text", ["metadata.name", "metadata.name>1", "a in (b)"])
def test_field_selector_without_operator_is_rejected(text: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_field_selector(text, selectable("Pod"))
    assert "can't understand" in str(err.value)


def test_field_selector_escapes() -> None:
    obj = {"metadata": {"name": "a,b=c\\"}}
    assert parse_field_selector("metadata.name=a\\,b\\=c\\\\", selectable("ConfigMap")).matches(obj)
    with pytest.raises(SelectorError, match="invalid escape sequence"):
        parse_field_selector("metadata.name=a\\x", selectable("ConfigMap"))
    with pytest.raises(SelectorError, match="unescaped character"):
        parse_field_selector("metadata.name=a=b", selectable("ConfigMap"))


@pytest.mark.parametrize(
    "spec",
    [
        {"matchLabels": True},
        {"matchLabels": {"a": 1}},
        {"matchExpressions": True},
        {"matchExpressions": [None]},
        {"matchExpressions": [{"key": 1, "operator": "Exists"}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": "b"}]},
    ],
)
def test_label_selector_from_malformed_spec_raises_selector_error(spec: dict) -> None:
    with pytest.raises(SelectorError):
        label_selector_from_spec(spec)
