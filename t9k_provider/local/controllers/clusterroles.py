"""ClusterRole aggregation: a ClusterRole with an ``aggregationRule`` gets the rules of the ClusterRoles its
selectors match (kube-controller-manager's clusterrole-aggregation controller)."""

from __future__ import annotations

from t9k_provider.local.apiserver.strategies import rbac
from t9k_provider.local.controllers.serverside import ServerSide
from t9k_provider.local.machinery.jsonvalues import json_copy


class ClusterRoleAggregator:
    def __init__(self, side: ServerSide) -> None:
        self.side = side

    def sync(self) -> None:
        side = self.side
        roles = side.store.list(rbac.GROUP, rbac.CLUSTER_ROLES.plural)
        for role in roles:
            rules = rbac.aggregated_rules(role, roles)
            if rules is None or rules == (role.get("rules") or []):
                continue
            new = json_copy(role)
            new["rules"] = rules
            name = role["metadata"]["name"]
            side.attempt(f"aggregate clusterrole {name}", side.objects.write, rbac.CLUSTER_ROLES, role, new)
