"""ServiceAccounts: the namespace controller gives every namespace a ``default`` one; ``token`` issues
their tokens (``tokenrequests.py``)."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.machinery.strategicpatch import MergeField


class ServiceAccountStrategy(Strategy):
    subresources = ("token",)
    merge_fields = {"secrets": MergeField("merge", "name")}


def default_service_account(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    }


RESOURCE = Resource.builtin("", "ServiceAccount", ServiceAccountStrategy(), short_names=["sa"])
