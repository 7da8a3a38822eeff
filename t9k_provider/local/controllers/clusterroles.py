"""ClusterRole aggregation: a ClusterRole with an ``aggregationRule`` gets the rules of the ClusterRoles its
selectors match (kube-controller-manager's clusterrole-aggregation controller)."""

from __future__ import annotations

from functools import partial
from typing import Any

from t9k_provider.local.apiserver.strategies import rbac
from t9k_provider.local.controllers.serverside import Retries, ServerSide
from t9k_provider.local.machinery.jsonvalues import json_copy


class ClusterRoleAggregator:
    def __init__(self, side: ServerSide) -> None:
        self.side = side
        self.retries = Retries("clusterrole aggregation")

    def due_in(self) -> float | None:
        return self.retries.due_in()

    def sync(self) -> None:
        roles = self.side.store.list(rbac.GROUP, rbac.CLUSTER_ROLES.plural)
        for role in roles:
            self.retries.run(role["metadata"]["name"], partial(self._aggregate, role, roles))

    def _aggregate(self, role: dict[str, Any], roles: list[dict[str, Any]]) -> None:
        side = self.side
        rules = rbac.aggregated_rules(role, roles)
        if rules is None or rules == (role.get("rules") or []):
            return
        new = json_copy(role)
        new["rules"] = rules
        name = role["metadata"]["name"]
        side.attempt(f"aggregate clusterrole {name}", side.objects.write, rbac.CLUSTER_ROLES, role, new)
