"""ServiceAccounts: the namespace controller gives every namespace a ``default`` one."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.patch import MergeField
from t9k_provider.local.apiserver.resources import Resource
from t9k_provider.local.apiserver.strategies.base import Strategy


class ServiceAccountStrategy(Strategy):
    merge_fields = {"secrets": MergeField("merge", "name")}


def default_service_account(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    }


RESOURCE = Resource(
    "",
    "v1",
    "serviceaccounts",
    "serviceaccount",
    "ServiceAccount",
    ServiceAccountStrategy(),
    short_names=["sa"],
)
