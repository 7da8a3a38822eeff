"""The RBAC authorizer's pure parts: request attributes from a request line, and rule matching."""

from __future__ import annotations

import pytest

from t9k_provider.local.apiserver.generic.authz import (
    Attributes,
    UserInfo,
    forbidden,
    request_attributes,
    rule_allows,
)


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/n/pods", {}, ("list", "", "pods", "", "n", "")),
        ("GET", "/api/v1/namespaces/n/pods", {"watch": "true"}, ("watch", "", "pods", "", "n", "")),
        ("GET", "/api/v1/namespaces/n/pods/p/log", {}, ("get", "", "pods", "log", "n", "p")),
        (
            "POST",
            "/apis/apps/v1/namespaces/n/deployments",
            {},
            ("create", "apps", "deployments", "", "n", ""),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/n/configmaps",
            {},
            ("deletecollection", "", "configmaps", "", "n", ""),
        ),
        ("PUT", "/api/v1/namespaces/n/finalize", {}, ("update", "", "namespaces", "finalize", "n", "n")),
        ("GET", "/api/v1/namespaces/n", {}, ("get", "", "namespaces", "", "n", "n")),
        ("PATCH", "/api/v1/nodes/x/status", {}, ("patch", "", "nodes", "status", "", "x")),
    ],
)
def test_request_attributes(method: str, path: str, query: dict[str, str], expected: tuple[str, ...]) -> None:
    attrs = request_attributes(method, path, query)
    assert attrs.resource_request
    assert (
        attrs.verb,
        attrs.api_group,
        attrs.resource,
        attrs.subresource,
        attrs.namespace,
        attrs.name,
    ) == expected


@pytest.mark.parametrize("path", ["/api", "/apis", "/apis/apps", "/version", "/healthz", "/openapi/v3"])
def test_non_resource_requests(path: str) -> None:
    attrs = request_attributes("GET", path, {})
    assert not attrs.resource_request and attrs.verb == "get" and attrs.path == path


def _res(verb: str, resource: str, sub: str = "", name: str = "", group: str = "") -> Attributes:
    return Attributes(verb, "", True, group, "v1", resource, sub, "n", name)


def test_rule_matching() -> None:
    rule = {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}
    assert rule_allows(rule, _res("get", "pods"))
    assert rule_allows(rule, _res("get", "pods", "log"))
    assert not rule_allows(rule, _res("get", "pods", "exec"))
    assert not rule_allows(rule, _res("create", "pods"))
    assert not rule_allows(rule, _res("get", "pods", group="apps"))
    assert rule_allows(
        {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]}, _res("patch", "x", "status")
    )
    assert not rule_allows(
        {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]}, _res("patch", "x")
    )
    named = {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get", "list"]}
    assert rule_allows(named, _res("get", "configmaps", name="a"))
    assert not rule_allows(named, _res("get", "configmaps", name="b"))
    assert not rule_allows(named, _res("list", "configmaps"))
    urls = {"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]}
    assert rule_allows(urls, Attributes("get", "/apis/apps/v1"))
    assert rule_allows(urls, Attributes("get", "/healthz"))
    assert not rule_allows(urls, Attributes("get", "/healthz/etcd"))
    assert not rule_allows(urls, Attributes("post", "/healthz"))
    assert not rule_allows(urls, _res("get", "pods"))


def test_forbidden_messages() -> None:
    user = UserInfo("system:serviceaccount:n:robot")
    err = forbidden(user, _res("get", "deployments", name="d", group="apps"))
    assert err.code == 403 and err.reason == "Forbidden"
    assert err.message == (
        'deployments.apps "d" is forbidden: User "system:serviceaccount:n:robot" cannot get resource '
        '"deployments" in API group "apps" in the namespace "n"'
    )
    assert err.details == {"name": "d", "group": "apps", "kind": "deployments"}
    cluster_scope = forbidden(user, Attributes("list", "", True, "", "v1", "nodes"))
    assert cluster_scope.message.endswith('cannot list resource "nodes" in API group "" at the cluster scope')
    path = forbidden(user, Attributes("get", "/metrics"))
    assert path.message == 'forbidden: User "system:serviceaccount:n:robot" cannot get path "/metrics"'
