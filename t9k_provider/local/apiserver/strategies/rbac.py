"""rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings, validated as kube-apiserver does
(``pkg/apis/rbac/validation``), plus the bootstrap policy every cluster starts with.

The authorizer that reads them is ``authz.py``; aggregated ClusterRoles are filled by the server controllers.
Escalation checks (a subject may only grant what it holds) are omitted: only the admin writes RBAC objects
unless a role grants that explicitly.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic import authz
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.jsonvalues import json_equal
from t9k_provider.local.machinery.names import is_dns1123_subdomain, name_is_path_segment
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.machinery.selectors import SelectorError, label_selector_from_spec
from t9k_provider.local.storage.store import Store

GROUP = authz.GROUP
_SUBJECT_GROUPS = {"ServiceAccount": "", "User": GROUP, "Group": GROUP}


def _validate_rule(rule: dict[str, Any], path: str, namespaced: bool, out: list[Cause]) -> None:
    """``ValidatePolicyRule``."""
    verbs = decoding.string_items(rule, "verbs", f"{path}.verbs", out)
    if not verbs:
        out.append(fe.required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = decoding.string_items(rule, "nonResourceURLs", f"{path}.nonResourceURLs", out)
    groups = decoding.string_items(rule, "apiGroups", f"{path}.apiGroups", out)
    resources = decoding.string_items(rule, "resources", f"{path}.resources", out)
    names = decoding.string_items(rule, "resourceNames", f"{path}.resourceNames", out)
    if urls:
        field = f"{path}.nonResourceURLs"
        if namespaced:
            out.append(fe.invalid(field, urls, "namespaced rules cannot apply to non-resource URLs"))
        if groups or resources or names:
            both = "rules cannot apply to both regular resources and non-resource URLs"
            out.append(fe.invalid(field, urls, both))
        return
    if not groups:
        out.append(fe.required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not resources:
        out.append(fe.required(f"{path}.resources", "resource rules must supply at least one resource"))


class RoleStrategy(Strategy):
    name_check = staticmethod(name_is_path_segment)
    columns = [NAME_COLUMN, column("Created At", "date")]

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        for path, rule in decoding.object_items(obj, "rules", "rules", out):
            _validate_rule(rule, path, self.namespaced, out)

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        meta = obj["metadata"]
        return [meta["name"], meta.get("creationTimestamp")]


class ClusterRoleStrategy(RoleStrategy):
    namespaced = False

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        super().validate(obj, out)
        aggregation = decoding.object_field(obj, "aggregationRule", "aggregationRule", out)
        for path, selector in decoding.object_items(
            aggregation, "clusterRoleSelectors", "aggregationRule.clusterRoleSelectors", out
        ):
            try:
                label_selector_from_spec(selector)
            except SelectorError as exc:
                out.append(fe.invalid(path, selector, str(exc)))


class RoleBindingStrategy(Strategy):
    name_check = staticmethod(name_is_path_segment)
    role_kinds: tuple[str, ...] = ("Role", "ClusterRole")
    columns = [NAME_COLUMN, column("Role"), AGE_COLUMN]

    def prepare_for_create(self, obj: dict[str, Any], store: Store) -> None:
        self._default_subjects(obj)

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        self._default_subjects(new)

    @staticmethod
    def _default_subjects(obj: dict[str, Any]) -> None:
        """``SetDefaults_Subject``: the API group of each subject kind."""
        for subject in obj.get("subjects") or []:
            if (
                isinstance(subject, dict)
                and not subject.get("apiGroup")
                and subject.get("kind") in _SUBJECT_GROUPS
            ):
                subject["apiGroup"] = _SUBJECT_GROUPS[subject["kind"]]

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        ref = decoding.object_field(obj, "roleRef", "roleRef", out)
        api_group = decoding.text_field(ref, "apiGroup", "roleRef.apiGroup", out)
        if api_group != GROUP:
            out.append(fe.not_supported("roleRef.apiGroup", api_group, [GROUP]))
        kind = decoding.text_field(ref, "kind", "roleRef.kind", out)
        if kind not in self.role_kinds:
            out.append(fe.not_supported("roleRef.kind", kind, list(self.role_kinds)))
        name = decoding.required_text(ref, "name", "roleRef.name", out)
        for message in name_is_path_segment(name, False) if name else ():
            out.append(fe.invalid("roleRef.name", name, message))
        for path, subject in decoding.object_items(obj, "subjects", "subjects", out):
            self._validate_subject(subject, path, out)

    def _validate_subject(self, subject: dict[str, Any], path: str, out: list[Cause]) -> None:
        """``ValidateRoleBindingSubject``."""
        name = decoding.text_field(subject, "name", f"{path}.name", out)
        kind = decoding.text_field(subject, "kind", f"{path}.kind", out)
        group = decoding.text_field(subject, "apiGroup", f"{path}.apiGroup", out)
        namespace = decoding.text_field(subject, "namespace", f"{path}.namespace", out)
        if not name:
            out.append(fe.required(f"{path}.name", ""))
        if kind not in _SUBJECT_GROUPS:
            out.append(fe.not_supported(f"{path}.kind", kind, list(_SUBJECT_GROUPS)))
            return
        if group != _SUBJECT_GROUPS[kind]:
            out.append(fe.not_supported(f"{path}.apiGroup", group, [_SUBJECT_GROUPS[kind]]))
        if kind == "ServiceAccount":
            for message in is_dns1123_subdomain(name) if name else ():
                out.append(fe.invalid(f"{path}.name", name, message))
            if not namespace and not self.namespaced:
                out.append(fe.required(f"{path}.namespace", ""))

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        if not json_equal(old.get("roleRef"), new.get("roleRef")):
            out.append(fe.invalid("roleRef", new.get("roleRef"), "cannot change roleRef"))

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        meta, ref = obj["metadata"], obj.get("roleRef") or {}
        return [
            meta["name"],
            f"{ref.get('kind', '')}/{ref.get('name', '')}",
            age(meta.get("creationTimestamp")),
        ]


class ClusterRoleBindingStrategy(RoleBindingStrategy):
    namespaced = False
    role_kinds = ("ClusterRole",)


ROLES = Resource.builtin(GROUP, "Role", RoleStrategy())
CLUSTER_ROLES = Resource.builtin(GROUP, "ClusterRole", ClusterRoleStrategy())
ROLE_BINDINGS = Resource.builtin(GROUP, "RoleBinding", RoleBindingStrategy())
CLUSTER_ROLE_BINDINGS = Resource.builtin(GROUP, "ClusterRoleBinding", ClusterRoleBindingStrategy())

# -- the part of the bootstrap policy (``rbac/bootstrappolicy``) a local cluster needs

_BOOTSTRAP_META = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
}
_PUBLIC_PATHS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
_DISCOVERY_PATHS = ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", *_PUBLIC_PATHS]


def _cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "ClusterRole", "metadata": {"name": name, **_BOOTSTRAP_META}, "rules": rules}


def _binding(name: str, role: str, subjects: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, **_BOOTSTRAP_META},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": GROUP, "kind": kind, "name": subject} for kind, subject in subjects],
    }


BOOTSTRAP_CLUSTER_ROLES = [
    _cluster_role(
        "cluster-admin",
        [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
    ),
    _cluster_role("system:discovery", [{"nonResourceURLs": _DISCOVERY_PATHS, "verbs": ["get"]}]),
    _cluster_role("system:public-info-viewer", [{"nonResourceURLs": _PUBLIC_PATHS, "verbs": ["get"]}]),
    _cluster_role(
        "system:basic-user",
        [
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            },
            {
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["selfsubjectreviews"],
                "verbs": ["create"],
            },
        ],
    ),
]
BOOTSTRAP_CLUSTER_ROLE_BINDINGS = [
    _binding("cluster-admin", "cluster-admin", [("Group", "system:masters")]),
    _binding("system:discovery", "system:discovery", [("Group", "system:authenticated")]),
    _binding("system:basic-user", "system:basic-user", [("Group", "system:authenticated")]),
    _binding(
        "system:public-info-viewer",
        "system:public-info-viewer",
        [("Group", "system:authenticated"), ("Group", "system:unauthenticated")],
    ),
]


def aggregated_rules(role: dict[str, Any], roles: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rules an aggregated ClusterRole holds: those of every other ClusterRole its
    ``clusterRoleSelectors`` select, in name order, each once (``ClusterRoleAggregationController``);
    None for a role without an aggregation rule."""
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors")
    if not selectors:
        return None
    try:
        matchers = [label_selector_from_spec(s) for s in selectors]
    except SelectorError:
        return None
    rules: list[dict[str, Any]] = []
    name = role["metadata"]["name"]
    for other in sorted(roles, key=lambda r: r["metadata"]["name"]):
        labels = other["metadata"].get("labels")
        if other["metadata"]["name"] == name or not any(m.matches(labels) for m in matchers):
            continue
        rules += [r for r in other.get("rules") or [] if not any(json_equal(r, seen) for seen in rules)]
    return rules
