"""SelfSubjectAccessReviews: create-only and never stored; the single token has full access, so every
review is allowed."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver import errors
from t9k_provider.local.apiserver.resources import Resource
from t9k_provider.local.apiserver.strategies.base import Strategy


class ReviewStrategy(Strategy):
    namespaced = False
    verbs = ("create",)

    def answer(self, res: Resource, body: Any) -> dict[str, Any]:
        """The review, answered from the request alone."""
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise errors.bad_request(f"a {res.kind} needs a spec")
        return {
            "kind": res.kind,
            "apiVersion": res.group_version,
            "metadata": {"creationTimestamp": None},
            "spec": body["spec"],
            "status": {"allowed": True, "reason": "t9k-local: the cluster token has full access"},
        }


RESOURCE = Resource(
    "authorization.k8s.io",
    "v1",
    "selfsubjectaccessreviews",
    "selfsubjectaccessreview",
    "SelfSubjectAccessReview",
    ReviewStrategy(),
)
