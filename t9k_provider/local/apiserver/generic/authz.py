"""Authorization as kube-apiserver's chain does it: members of ``system:masters`` may do anything, everyone
else what the RBAC objects in the store grant (``plugin/pkg/auth/authorizer/rbac``), answered per request
from its attributes (``RequestInfoFactory``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.storage.store import Store

#: The RBAC objects the authorizer reads (``rbac.authorization.k8s.io``).
GROUP = "rbac.authorization.k8s.io"

MASTERS = "system:masters"
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def status(self) -> dict[str, Any]:
        """As a SelfSubjectReview's ``status.userInfo`` shows it."""
        out: dict[str, Any] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


@dataclass(frozen=True)
class Attributes:
    verb: str
    path: str = ""
    resource_request: bool = False
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of one request; what is not under ``/api`` or ``/apis/<group>/<version>`` is a
    non-resource URL, authorized by path and the method's verb."""
    parts = [p for p in path.split("/") if p]
    lower = method.lower()
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Attributes(verb="get" if lower == "head" else lower, path=path)
    if not rest:
        return Attributes(verb="get" if lower == "head" else lower, path=path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method in ("GET", "HEAD"):
        watching = query.get("watch", "").lower() in ("1", "true")
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(method, lower)
    return Attributes(verb, path, True, group, version, resource, subresource, namespace, name)


def _matches(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    """``RuleAllows``: verbs, then API groups, resources (``pods/log``, ``*/status``) and resource names,
    or non-resource URLs (a trailing ``*`` matches a prefix)."""
    if not _matches(rule.get("verbs") or [], attrs.verb):
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if url == "*" or url == attrs.path or (url.endswith("*") and attrs.path.startswith(url[:-1])):
                return True
        return False
    if not _matches(rule.get("apiGroups") or [], attrs.api_group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    if not any(
        r in ("*", combined) or (attrs.subresource and r == f"*/{attrs.subresource}") for r in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: dict[str, Any], user: UserInfo, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


def _describe_subject(subject: dict[str, Any], binding_namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("namespace") or binding_namespace}/{subject.get("name")}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


class Authorizer:
    """Reads the RBAC objects from the store on every decision: a new binding counts at once."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def authorize(self, user: UserInfo, attrs: Attributes) -> tuple[bool, str]:
        """Whether ``user`` may do ``attrs``, and why (the reason a SubjectAccessReview shows)."""
        if MASTERS in user.groups:
            return True, ""
        for binding in self.store.list(GROUP, "clusterrolebindings"):
            allowed = self._binding_allows(binding, "", user, attrs, "ClusterRoleBinding")
            if allowed:
                return True, allowed
        if attrs.namespace:
            for binding in self.store.list(GROUP, "rolebindings", attrs.namespace):
                allowed = self._binding_allows(binding, attrs.namespace, user, attrs, "RoleBinding")
                if allowed:
                    return True, allowed
        return False, ""

    def rules_for(self, user: UserInfo, namespace: str) -> list[dict[str, Any]]:
        """Every rule granted to ``user`` in ``namespace`` (cluster-wide ones included), as a
        SelfSubjectRulesReview lists them (``RulesFor``)."""
        found: list[dict[str, Any]] = []
        bindings = [(b, "") for b in self.store.list(GROUP, "clusterrolebindings")]
        if namespace:
            bindings += [(b, namespace) for b in self.store.list(GROUP, "rolebindings", namespace)]
        for binding, ns in bindings:
            if any(_subject_matches(s, user, ns) for s in binding.get("subjects") or []):
                role = self._role(binding, ns)
                found += (role or {}).get("rules") or []
        return found

    def _role(self, binding: dict[str, Any], namespace: str) -> dict[str, Any] | None:
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            return self.store.get((GROUP, "clusterroles", "", ref.get("name", "")))
        return self.store.get((GROUP, "roles", namespace, ref.get("name", "")))

    def _binding_allows(
        self, binding: dict[str, Any], namespace: str, user: UserInfo, attrs: Attributes, kind: str
    ) -> str:
        """The reason this binding allows the request, or ''."""
        subject = next(
            (s for s in binding.get("subjects") or [] if _subject_matches(s, user, namespace)), None
        )
        if subject is None:
            return ""
        ref = binding.get("roleRef") or {}
        role = self._role(binding, namespace)
        if role is None or not any(rule_allows(r, attrs) for r in role.get("rules") or []):
            return ""
        name = binding["metadata"]["name"] + (f"/{namespace}" if namespace else "")
        return (
            f'RBAC: allowed by {kind} "{name}" of {ref.get("kind")} "{ref.get("name")}" to '
            f"{_describe_subject(subject, namespace)}"
        )


def forbidden_message(user: UserInfo, attrs: Attributes) -> str:
    """``forbiddenMessage`` of kube-apiserver's authorization filter."""
    if not attrs.resource_request:
        return f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    group = attrs.api_group
    return f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{group}" {where}'


def forbidden(user: UserInfo, attrs: Attributes) -> errors.ApiError:
    """The 403 Status kube-apiserver answers (``responsewriters.Forbidden``)."""
    message = forbidden_message(user, attrs)
    if not attrs.resource_request:
        return errors.forbidden(f"forbidden: {message}")
    qualified = errors.qualified(attrs.resource, attrs.api_group)
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    return errors.forbidden(f"{subject} is forbidden: {message}", attrs.name, attrs.resource, attrs.api_group)
