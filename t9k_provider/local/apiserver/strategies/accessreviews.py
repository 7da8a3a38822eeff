"""Reviews: create-only and never stored. SelfSubjectReview (``kubectl auth whoami``) answers who the caller
is; SelfSubjectAccessReview (``kubectl auth can-i``) and SubjectAccessReview answer from the RBAC rules
through the same authorizer that guards every request."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.authz import Attributes, Authorizer, UserInfo
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import invalid
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause


class ReviewStrategy(Strategy):
    namespaced = False
    verbs = ("create",)

    def answer(self, res: Resource, body: Any, user: UserInfo, authorizer: Authorizer) -> dict[str, Any]:
        """The review of ``body`` sent by ``user``."""
        if not isinstance(body, dict):
            raise errors.bad_request(f"a {res.kind} must be a JSON object")
        for field in ("metadata", "spec"):
            if body.get(field) is not None and not isinstance(body[field], dict):
                raise errors.bad_request(f"the {field} of a {res.kind} must be an object")
        spec = body.get("spec")
        return {
            "kind": res.kind,
            "apiVersion": res.group_version,
            "metadata": {"creationTimestamp": None},
            **self.review(res, spec or {}, user, authorizer),
        }

    def review(
        self, res: Resource, spec: dict[str, Any], user: UserInfo, authorizer: Authorizer
    ) -> dict[str, Any]:
        raise NotImplementedError


class SelfSubjectReviewStrategy(ReviewStrategy):
    def review(
        self, res: Resource, spec: dict[str, Any], user: UserInfo, authorizer: Authorizer
    ) -> dict[str, Any]:
        return {"status": {"userInfo": user.status()}}


class AccessReviewStrategy(ReviewStrategy):
    #: SubjectAccessReview names its subject in the spec; the self review asks for the caller
    names_subject: bool = False

    def review(
        self, res: Resource, spec: dict[str, Any], user: UserInfo, authorizer: Authorizer
    ) -> dict[str, Any]:
        out: list[Cause] = []
        resource = decoding.object_field(spec, "resourceAttributes", "spec.resourceAttributes", out)
        non_resource = decoding.object_field(spec, "nonResourceAttributes", "spec.nonResourceAttributes", out)
        if bool(resource) == bool(non_resource):
            out.append(
                fe.invalid(
                    "spec.resourceAttributes",
                    resource or None,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            )
        if resource:
            attrs = Attributes(
                verb=decoding.text_field(resource, "verb", "spec.resourceAttributes.verb", out),
                resource_request=True,
                api_group=decoding.text_field(resource, "group", "spec.resourceAttributes.group", out),
                api_version=decoding.text_field(resource, "version", "spec.resourceAttributes.version", out),
                resource=decoding.text_field(resource, "resource", "spec.resourceAttributes.resource", out),
                subresource=decoding.text_field(
                    resource, "subresource", "spec.resourceAttributes.subresource", out
                ),
                namespace=decoding.text_field(
                    resource, "namespace", "spec.resourceAttributes.namespace", out
                ),
                name=decoding.text_field(resource, "name", "spec.resourceAttributes.name", out),
            )
        else:
            attrs = Attributes(
                verb=decoding.text_field(non_resource, "verb", "spec.nonResourceAttributes.verb", out),
                path=decoding.text_field(non_resource, "path", "spec.nonResourceAttributes.path", out),
            )
        subject = user
        if self.names_subject:
            name = decoding.text_field(spec, "user", "spec.user", out)
            groups = decoding.string_items(spec, "groups", "spec.groups", out)
            if not name and not groups:
                out.append(fe.invalid("spec.user", name, "at least one of user or group must be specified"))
            extra = {
                k: tuple(v) if isinstance(v, list) else (str(v),)
                for k, v in decoding.object_field(spec, "extra", "spec.extra", out).items()
            }
            subject = UserInfo(name, tuple(groups), decoding.text_field(spec, "uid", "spec.uid", out), extra)
        if out:
            raise invalid(res, "", out)
        allowed, reason = authorizer.authorize(subject, attrs)
        status: dict[str, Any] = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return {"spec": spec, "status": status}


class SubjectAccessReviewStrategy(AccessReviewStrategy):
    names_subject = True


class SelfSubjectRulesReviewStrategy(ReviewStrategy):
    """``kubectl auth can-i --list``: the caller's rules in ``spec.namespace``."""

    def review(
        self, res: Resource, spec: dict[str, Any], user: UserInfo, authorizer: Authorizer
    ) -> dict[str, Any]:
        out: list[Cause] = []
        namespace = decoding.text_field(spec, "namespace", "spec.namespace", out)
        if out:
            raise invalid(res, "", out)
        resource_rules, non_resource_rules = [], []
        for rule in authorizer.rules_for(user, namespace):
            if rule.get("nonResourceURLs"):
                non_resource_rules.append(
                    {"verbs": rule["verbs"], "nonResourceURLs": rule["nonResourceURLs"]}
                )
            else:
                keys = ("verbs", "apiGroups", "resources", "resourceNames")
                resource_rules.append({k: rule[k] for k in keys if rule.get(k)})
        status = {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": False,
        }
        return {"spec": spec, "status": status}


_AUTHORIZATION = "authorization.k8s.io"
SELF_SUBJECT_ACCESS_REVIEWS = Resource.builtin(
    _AUTHORIZATION, "SelfSubjectAccessReview", AccessReviewStrategy()
)
SUBJECT_ACCESS_REVIEWS = Resource.builtin(
    _AUTHORIZATION, "SubjectAccessReview", SubjectAccessReviewStrategy()
)
SELF_SUBJECT_RULES_REVIEWS = Resource.builtin(
    _AUTHORIZATION, "SelfSubjectRulesReview", SelfSubjectRulesReviewStrategy()
)
SELF_SUBJECT_REVIEWS = Resource.builtin(
    "authentication.k8s.io", "SelfSubjectReview", SelfSubjectReviewStrategy()
)
